#include "caching_allocator.h"

#include <algorithm>
#include <new>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace braze::memory {

namespace {
size_t roundUp(size_t size, size_t step) { return (size + step - 1) / step * step; }

// log2 of the largest power of two below `size` (size > 1).
int floorLog2Below(size_t size) { return 63 - __builtin_clzll(size - 1); }

bool bySizeThenAddress(const Block *a, const Block *b) {
  return a->size != b->size ? a->size < b->size : a->address < b->address;
}

std::atomic<uint64_t> nextAllocatorId{1};

const char *stateName(BlockState state) {
  switch (state) {
  case BlockState::Free:
    return "free";
  case BlockState::Allocated:
    return "allocated";
  case BlockState::ThreadCached:
    return "thread_cached";
  }
  return "?";
}
} // namespace

size_t sizeClass(size_t size) {
  if (size > (size_t(1) << 62))
    throw std::invalid_argument("cannot allocate " + std::to_string(size) + " bytes");
  if (size <= 512)
    return size <= kAlignment ? kAlignment : roundUp(size, kAlignment);
  if (size > kSmallRequest)
    return roundUp(size, kLargeClass);
  // Four classes per power of two: (p, 2p] in steps of p/4.
  return roundUp(size, (size_t(1) << floorLog2Below(size)) / 4);
}

int threadCacheBin(size_t sizeClass) {
  if (sizeClass <= 512)
    return static_cast<int>(sizeClass / kAlignment) - 1;
  int log2 = floorLog2Below(sizeClass);
  size_t power = size_t(1) << log2;
  return 8 + (log2 - 9) * 4 + static_cast<int>((sizeClass - power) / (power / 4)) - 1;
}

struct ThreadCache {
  std::mutex mutex;
  std::vector<Block *> bins[kThreadCacheClasses];
  size_t bytes = 0;
};

namespace {
// Each thread's caches, one per allocator it used; at the thread's exit
// their blocks go back to the allocators still alive.
struct ThreadCaches {
  struct Entry {
    std::weak_ptr<CachingAllocator> owner;
    std::shared_ptr<ThreadCache> cache;
  };
  std::unordered_map<uint64_t, Entry> entries;
  ~ThreadCaches() {
    for (auto &[id, entry] : entries)
      if (auto owner = entry.owner.lock())
        owner->flush(*entry.cache);
  }
};
thread_local ThreadCaches threadCaches;
} // namespace

CachingAllocator::CachingAllocator(std::unique_ptr<RawAllocator> raw)
    : raw_(std::move(raw)), id_(nextAllocatorId++), small_(bySizeThenAddress),
      large_(bySizeThenAddress) {}

CachingAllocator::~CachingAllocator() {
  for (Segment *segment : segments_) {
    for (Block *block = segment->first; block;) {
      Block *next = block->next;
      block->magic = 0;
      delete block;
      block = next;
    }
    raw_->release(segment->address, segment->size);
    delete segment;
  }
}

ThreadCache &CachingAllocator::threadCache() {
  auto found = threadCaches.entries.find(id_);
  if (found != threadCaches.entries.end())
    return *found->second.cache;
  auto cache = std::make_shared<ThreadCache>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    caches_.push_back(cache);
  }
  threadCaches.entries.emplace(id_, ThreadCaches::Entry{weak_from_this(), cache});
  return *cache;
}

