// The C interface over CachingAllocator (api.h).
#include "api.h"

#include "caching_allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

using braze::memory::Block;
using braze::memory::CachingAllocator;

struct braze_mem_status_s {
  braze_mem_code_t code;
  std::string message;
};

struct braze_mem_allocator_s {
  std::shared_ptr<CachingAllocator> allocator;
};

namespace {
braze_mem_status_t failure(braze_mem_code_t code, std::string message) {
  return new braze_mem_status_s{code, std::move(message)};
}

// Runs `body`, turning the allocator's exceptions into statuses.
template <typename Body> braze_mem_status_t guarded(Body body) {
  try {
    body();
    return nullptr;
  } catch (const braze::memory::Unavailable &e) {
    return failure(BRAZE_MEM_UNAVAILABLE, e.what());
  } catch (const std::length_error &e) {
    return failure(BRAZE_MEM_OUT_OF_MEMORY, e.what());
  } catch (const std::invalid_argument &e) {
    return failure(BRAZE_MEM_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc &) {
    return failure(BRAZE_MEM_OUT_OF_MEMORY, "out of host memory for the allocator's bookkeeping");
  }
}

braze_mem_status_t created(std::unique_ptr<braze::memory::RawAllocator> raw,
                           braze_mem_allocator_t **out) {
  *out = new braze_mem_allocator_s{std::make_shared<CachingAllocator>(std::move(raw))};
  return nullptr;
}

// DLPack 0.8's legacy structs (dlpack.h), spelled here to keep the runtime
// free of a header dependency.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(DLManagedTensor *);
};
constexpr uint8_t kDLUInt = 1;

// One DLPack tensor's storage: the tensor, its shape, and what its deleter
// gives back (the allocator is kept alive by the tensor).
struct ManagedBlock {
  DLManagedTensor managed;
  int64_t shape[1];
  std::shared_ptr<CachingAllocator> owner;
  Block *block;
};

void deleteManagedBlock(DLManagedTensor *managed) {
  auto *held = static_cast<ManagedBlock *>(managed->manager_ctx);
  try {
    held->owner->free(held->block);
  } catch (const std::exception &) {
    // A deleter cannot fail; the block was live by construction.
  }
  delete held;
}
} // namespace

extern "C" {

braze_mem_code_t braze_mem_status_code(braze_mem_status_t status) {
  return status ? status->code : BRAZE_MEM_OK;
}
const char *braze_mem_status_message(braze_mem_status_t status) {
  return status ? status->message.c_str() : "";
}
void braze_mem_status_free(braze_mem_status_t status) { delete status; }

braze_mem_status_t braze_mem_create_host(braze_mem_allocator_t **out) {
  return guarded([&] { created(braze::memory::makeHostAllocator(), out); });
}

braze_mem_status_t braze_mem_create_cuda(int ordinal, braze_mem_allocator_t **out) {
  return guarded([&] { created(braze::memory::makeCudaAllocator(ordinal), out); });
}

braze_mem_status_t braze_mem_create_custom(braze_mem_raw_allocate_fn allocate,
                                           braze_mem_raw_release_fn release, void *context,
                                           const char *name, braze_mem_allocator_t **out) {
  if (!allocate || !release)
    return failure(BRAZE_MEM_INVALID_ARGUMENT, "a custom raw allocator needs both functions");
  return guarded([&] {
    created(braze::memory::makeCustomAllocator(allocate, release, context, name ? name : "custom"),
            out);
  });
}

void braze_mem_release(braze_mem_allocator_t *allocator) { delete allocator; }

braze_mem_status_t braze_mem_allocate(braze_mem_allocator_t *allocator, size_t size, void **block,
                                      void **address) {
  return guarded([&] {
    Block *taken = allocator->allocator->allocate(size);
    *block = taken;
    *address = taken->address;
  });
}

braze_mem_status_t braze_mem_free(braze_mem_allocator_t *allocator, void *block) {
  return guarded([&] { allocator->allocator->free(static_cast<Block *>(block)); });
}

braze_mem_status_t braze_mem_allocate_dlpack(braze_mem_allocator_t *allocator, size_t size,
                                             void **managed_tensor) {
  return guarded([&] {
    CachingAllocator &owner = *allocator->allocator;
    Block *block = owner.allocate(size);
    auto *held = new ManagedBlock{};
    held->owner = allocator->allocator;
    held->block = block;
    held->shape[0] = static_cast<int64_t>(size);
    DLTensor &tensor = held->managed.dl_tensor;
    tensor.data = block->address;
    tensor.device = {owner.raw().dlpackDevice(), owner.raw().ordinal()};
    tensor.ndim = 1;
    tensor.dtype = {kDLUInt, 8, 1};
    tensor.shape = held->shape;
    tensor.strides = nullptr;
    tensor.byte_offset = 0;
    held->managed.manager_ctx = held;
    held->managed.deleter = deleteManagedBlock;
    *managed_tensor = &held->managed;
  });
}

braze_mem_status_t braze_mem_stats(braze_mem_allocator_t *allocator, braze_mem_stats_t *out) {
  return guarded([&] {
    braze::memory::Stats now = allocator->allocator->stats();
    *out = braze_mem_stats_t{now.allocated,      now.requested,     now.reserved,
                             now.peakAllocated,  now.peakReserved,  now.threadCached,
                             now.freeBytes,      now.largestFree,   now.allocations,
                             now.frees,          now.activeBlocks,  now.threadCacheHits,
                             now.segments,       now.rawAllocations, now.rawReleases,
                             now.fragmentation};
  });
}

void braze_mem_reset_peak(braze_mem_allocator_t *allocator) { allocator->allocator->resetPeak(); }

void braze_mem_empty_cache(braze_mem_allocator_t *allocator) { allocator->allocator->emptyCache(); }

braze_mem_status_t braze_mem_snapshot_json(braze_mem_allocator_t *allocator, char **json) {
  return guarded([&] {
    std::string text = allocator->allocator->snapshotJson();
    char *copy = static_cast<char *>(std::malloc(text.size() + 1));
    if (!copy)
      throw std::bad_alloc();
    std::memcpy(copy, text.c_str(), text.size() + 1);
    *json = copy;
  });
}

void braze_mem_string_free(char *string) { std::free(string); }

const char *braze_mem_device(braze_mem_allocator_t *allocator, int *ordinal) {
  *ordinal = allocator->allocator->raw().ordinal();
  return allocator->allocator->raw().device().c_str();
}

} // extern "C"
