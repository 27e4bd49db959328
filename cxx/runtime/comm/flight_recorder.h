// A ring buffer of the last N ops of a communicator, dumped as JSON on
// timeout or abort (and on demand) so `braze-fr` can compare ranks.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "api.h"

namespace braze::comm {

struct FlightEntry {
  uint64_t id = 0;  // position in the ring's history; 0 = empty slot
  int64_t seq = 0;
  bool p2p = false;
  int generation = 0;
  std::string op;
  uint64_t in_count = 0, out_count = 0;
  braze_dtype_t dtype = BRAZE_DTYPE_FLOAT32;
  int32_t peer = -1;
  std::string state;  // scheduled, started, completed, failed
  double t_scheduled = 0, t_started = 0, t_completed = 0;  // Unix seconds
  std::string error;
  std::string stack;
};

// What a dump says about the communicator besides its entries.
struct FlightMeta {
  int rank = 0, world_size = 0, generation = 0;
  std::string backend, group, reason;
  std::vector<int32_t> missing_ranks;
  // Unix time the op or reconfigure that failed started (0: none or unknown):
  // braze-fr tells a rank that was still waiting when the others gave up from
  // one that began its wait after they had (and so blames them in hindsight).
  double failed_since = 0;
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity) : ring_(capacity ? capacity : 1) {}
  // Returns the id to update later.
  uint64_t Record(FlightEntry entry);
  void MarkStarted(uint64_t id);
  void MarkFinished(uint64_t id, const std::string& error);
  std::string ToJson(const FlightMeta& meta);

 private:
  FlightEntry* Find(uint64_t id);
  std::mutex mu_;
  std::vector<FlightEntry> ring_;
  uint64_t next_id_ = 1;
};

double UnixNow();

}  // namespace braze::comm
