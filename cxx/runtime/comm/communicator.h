// The communicator: queues ops to a worker thread that runs them on a
// Transport in seq order, owns hooks, abort state, the watchdog, the flight
// recorder and in-place reconfiguration. Backend-independent.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "flight_recorder.h"
#include "transport.h"

namespace braze::comm {

struct Work {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  OpContext ctx;
  uint64_t flight_id = 0;
  Clock::time_point started;
};

class Communicator {
 public:
  static Status Create(const braze_comm_options_t& options, std::shared_ptr<Store> store,
                       std::unique_ptr<Communicator>* out);
  ~Communicator();

  Status Enqueue(const braze_op_desc_t& desc, std::shared_ptr<Work>* out);
  // Runs an op to completion, on the calling thread when nothing is queued.
  Status RunSync(const braze_op_desc_t& desc);
  int64_t AddHook(braze_hook_kind_t kind, braze_hook_fn_t fn, void* user);
  void* RemoveHook(int64_t handle);
  void Abort(const std::string& reason);
  bool aborted() const { return aborted_.load(); }
  Status Reconfigure(const std::string& uuid, const std::vector<int32_t>& members);
  std::string FlightJson(const std::string& reason);
  Status DumpFlightRecorder(const std::string& path, const std::string& reason);

  int rank() const { return rank_; }
  int world() const { return world_; }
  const std::string& backend() const { return backend_; }
  const std::string& prefix() const { return prefix_; }
  double timeout() const { return timeout_; }
  Store& store() { return *store_; }
  // Windows and symmetric buffers are created collectively, in the same
  // order on every rank, so a local counter names them consistently.
  int64_t NextObjectId() { return next_object_++; }

 private:
  Communicator() = default;
  Status Validate(const braze_op_desc_t& desc) const;
  Status Prepare(const braze_op_desc_t& desc, std::shared_ptr<Work>* out);
  void Execute(const std::shared_ptr<Work>& work);
  void WorkerLoop();
  void WatchdogLoop();
  void Finish(const std::shared_ptr<Work>& work, Status status);
  // Marks the communicator aborted, fails queued work, dumps, runs hooks.
  void EnterAborted(const std::string& reason, const braze_op_info_t* failed_op,
                    const std::vector<int32_t>& missing);
  // Writes the flight recorder under dump_dir (if set) for a failure.
  // `since`: Unix time the failed op or reconfigure started (0: unknown).
  void DumpOnFailure(const std::string& reason, const std::vector<int32_t>& missing, double since);
  void RunHooks(braze_hook_kind_t kind, const braze_op_info_t& info);
  braze_op_info_t InfoOf(const Work& work, double duration, const Status& status) const;

  std::string backend_, group_, prefix_, dump_dir_, abort_reason_;
  std::set<std::string> used_uuids_;
  int rank_ = 0, world_ = 1, generation_ = 0;
  double timeout_ = 30.0;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<FlightRecorder> recorder_;

  std::mutex mu_;  // guards everything below and the transport pointer swap
  std::condition_variable cv_, idle_cv_, watchdog_cv_;
  std::deque<std::shared_ptr<Work>> queue_;
  std::shared_ptr<Work> running_;
  bool stopping_ = false;
  bool watchdog_fired_ = false;
  std::vector<int32_t> watchdog_missing_;
  int64_t next_seq_ = 0, next_p2p_ = 0;
  std::atomic<int64_t> next_object_{0};
  std::atomic<bool> aborted_{false};

  struct Hook {
    int64_t id;
    braze_hook_kind_t kind;
    braze_hook_fn_t fn;
    void* user;
  };
  std::mutex hooks_mu_;
  std::vector<Hook> hooks_;
  int64_t next_hook_ = 1;

  std::thread worker_, watchdog_;
};

}  // namespace braze::comm

struct braze_comm_s {
  std::unique_ptr<braze::comm::Communicator> comm;
};
struct braze_work_s {
  std::shared_ptr<braze::comm::Work> work;
};
