// The backend interface. A Transport moves bytes for one op at a time (the
// communicator's worker thread calls Run in seq order); everything else
// (queueing, hooks, the flight recorder, abort state) lives above it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api.h"
#include "socket_util.h"
#include "status.h"
#include "store.h"

namespace braze::comm {

// What every rank announces for an op before any data moves, so that a
// mismatch across ranks becomes an error instead of corrupt memory.
struct OpHeader {
  uint32_t magic = 0x62727a65;  // "brze"
  int32_t op = 0, dtype = 0, reduce_op = 0, peer = 0;
  int64_t seq = 0;
  uint64_t in_count = 0, out_count = 0;
};

// One op as the transport sees it; splits are always filled for all_to_all.
struct OpContext {
  braze_op_desc_t desc{};
  int64_t seq = 0;
  Clock::time_point deadline;
  double timeout = 0;
  std::vector<uint64_t> in_splits, out_splits;  // elements per rank
  std::string label;  // "all_reduce (seq 3)" for messages

  OpHeader Header() const;
  size_t ElementSize() const;
};

// The same check on every backend: this rank's header against a peer's.
Status CheckHeader(const OpContext& ctx, const OpHeader& mine, const OpHeader& theirs,
                   int my_rank, int their_rank);
// all_to_all: in_splits[i][j] must equal out_splits[j][i] for every i, j.
Status CheckSplits(const OpContext& ctx, const std::vector<std::vector<uint64_t>>& in_splits,
                   const std::vector<std::vector<uint64_t>>& out_splits);

struct TransportConfig {
  int rank = 0;
  int world = 1;
  std::shared_ptr<Store> store;
  std::string prefix;  // store namespace of this group generation
  double timeout = 30.0;
  // The setup's deadline (MakeTransport sets it: timeout from the start);
  // every wait of Init() ends by it.
  Clock::time_point deadline;
  double SecondsLeft() const {  // for store waits; never 0, which a store reads as "no limit"
    return std::max(std::chrono::duration<double>(deadline - Clock::now()).count(), 0.001);
  }
};

// A rank that runs again this long after a deadline it was bound by was not
// running (stopped, or starved of CPU): longer than the watchdog's grace
// plus a poll. Its peers have given up on it.
constexpr double kStalledSeconds = 2.5;
inline double SecondsPast(Clock::time_point deadline) {
  return std::chrono::duration<double>(Clock::now() - deadline).count();
}

class Transport {
 public:
  virtual ~Transport() = default;
  // Executes one op; blocks until done, failed, timed out or aborted.
  virtual Status Run(const OpContext& ctx) = 0;
  // Thread-safe: makes a running and every later Run fail with ABORTED.
  virtual void Abort() = 0;
  // Ranks not heard from in the op that is running now (for the watchdog).
  virtual std::vector<int32_t> Missing() = 0;
};

// What the built-in transports share: the abort flag and the ranks the
// running op waits for.
class TransportBase : public Transport {
 public:
  // Dispatches to the per-op methods below.
  Status Run(const OpContext& ctx) final;
  void Abort() override { aborted_.store(true); }
  std::vector<int32_t> Missing() override {
    std::lock_guard<std::mutex> lock(missing_mu_);
    return missing_;
  }

 protected:
  virtual Status AllReduce(const OpContext& ctx) = 0;
  virtual Status AllGather(const OpContext& ctx) = 0;
  virtual Status ReduceScatter(const OpContext& ctx) = 0;
  virtual Status Broadcast(const OpContext& ctx) = 0;
  virtual Status AllToAll(const OpContext& ctx) = 0;
  virtual Status Send(const OpContext& ctx) = 0;
  virtual Status Recv(const OpContext& ctx) = 0;
  virtual Status RunBarrier(const OpContext& ctx) = 0;

  void SetMissing(std::vector<int32_t> missing) {
    std::lock_guard<std::mutex> lock(missing_mu_);
    missing_ = std::move(missing);
  }
  Status Aborted(const OpContext& ctx) const { return Error(BRAZE_ABORTED, ctx.label + ": communicator aborted"); }
  std::atomic<bool> aborted_{false};

 private:
  std::mutex missing_mu_;
  std::vector<int32_t> missing_;
};

// A group's setup is all or nothing. A rank whose part of it fails posts why
// under "<prefix>/setup_failed" (MakeTransport does), and every wait of the
// setup on its peers (store keys, store barriers, accepting and connecting)
// polls that key and gives up as soon as it appears, instead of waiting out
// its timeout for a rank that has already left -- by when a retry that rank
// started at once has given up on it in turn.
void ReportSetupFailure(const TransportConfig& config, const Status& why);
// The failure a peer of this setup reported, naming the ranks it blamed (or
// itself, when it blamed nobody and did not time out), or OK when none has.
Status PeerSetupFailure(const TransportConfig& config);
inline Store::GiveUp SetupGiveUp(const TransportConfig& config) {
  return [&config] { return PeerSetupFailure(config); };
}

// After Init(): a rank that stalled past the setup's deadline names itself
// (its peers gave up on it, whatever it found), and one that finished while
// a peer had given up fails too.
Status CheckSetupFinished(const TransportConfig& config, Status init);

// Constructs T(config) and runs its Init(); reports a failure to the peers.
template <typename T>
Status MakeTransport(TransportConfig config, std::unique_ptr<Transport>* out) {
  config.deadline = DeadlineAfter(config.timeout);
  auto t = std::make_unique<T>(config);
  Status s = CheckSetupFinished(config, t->Init());
  if (!s.ok()) {
    ReportSetupFailure(config, s);
    return s;
  }
  *out = std::move(t);
  return Status::Ok();
}

using TransportFactory = Status (*)(const TransportConfig&, std::unique_ptr<Transport>*);
Status CreateShmTransport(const TransportConfig& config, std::unique_ptr<Transport>* out);
Status CreateTcpTransport(const TransportConfig& config, std::unique_ptr<Transport>* out);
TransportFactory FindTransport(const std::string& backend);

}  // namespace braze::comm