void CachingAllocator::raise(std::atomic<uint64_t> &peak, uint64_t value) {
  uint64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

void CachingAllocator::noteAllocated(Block *block, size_t requested) {
  block->requested.store(requested, std::memory_order_relaxed);
  raise(peakAllocated_, allocated_.fetch_add(block->size) + block->size);
  requested_ += requested;
  ++allocations_;
  ++activeBlocks_;
}

Block *CachingAllocator::allocate(size_t size) {
  size_t wanted = sizeClass(size);
  if (wanted <= kThreadCacheBlock) {
    ThreadCache &cache = threadCache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    std::vector<Block *> &bin = cache.bins[threadCacheBin(wanted)];
    if (!bin.empty()) {
      Block *block = bin.back();
      bin.pop_back();
      cache.bytes -= block->size;
      threadCached_ -= block->size;
      ++threadCacheHits_;
      block->state = BlockState::Allocated;
      noteAllocated(block, size);
      return block;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  bool small = wanted <= kSmallRequest;
  Pool &pool = small ? small_ : large_;
  Block *block = takeFree(pool, wanted);
  if (!block)
    block = newSegment(wanted, small);
  if (block->size > wanted) {
    // Sizes are multiples of the alignment, so the rest is aligned too.
    auto *rest = new Block;
    rest->address = block->address + wanted;
    rest->size = block->size - wanted;
    rest->segment = block->segment;
    rest->previous = block;
    rest->next = block->next;
    if (block->next)
      block->next->previous = rest;
    block->next = rest;
    block->size = wanted;
    pool.insert(rest);
  }
  block->state = BlockState::Allocated;
  noteAllocated(block, size);
  return block;
}

Block *CachingAllocator::takeFree(Pool &pool, size_t size) {
  Block key;
  key.size = size;
  key.address = nullptr;
  auto found = pool.lower_bound(&key);
  if (found == pool.end())
    return nullptr;
  Block *block = *found;
  pool.erase(found);
  return block;
}

Block *CachingAllocator::newSegment(size_t size, bool small) {
  size_t segmentSize = small ? kSmallSegment : roundUp(size, kLargeGranule);
  void *address = raw_->allocate(segmentSize);
  if (!address) {
    // Give back what the caches hold and try once more.
    for (auto &cache : caches_)
      drain(*cache);
    releaseFreeSegments();
    address = raw_->allocate(segmentSize);
  }
  if (!address) {
    std::ostringstream message;
    message << "out of memory on " << raw_->device() << ": the raw allocator refused "
            << segmentSize << " bytes (" << allocated_.load() << " bytes allocated, "
            << reserved_.load() << " reserved)";
    throw std::length_error(message.str());
  }
  auto *segment = new Segment{static_cast<char *>(address), segmentSize, small, nullptr};
  auto *block = new Block;
  block->address = segment->address;
  block->size = segmentSize;
  block->segment = segment;
  segment->first = block;
  segments_.push_back(segment);
  ++rawAllocations_;
  raise(peakReserved_, reserved_.fetch_add(segmentSize) + segmentSize);
  return block;
}

void CachingAllocator::free(Block *block) {
  BlockState expected = BlockState::Allocated;
  if (!block || block->magic != Block::kMagic ||
      // Never Free outside the lock: a neighbour's release would merge it.
      !block->state.compare_exchange_strong(expected, BlockState::ThreadCached))
    throw std::invalid_argument("free of a pointer that is not a live block of this allocator "
                                "(freed twice?)");
  allocated_ -= block->size;
  requested_ -= block->requested.load(std::memory_order_relaxed);
  --activeBlocks_;
  ++frees_;
  if (block->size <= kThreadCacheBlock) {
    ThreadCache &cache = threadCache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.bytes + block->size <= kThreadCacheBytes) {
      cache.bins[threadCacheBin(block->size)].push_back(block);
      cache.bytes += block->size;
      threadCached_ += block->size;
      return;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  release(block);
}

void CachingAllocator::release(Block *block) {
  Pool &pool = block->segment->small ? small_ : large_;
  block->state = BlockState::Free;
  if (Block *previous = block->previous; previous && previous->state == BlockState::Free) {
    pool.erase(previous);
    previous->size += block->size;
    previous->next = block->next;
    if (block->next)
      block->next->previous = previous;
    block->magic = 0;
    delete block;
    block = previous;
  }
  if (Block *next = block->next; next && next->state == BlockState::Free) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next)
      next->next->previous = block;
    next->magic = 0;
    delete next;
  }
  pool.insert(block);
}

void CachingAllocator::releaseFreeSegments() {
  std::vector<Segment *> kept;
  for (Segment *segment : segments_) {
    Block *block = segment->first;
    if (block->state != BlockState::Free || block->next) {
      kept.push_back(segment);
      continue;
    }
    (segment->small ? small_ : large_).erase(block);
    block->magic = 0;
    delete block;
    raw_->release(segment->address, segment->size);
    reserved_ -= segment->size;
    ++rawReleases_;
    delete segment;
  }
  segments_ = std::move(kept);
}

void CachingAllocator::drain(ThreadCache &cache) {
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (auto &bin : cache.bins) {
    for (Block *block : bin) {
      threadCached_ -= block->size;
      release(block);
    }
    bin.clear();
  }
  cache.bytes = 0;
}

void CachingAllocator::flush(ThreadCache &cache) {
  std::lock_guard<std::mutex> lock(mutex_);
  drain(cache);
  caches_.erase(std::remove_if(caches_.begin(), caches_.end(),
                               [&](const auto &held) { return held.get() == &cache; }),
                caches_.end());
}

void CachingAllocator::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &cache : caches_)
    drain(*cache);
  releaseFreeSegments();
}

