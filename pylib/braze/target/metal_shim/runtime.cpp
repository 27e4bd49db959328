// The Metal shim's runtime: the threads that emulate a launch's threadgroups, their barriers and
// SIMD-group exchanges. Compiled once per cache and compiler (its standard headers are most of a
// kernel's build otherwise) and linked into every kernel library, whose harness calls bz_shim_run.
#include "metal_stdlib"
#include <barrier>
#include <memory>
#include <optional>
#include <thread>
#include <vector>
static thread_local std::barrier<>* bz_group_barrier = nullptr;
void metal::threadgroup_barrier(metal::mem_flags) { bz_group_barrier->arrive_and_wait(); }
// A SIMD group of 32 threads: the slots its lanes exchange values through.
struct bz_simd_group {
  std::barrier<> meeting{32};
  uint64_t slots[32];
};
static thread_local bz_simd_group* bz_simd = nullptr;
static thread_local uint bz_lane = 0;
uint metal::bz_simd_lane() { return bz_lane; }
void metal::bz_simd_exchange(void* value, size_t size, uint lane) {
  std::memcpy(&bz_simd->slots[bz_lane], value, size);
  bz_simd->meeting.arrive_and_wait();
  if (lane < 32) std::memcpy(value, &bz_simd->slots[lane], size);
  bz_simd->meeting.arrive_and_wait();  // every lane has read before the slots are written again
}

typedef void (*bz_launch_fn)(void* const* buffers, const int64_t* sizes, int* failed, uint thread, uint group);

// Runs `groups` threadgroups of `threads` threads, one group after another on the same threads;
// returns the failure flag.
extern "C" int bz_shim_run(bz_launch_fn launch, void* const* buffers, const int64_t* sizes, int64_t groups,
                           uint threads) {
  int failed = 0;
  // Each group's barriers are new: a thread that returned early (past the last point) drops out of
  // them. They are made once every thread is done with the group before, as the step between
  // groups completes.
  std::optional<std::barrier<>> meeting;
  std::unique_ptr<bz_simd_group[]> simd_groups;
  auto next_group = [&]() noexcept {
    meeting.emplace(threads);
    simd_groups.reset(new bz_simd_group[(threads + 31) / 32]);
  };
  std::barrier between(threads, next_group);
  std::vector<std::thread> workers;
  for (uint thread = 0; thread < threads; ++thread)
    workers.emplace_back([&, thread] {
      for (int64_t group = 0; group < groups; ++group) {
        between.arrive_and_wait();
        bz_group_barrier = &*meeting;
        bz_simd = &simd_groups[thread / 32];
        bz_lane = thread % 32;
        launch(buffers, sizes, &failed, thread, (uint)group);
        meeting->arrive_and_drop();
        bz_simd->meeting.arrive_and_drop();
      }
    });
  for (auto& worker : workers) worker.join();
  return failed;
}
