// Native threads hammering one CachingAllocator (built by test_allocator.py,
// under ThreadSanitizer where the compiler has it): each thread allocates
// and frees at random, stamps every block with its own pattern and checks
// it before freeing (an overlap would overwrite it); a quarter of the
// blocks are freed by another thread. Prints "ok" and the final stats.
#include "caching_allocator.h"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

using namespace braze::memory;

int main(int argc, char **argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  int iterations = argc > 2 ? std::atoi(argv[2]) : 20000;
  auto allocator = std::make_shared<CachingAllocator>(makeHostAllocator());
  std::mutex handoffMutex;
  std::vector<std::pair<Block *, unsigned char>> handoff;
  std::atomic<int> failures{0};
  auto work = [&](int seed) {
    std::mt19937 random(seed);
    std::vector<std::pair<Block *, unsigned char>> live;
    auto check = [&](Block *block, unsigned char stamp) {
      size_t size = block->requested.load();
      for (size_t i = 0; i < size; i += 61)
        if (static_cast<unsigned char>(block->address[i]) != stamp) {
          ++failures;
          return;
        }
    };
    for (int i = 0; i < iterations; ++i) {
      if (live.empty() || random() % 2) {
        size_t size = random() % 10 == 0 ? random() % (3 << 20) : random() % 40000;
        Block *block = allocator->allocate(size);
        if (reinterpret_cast<uintptr_t>(block->address) % kAlignment)
          ++failures;
        auto stamp = static_cast<unsigned char>(random());
        std::memset(block->address, stamp, size);
        if (random() % 4 == 0) {
          std::lock_guard<std::mutex> lock(handoffMutex);
          handoff.emplace_back(block, stamp);
        } else {
          live.emplace_back(block, stamp);
        }
      } else {
        size_t pick = random() % live.size();
        check(live[pick].first, live[pick].second);
        allocator->free(live[pick].first);
        live[pick] = live.back();
        live.pop_back();
      }
      if (i % 64 == 0) {
        std::pair<Block *, unsigned char> other{nullptr, 0};
        {
          std::lock_guard<std::mutex> lock(handoffMutex);
          if (!handoff.empty()) {
            other = handoff.back();
            handoff.pop_back();
          }
        }
        if (other.first) {
          check(other.first, other.second);
          allocator->free(other.first);
        }
      }
      if (i % 5000 == 4999)
        allocator->emptyCache();
    }
    for (auto [block, stamp] : live) {
      check(block, stamp);
      allocator->free(block);
    }
  };
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t)
    running.emplace_back(work, t + 1);
  for (auto &thread : running)
    thread.join();
  for (auto [block, stamp] : handoff)
    allocator->free(block);
  Stats before = allocator->stats();
  allocator->emptyCache();
  Stats after = allocator->stats();
  std::printf("%s failures=%d allocated=%llu active=%llu thread_cached=%llu reserved_after_empty=%llu "
              "segments_after_empty=%llu allocations=%llu frees=%llu hits=%llu\n",
              failures ? "FAILED" : "ok", failures.load(), (unsigned long long)before.allocated,
              (unsigned long long)before.activeBlocks, (unsigned long long)before.threadCached,
              (unsigned long long)after.reserved, (unsigned long long)after.segments,
              (unsigned long long)before.allocations, (unsigned long long)before.frees,
              (unsigned long long)before.threadCacheHits);
  return failures ? 1 : 0;
}