Stats CachingAllocator::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t freeBytes = 0, largest = 0;
  for (Pool *pool : {&small_, &large_}) {
    for (Block *block : *pool)
      freeBytes += block->size;
    if (!pool->empty())
      largest = std::max<uint64_t>(largest, (*pool->rbegin())->size);
  }
  return Stats{allocated_.load(),
               requested_.load(),
               reserved_.load(),
               peakAllocated_.load(),
               peakReserved_.load(),
               threadCached_.load(),
               freeBytes,
               largest,
               allocations_.load(),
               frees_.load(),
               activeBlocks_.load(),
               threadCacheHits_.load(),
               segments_.size(),
               rawAllocations_.load(),
               rawReleases_.load(),
               freeBytes ? 1.0 - double(largest) / double(freeBytes) : 0.0};
}

void CachingAllocator::resetPeak() {
  peakAllocated_ = allocated_.load();
  peakReserved_ = reserved_.load();
}

std::string CachingAllocator::snapshotJson() {
  Stats now = stats();
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  out << "{\"device\": \"" << raw_->device() << "\", \"ordinal\": " << raw_->ordinal()
      << ", \"alignment\": " << kAlignment << ", \"stats\": {\"allocated_bytes\": " << now.allocated
      << ", \"requested_bytes\": " << now.requested << ", \"reserved_bytes\": " << now.reserved
      << ", \"peak_allocated_bytes\": " << now.peakAllocated
      << ", \"peak_reserved_bytes\": " << now.peakReserved
      << ", \"thread_cached_bytes\": " << now.threadCached << ", \"free_bytes\": " << now.freeBytes
      << ", \"allocations\": " << now.allocations << ", \"frees\": " << now.frees
      << ", \"fragmentation\": " << now.fragmentation << "}, \"segments\": [";
  for (size_t number = 0; number < segments_.size(); ++number) {
    Segment *segment = segments_[number];
    out << (number ? ", " : "") << "{\"address\": " << reinterpret_cast<uintptr_t>(segment->address)
        << ", \"size\": " << segment->size << ", \"pool\": \"" << (segment->small ? "small" : "large")
        << "\", \"blocks\": [";
    for (Block *block = segment->first; block; block = block->next) {
      out << (block == segment->first ? "" : ", ") << "{\"address\": "
          << reinterpret_cast<uintptr_t>(block->address) << ", \"size\": " << block->size
          << ", \"requested\": "
          << (block->state == BlockState::Allocated ? block->requested.load() : 0)
          << ", \"state\": \"" << stateName(block->state) << "\"}";
    }
    out << "]}";
  }
  out << "]}";
  return out.str();
}

} // namespace braze::memory
