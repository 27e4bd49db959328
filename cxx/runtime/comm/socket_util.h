// Small blocking/poll-based socket helpers shared by the TCP store, the TCP
// backend and the window service. Every wait takes a deadline so nothing
// blocks forever.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "status.h"

namespace braze::comm {

using Clock = std::chrono::steady_clock;

inline Clock::time_point DeadlineAfter(double seconds) {
  if (seconds <= 0 || seconds > 1e8) seconds = 1e8;  // "forever" stays finite
  return Clock::now() + std::chrono::microseconds((int64_t)(seconds * 1e6));
}
inline int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : (left > 1000000 ? 1000000 : (int)left);
}

// Runs attempt(slice_deadline) in slices of at most `slice` seconds until it
// returns anything but BRAZE_TIMEOUT or `deadline` passes; between slices
// check()'s error (a peer's report that it left, say) ends the wait early.
template <typename Attempt, typename Check>
Status InSlices(Clock::time_point deadline, double slice, Attempt attempt, Check check) {
  for (;;) {
    Status s = attempt(std::min(deadline, DeadlineAfter(slice)));
    if (s.code != BRAZE_TIMEOUT || Clock::now() >= deadline) return s;
    BRAZE_RETURN_IF_ERROR(check());
  }
}

// Listens on host:port (port 0 picks one); returns the fd and the bound port.
Status Listen(const std::string& host, int port, int* fd, int* bound_port);
// Connects, retrying until the deadline (the server may not be up yet).
Status Connect(const std::string& host, int port, Clock::time_point deadline, int* fd);
Status Accept(int listen_fd, Clock::time_point deadline, int* fd);
// Full reads and writes with a deadline; EOF is BRAZE_RANK_FAILED.
Status SendAll(int fd, const void* data, size_t n, Clock::time_point deadline);
Status RecvAll(int fd, void* data, size_t n, Clock::time_point deadline);
void SetNoDelay(int fd);
void SetNonBlocking(int fd, bool on);
// The local address of a connected socket, e.g. "127.0.0.1".
std::string LocalAddress(int fd);
// The other end of a connected socket, "ip:port" (for logs and errors).
std::string PeerAddress(int fd);
void CloseFd(int& fd);

}  // namespace braze::comm
