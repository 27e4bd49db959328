// The backend interface. A Transport moves bytes for one op at a time (the
// communicator's worker thread calls Run in seq order); everything else
// (queueing, hooks, the flight recorder, abort state) lives above it.
#pragma once

#include <atomic>
#include <memory>
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
};

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

using TransportFactory = Status (*)(const TransportConfig&, std::unique_ptr<Transport>*);
Status CreateShmTransport(const TransportConfig& config, std::unique_ptr<Transport>* out);
Status CreateTcpTransport(const TransportConfig& config, std::unique_ptr<Transport>* out);
TransportFactory FindTransport(const std::string& backend);

}  // namespace braze::comm
