// Cross-process waiting on words in shared memory: spin briefly, then sleep
// on a futex in 1 ms slices so abort, deadlines and dead peers are noticed.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace braze::comm {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A word others wait on, and how many are asleep on it (so the writer skips
// the wake syscall in the common, spinning case).
struct alignas(64) WaitWord {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> sleepers{0};
};

inline void FutexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// Sleeps while *word == expected, at most timeout_us.
inline void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, long timeout_us) {
  timespec ts{timeout_us / 1000000, (timeout_us % 1000000) * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// Publishes a new value and wakes sleepers.
inline void Publish(WaitWord& w, uint32_t v) {
  w.value.store(v, std::memory_order_seq_cst);
  if (w.sleepers.load(std::memory_order_seq_cst) > 0) FutexWake(&w.value);
}

inline void SleepOn(WaitWord& w, uint32_t observed, long timeout_us) {
  w.sleepers.fetch_add(1, std::memory_order_seq_cst);
  FutexWait(&w.value, observed, timeout_us);
  w.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

// True when a is at or past b on a wrapping counter.
inline bool Reached(uint32_t a, uint32_t b) { return (int32_t)(a - b) >= 0; }

}  // namespace braze::comm
