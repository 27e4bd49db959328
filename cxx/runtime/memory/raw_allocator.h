// Raw allocators: where the caching allocator's segments come from.
#ifndef BRAZE_RUNTIME_MEMORY_RAW_ALLOCATOR_H
#define BRAZE_RUNTIME_MEMORY_RAW_ALLOCATOR_H

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

namespace braze::memory {

// Raised where a raw allocator cannot exist (no CUDA driver, no device).
struct Unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class RawAllocator {
public:
  virtual ~RawAllocator() = default;
  // `size` bytes aligned to kAlignment, or nullptr when memory is exhausted.
  virtual void *allocate(size_t size) = 0;
  virtual void release(void *address, size_t size) = 0;
  // "cpu", "cuda", or a custom allocator's name.
  virtual const std::string &device() const = 0;
  virtual int ordinal() const { return 0; }
  // The DLPack device type of its memory (1 host, 2 CUDA).
  virtual int dlpackDevice() const { return 1; }
};

std::unique_ptr<RawAllocator> makeHostAllocator();
// Throws Unavailable when libcuda.so.1 does not load or the device is absent.
std::unique_ptr<RawAllocator> makeCudaAllocator(int ordinal);
using RawAllocateFn = void *(*)(size_t, void *);
using RawReleaseFn = void (*)(void *, size_t, void *);
std::unique_ptr<RawAllocator> makeCustomAllocator(RawAllocateFn allocate, RawReleaseFn release,
                                                  void *context, std::string name);

} // namespace braze::memory

#endif
