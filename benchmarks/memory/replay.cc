// Replays an alloc/free trace (benchmarks/memory/allocator.py writes it)
// against malloc/free and braze's CachingAllocator, timing each with the
// thread's CPU clock. Trace lines: "a <id> <bytes>" or "f <id>".
#include "caching_allocator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

using namespace braze::memory;

struct Event {
  bool allocate;
  size_t id, size;
};

static double threadSeconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return now.tv_sec + now.tv_nsec * 1e-9;
}

template <typename Allocate, typename Free>
double replay(const std::vector<Event> &trace, size_t ids, int rounds, Allocate allocate, Free release) {
  std::vector<void *> live(ids, nullptr);
  double started = threadSeconds();
  for (int round = 0; round < rounds; ++round)
    for (const Event &event : trace) {
      if (event.allocate) {
        live[event.id] = allocate(event.size);
      } else {
        release(live[event.id]);
        live[event.id] = nullptr;
      }
    }
  return threadSeconds() - started;
}

int main(int argc, char **argv) {
  std::ifstream in(argv[1]);
  int rounds = argc > 2 ? std::atoi(argv[2]) : 20;
  std::vector<Event> trace;
  size_t ids = 0;
  std::string kind;
  while (in >> kind) {
    Event event{kind == "a", 0, 0};
    in >> event.id;
    if (event.allocate)
      in >> event.size;
    ids = std::max(ids, event.id + 1);
    trace.push_back(event);
  }
  auto cache = std::make_shared<CachingAllocator>(makeHostAllocator());
  // Each allocation's first byte is written, as a tensor's writer would.
  auto systemAllocate = [](size_t n) {
    auto *address = static_cast<char *>(std::malloc(n ? n : 1));
    *static_cast<volatile char *>(address) = 1;
    return static_cast<void *>(address);
  };
  auto cachedAllocate = [&](size_t n) {
    Block *block = cache->allocate(n);
    *static_cast<volatile char *>(block->address) = 1;
    return static_cast<void *>(block);
  };
  auto cachedFree = [&](void *block) { cache->free(static_cast<Block *>(block)); };
  // One pass each first: the caching allocator takes its segments, malloc
  // its arenas.
  replay(trace, ids, 1, systemAllocate, std::free);
  replay(trace, ids, 1, cachedAllocate, cachedFree);
  double mallocSeconds = replay(trace, ids, rounds, systemAllocate, std::free);
  double braze = replay(trace, ids, rounds, cachedAllocate, cachedFree);
  size_t operations = trace.size() * rounds;
  Stats stats = cache->stats();
  std::printf("{\"events\": %zu, \"rounds\": %d, \"malloc_ns_per_op\": %.1f, \"braze_ns_per_op\": %.1f, "
              "\"braze_thread_cache_hits\": %llu, \"braze_allocations\": %llu, \"braze_peak_reserved\": %llu}\n",
              trace.size(), rounds, mallocSeconds / operations * 1e9, braze / operations * 1e9,
              (unsigned long long)stats.threadCacheHits, (unsigned long long)stats.allocations,
              (unsigned long long)stats.peakReserved);
  return 0;
}
