#include "raw_allocator.h"

#include "caching_allocator.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace braze::memory {
namespace {

class HostAllocator final : public RawAllocator {
public:
  void *allocate(size_t size) override {
    // aligned_alloc wants a size that is a multiple of the alignment; segment
    // sizes always are.
    return std::aligned_alloc(kAlignment, size);
  }
  void release(void *address, size_t) override { std::free(address); }
  const std::string &device() const override { return name_; }

private:
  std::string name_ = "cpu";
};

class CustomAllocator final : public RawAllocator {
public:
  CustomAllocator(RawAllocateFn allocate, RawReleaseFn release, void *context, std::string name)
      : allocate_(allocate), release_(release), context_(context), name_(std::move(name)) {}
  void *allocate(size_t size) override {
    void *address = allocate_(size, context_);
    if (address && reinterpret_cast<uintptr_t>(address) % kAlignment) {
      // Every block's alignment rests on its segment's.
      release_(address, size, context_);
      throw std::invalid_argument("raw allocator '" + name_ + "' returned an address not aligned to " +
                                  std::to_string(kAlignment) + " bytes");
    }
    return address;
  }
  void release(void *address, size_t size) override { release_(address, size, context_); }
  const std::string &device() const override { return name_; }

private:
  RawAllocateFn allocate_;
  RawReleaseFn release_;
  void *context_;
  std::string name_;
};

// The CUDA driver API, loaded at run time so the library has no link-time
// dependency on it (a machine without a GPU never loads it).
struct CudaDriver {
  using Result = int;
  Result (*init)(unsigned);
  Result (*deviceGet)(int *, int);
  Result (*deviceGetCount)(int *);
  Result (*primaryCtxRetain)(void **, int);
  Result (*ctxPushCurrent)(void *);
  Result (*ctxPopCurrent)(void **);
  Result (*memAlloc)(unsigned long long *, size_t);
  Result (*memFree)(unsigned long long);
  void *library = nullptr;

  static CudaDriver &get() {
    static CudaDriver driver;
    static std::once_flag loaded;
    std::call_once(loaded, [] { driver.load(); });
    if (!driver.library)
      throw Unavailable("the CUDA driver (libcuda.so.1) is not available on this machine: " +
                        driver.error);
    return driver;
  }

private:
  std::string error;
  template <typename F> void symbol(F &target, const char *name) {
    target = reinterpret_cast<F>(dlsym(library, name));
    if (!target)
      throw Unavailable(std::string("libcuda.so.1 has no ") + name);
  }
  void load() {
    void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      error = why ? why : "dlopen failed";
      return;
    }
    library = handle;
    try {
      symbol(init, "cuInit");
      symbol(deviceGet, "cuDeviceGet");
      symbol(deviceGetCount, "cuDeviceGetCount");
      symbol(primaryCtxRetain, "cuDevicePrimaryCtxRetain");
      symbol(ctxPushCurrent, "cuCtxPushCurrent_v2");
      symbol(ctxPopCurrent, "cuCtxPopCurrent_v2");
      symbol(memAlloc, "cuMemAlloc_v2");
      symbol(memFree, "cuMemFree_v2");
    } catch (const Unavailable &e) {
      error = e.what();
      library = nullptr;
    }
  }
};

class CudaAllocator final : public RawAllocator {
public:
  explicit CudaAllocator(int ordinal) : driver_(CudaDriver::get()), ordinal_(ordinal) {
    if (int result = driver_.init(0))
      throw Unavailable("cuInit failed with CUDA error " + std::to_string(result));
    int count = 0;
    driver_.deviceGetCount(&count);
    if (ordinal < 0 || ordinal >= count)
      throw Unavailable("no CUDA device " + std::to_string(ordinal) + " (this machine has " +
                        std::to_string(count) + ")");
    int device = 0;
    driver_.deviceGet(&device, ordinal);
    // The primary context is the one torch and the CUDA runtime use.
    if (int result = driver_.primaryCtxRetain(&context_, device))
      throw Unavailable("cuDevicePrimaryCtxRetain failed with CUDA error " + std::to_string(result));
  }
  void *allocate(size_t size) override {
    driver_.ctxPushCurrent(context_);
    unsigned long long address = 0;
    int result = driver_.memAlloc(&address, size);
    void *popped;
    driver_.ctxPopCurrent(&popped);
    return result ? nullptr : reinterpret_cast<void *>(address);
  }
  void release(void *address, size_t) override {
    driver_.ctxPushCurrent(context_);
    driver_.memFree(reinterpret_cast<unsigned long long>(address));
    void *popped;
    driver_.ctxPopCurrent(&popped);
  }
  const std::string &device() const override { return name_; }
  int ordinal() const override { return ordinal_; }
  int dlpackDevice() const override { return 2; }

private:
  CudaDriver &driver_;
  int ordinal_;
  void *context_ = nullptr;
  std::string name_ = "cuda";
};

} // namespace

std::unique_ptr<RawAllocator> makeHostAllocator() { return std::make_unique<HostAllocator>(); }

std::unique_ptr<RawAllocator> makeCudaAllocator(int ordinal) {
  return std::make_unique<CudaAllocator>(ordinal);
}

std::unique_ptr<RawAllocator> makeCustomAllocator(RawAllocateFn allocate, RawReleaseFn release,
                                                  void *context, std::string name) {
  return std::make_unique<CustomAllocator>(allocate, release, context, std::move(name));
}

} // namespace braze::memory
