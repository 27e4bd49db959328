#include "flight_recorder.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "reduce.h"
#include "status.h"

namespace braze::comm {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

uint64_t FlightRecorder::Record(FlightEntry entry) {
  std::lock_guard<std::mutex> lock(mu_);
  entry.id = next_id_++;
  entry.state = "scheduled";
  entry.t_scheduled = UnixNow();
  ring_[entry.id % ring_.size()] = std::move(entry);
  return next_id_ - 1;
}

FlightEntry* FlightRecorder::Find(uint64_t id) {
  FlightEntry& e = ring_[id % ring_.size()];
  return e.id == id ? &e : nullptr;  // overwritten entries are simply gone
}

void FlightRecorder::MarkStarted(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = Find(id)) {
    e->state = "started";
    e->t_started = UnixNow();
  }
}

void FlightRecorder::MarkFinished(uint64_t id, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = Find(id)) {
    e->state = error.empty() ? "completed" : "failed";
    e->error = error;
    e->t_completed = UnixNow();
  }
}

namespace {
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += (char)c;
        }
    }
  }
  return out + "\"";
}

std::string Num(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.6f", v);
  return buf;
}
}  // namespace

std::string FlightRecorder::ToJson(const FlightMeta& meta) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = "{\n  \"version\": 1,\n";
  out += "  \"rank\": " + std::to_string(meta.rank) + ",\n";
  out += "  \"world_size\": " + std::to_string(meta.world_size) + ",\n";
  out += "  \"pid\": " + std::to_string(getpid()) + ",\n";
  out += "  \"backend\": " + Quote(meta.backend) + ",\n";
  out += "  \"group\": " + Quote(meta.group) + ",\n";
  out += "  \"generation\": " + std::to_string(meta.generation) + ",\n";
  out += "  \"reason\": " + Quote(meta.reason) + ",\n";
  out += "  \"dumped_at\": " + Num(UnixNow()) + ",\n";
  out += "  \"missing_ranks\": " + FormatRanks(meta.missing_ranks) + ",\n";
  out += "  \"failed_since\": " + Num(meta.failed_since) + ",\n";
  out += "  \"entries\": [";
  // Oldest first: walk the ring starting after the newest entry.
  bool first = true;
  for (size_t k = 0; k < ring_.size(); ++k) {
    const FlightEntry& e = ring_[(next_id_ + k) % ring_.size()];
    if (e.id == 0) continue;
    out += first ? "\n" : ",\n";
    first = false;
    out += "    {\"id\": " + std::to_string(e.id) + ", \"seq\": " + std::to_string(e.seq) +
           ", \"p2p\": " + (e.p2p ? "true" : "false") + ", \"generation\": " + std::to_string(e.generation) +
           ", \"op\": " + Quote(e.op) + ", \"in_count\": " + std::to_string(e.in_count) +
           ", \"out_count\": " + std::to_string(e.out_count) + ", \"dtype\": " + Quote(DtypeName(e.dtype)) +
           ", \"peer\": " + std::to_string(e.peer) + ", \"state\": " + Quote(e.state) +
           ", \"t_scheduled\": " + Num(e.t_scheduled) + ", \"t_started\": " + Num(e.t_started) +
           ", \"t_completed\": " + Num(e.t_completed) + ", \"error\": " + Quote(e.error) +
           ", \"stack\": " + Quote(e.stack) + "}";
  }
  out += "\n  ]\n}\n";
  return out;
}

}  // namespace braze::comm
