// The caching allocator: segments from a raw allocator, cut into blocks.
//
// Sizes round up to size classes (multiples of 64 up to 512 bytes, then four
// classes per power of two up to 1 MiB, then multiples of 64 KiB). Requests
// up to 1 MiB come from the small pool, whose segments are 2 MiB; larger
// ones from the large pool, whose segments are the request rounded up to
// 2 MiB. A free block that fits is taken best-fit (smallest, then lowest
// address) and split; a freed block merges with free neighbours in its
// segment. Freed blocks up to 32 KiB first go to the freeing thread's cache
// (at most 1 MiB per thread and allocator), which the same thread's next
// allocation of that class takes without the shared lock.
#ifndef BRAZE_RUNTIME_MEMORY_CACHING_ALLOCATOR_H
#define BRAZE_RUNTIME_MEMORY_CACHING_ALLOCATOR_H

#include "raw_allocator.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace braze::memory {

constexpr size_t kAlignment = 64;
constexpr size_t kSmallRequest = size_t(1) << 20;
constexpr size_t kSmallSegment = size_t(2) << 20;
constexpr size_t kLargeGranule = size_t(2) << 20;
constexpr size_t kLargeClass = size_t(64) << 10;
constexpr size_t kThreadCacheBlock = size_t(32) << 10;
constexpr size_t kThreadCacheBytes = size_t(1) << 20;
constexpr int kThreadCacheClasses = 32;

// The size class a request of `size` bytes takes (at least kAlignment).
size_t sizeClass(size_t size);
// The thread-cache bin of a class up to kThreadCacheBlock.
int threadCacheBin(size_t sizeClass);

enum class BlockState : uint8_t { Free, Allocated, ThreadCached };

struct Segment;
struct Block {
  static constexpr uint64_t kMagic = 0x6272617a65626c6bULL; // "brazeblk"
  uint64_t magic = kMagic;
  char *address;
  size_t size;
  std::atomic<size_t> requested{0};
  std::atomic<BlockState> state{BlockState::Free};
  Segment *segment;
  Block *previous = nullptr; // neighbours in the segment, by address
  Block *next = nullptr;
};

struct Segment {
  char *address;
  size_t size;
  bool small;
  Block *first;
};

struct Stats {
  uint64_t allocated, requested, reserved, peakAllocated, peakReserved, threadCached, freeBytes,
      largestFree, allocations, frees, activeBlocks, threadCacheHits, segments, rawAllocations,
      rawReleases;
  double fragmentation;
};

struct ThreadCache;

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
public:
  explicit CachingAllocator(std::unique_ptr<RawAllocator> raw);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator &) = delete;
  CachingAllocator &operator=(const CachingAllocator &) = delete;

  // Throws std::bad_alloc (with the raw allocator's refusal) when no memory.
  Block *allocate(size_t size);
  // Throws std::invalid_argument for a pointer that is not a live block.
  void free(Block *block);
  Stats stats();
  void resetPeak();
  void emptyCache();
  std::string snapshotJson();
  RawAllocator &raw() { return *raw_; }

  // Returns a thread cache's blocks to the pools (a thread's exit).
  void flush(ThreadCache &cache);

private:
  ThreadCache &threadCache();
  Block *takeFree(std::set<Block *, bool (*)(const Block *, const Block *)> &pool, size_t size);
  Block *newSegment(size_t size, bool small);
  void release(Block *block); // under mutex_: to the pool, merged
  void drain(ThreadCache &cache); // under mutex_: its blocks to the pools
  void releaseFreeSegments(); // under mutex_
  void noteAllocated(Block *block, size_t requested);
  static void raise(std::atomic<uint64_t> &peak, uint64_t value);

  std::unique_ptr<RawAllocator> raw_;
  uint64_t id_;
  std::mutex mutex_;
  using Pool = std::set<Block *, bool (*)(const Block *, const Block *)>;
  Pool small_, large_;
  std::vector<Segment *> segments_;
  std::vector<std::shared_ptr<ThreadCache>> caches_;
  std::atomic<uint64_t> allocated_{0}, requested_{0}, reserved_{0}, peakAllocated_{0},
      peakReserved_{0}, threadCached_{0}, allocations_{0}, frees_{0}, activeBlocks_{0},
      threadCacheHits_{0}, rawAllocations_{0}, rawReleases_{0};
};

} // namespace braze::memory

#endif
