#include "communicator.h"

#include <algorithm>

#include "reduce.h"

namespace braze::comm {

namespace {
// The watchdog steps in only when a transport fails to honour its own
// deadline (it should never need to): this long after it.
constexpr double kWatchdogGraceSeconds = 2.0;

bool IsP2p(braze_op_kind_t op) { return op == BRAZE_OP_SEND || op == BRAZE_OP_RECV; }
}  // namespace

Status Communicator::Create(const braze_comm_options_t& o, std::shared_ptr<Store> store,
                            std::unique_ptr<Communicator>* out) {
  TransportFactory factory = FindTransport(o.backend ? o.backend : "");
  if (!factory)
    return Error(BRAZE_INVALID_ARGUMENT, std::string("unknown native backend '") +
                                             (o.backend ? o.backend : "") + "' (native: shm, tcp)");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    return Error(BRAZE_INVALID_ARGUMENT, "rank " + std::to_string(o.rank) + " is out of range for world_size " +
                                             std::to_string(o.world_size));
  std::unique_ptr<Communicator> comm(new Communicator());
  comm->backend_ = o.backend;
  comm->group_ = o.group && *o.group ? o.group : "braze";
  comm->prefix_ = comm->group_;
  comm->dump_dir_ = o.dump_dir ? o.dump_dir : "";
  comm->rank_ = o.rank;
  comm->world_ = o.world_size;
  comm->timeout_ = o.timeout > 0 ? o.timeout : 30.0;
  comm->store_ = std::move(store);
  comm->recorder_ = std::make_unique<FlightRecorder>(o.flight_recorder_size ? o.flight_recorder_size : 2048);
  // Lets ranks that reconfigure into this namespace accept a newcomer.
  BRAZE_RETURN_IF_ERROR(comm->store_->Set(comm->prefix_ + "/members/" + std::to_string(o.rank), "join"));
  TransportConfig config{o.rank, o.world_size, comm->store_, comm->prefix_, comm->timeout_};
  BRAZE_RETURN_IF_ERROR(factory(config, &comm->transport_));
  comm->worker_ = std::thread([c = comm.get()] { c->WorkerLoop(); });
  comm->watchdog_ = std::thread([c = comm.get()] { c->WatchdogLoop(); });
  *out = std::move(comm);
  return Status::Ok();
}

Communicator::~Communicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (transport_) transport_->Abort();
  }
  cv_.notify_all();
  watchdog_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (watchdog_.joinable()) watchdog_.join();
  for (auto& work : queue_) Finish(work, Error(BRAZE_ABORTED, work->ctx.label + ": communicator destroyed"));
}

Status Communicator::Validate(const braze_op_desc_t& d) const {
  const char* name = braze_op_name(d.op);
  auto bad = [&](const std::string& msg) { return Error(BRAZE_INVALID_ARGUMENT, std::string(name) + ": " + msg); };
  if ((int)d.op < BRAZE_OP_ALL_REDUCE || (int)d.op > BRAZE_OP_BARRIER) return bad("unknown op");
  if (!DtypeValid(d.dtype)) return bad("unsupported dtype " + std::to_string(d.dtype));
  if ((d.op == BRAZE_OP_ALL_REDUCE || d.op == BRAZE_OP_REDUCE_SCATTER) &&
      ((int)d.reduce_op < BRAZE_REDUCE_SUM || (int)d.reduce_op > BRAZE_REDUCE_AVG))
    return bad("unknown reduce op");
  if (d.op == BRAZE_OP_BROADCAST || IsP2p(d.op)) {
    const char* role = d.op == BRAZE_OP_BROADCAST ? "root" : (d.op == BRAZE_OP_SEND ? "dst" : "src");
    if (d.peer < 0 || d.peer >= world_)
      return bad(std::string(role) + " " + std::to_string(d.peer) + " is out of range [0, " + std::to_string(world_) + ")");
    if (IsP2p(d.op) && d.peer == rank_) return bad(std::string(role) + " is this rank itself");
  }
  auto need = [&](uint64_t have, uint64_t want, const std::string& what) {
    return have == want ? Status::Ok()
                        : bad(what + " has " + std::to_string(have) + " elements but needs " + std::to_string(want));
  };
  switch (d.op) {
    case BRAZE_OP_ALL_REDUCE:
    case BRAZE_OP_BROADCAST:
    case BRAZE_OP_SEND:
    case BRAZE_OP_RECV: BRAZE_RETURN_IF_ERROR(need(d.out_count, d.in_count, "output")); break;
    case BRAZE_OP_ALL_GATHER:
      BRAZE_RETURN_IF_ERROR(need(d.out_count, d.in_count * world_, "output (input x world_size)"));
      break;
    case BRAZE_OP_REDUCE_SCATTER:
      BRAZE_RETURN_IF_ERROR(need(d.in_count, d.out_count * world_, "input (output x world_size)"));
      break;
    case BRAZE_OP_ALL_TO_ALL: {
      for (auto [splits, count, what] : {std::make_tuple(d.in_splits, d.in_count, "input"),
                                         std::make_tuple(d.out_splits, d.out_count, "output")}) {
        if (splits) {
          uint64_t sum = 0;
          for (int j = 0; j < world_; ++j) sum += splits[j];
          if (sum != count)
            return bad(std::string(what) + " splits add up to " + std::to_string(sum) + " but the " + what +
                       " has " + std::to_string(count) + " elements");
        } else if (count % world_ != 0) {
          return bad(std::string(what) + " has " + std::to_string(count) +
                     " elements, not divisible by world_size " + std::to_string(world_) + "; pass splits");
        }
      }
      break;
    }
    default: break;
  }
  if ((d.in_count && !d.in) || (d.out_count && !d.out)) return bad("null buffer");
  return Status::Ok();
}

Status Communicator::Enqueue(const braze_op_desc_t& desc, std::shared_ptr<Work>* out) {
  std::shared_ptr<Work> work;
  BRAZE_RETURN_IF_ERROR(Prepare(desc, &work));
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(work);
  }
  cv_.notify_all();
  *out = work;
  return Status::Ok();
}

// Validates, numbers and records an op and runs the pre hooks.
Status Communicator::Prepare(const braze_op_desc_t& desc, std::shared_ptr<Work>* out) {
  const char* name = braze_op_name(desc.op);
  BRAZE_RETURN_IF_ERROR(Validate(desc));
  auto work = std::make_shared<Work>();
  OpContext& ctx = work->ctx;
  ctx.desc = desc;
  ctx.desc.stack = nullptr;
  ctx.timeout = desc.timeout > 0 ? desc.timeout : timeout_;
  ctx.deadline = DeadlineAfter(ctx.timeout);  // reset when the op starts
  if (desc.op == BRAZE_OP_ALL_TO_ALL) {
    for (auto [splits, count, vec] : {std::make_tuple(desc.in_splits, desc.in_count, &ctx.in_splits),
                                      std::make_tuple(desc.out_splits, desc.out_count, &ctx.out_splits)}) {
      if (splits) vec->assign(splits, splits + world_);
      else vec->assign(world_, count / world_);
    }
    ctx.desc.in_splits = ctx.desc.out_splits = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.load())
      return Error(BRAZE_ABORTED, std::string(name) + ": communicator is aborted (" + abort_reason_ +
                                      "); call reconfigure() to continue");
    ctx.seq = IsP2p(desc.op) ? next_p2p_++ : next_seq_++;
    ctx.label = std::string(name) + (IsP2p(desc.op) ? " (p2p " : " (seq ") + std::to_string(ctx.seq) + ")";
    FlightEntry entry;
    entry.seq = ctx.seq;
    entry.p2p = IsP2p(desc.op);
    entry.generation = generation_;
    entry.op = name;
    entry.in_count = desc.in_count;
    entry.out_count = desc.out_count;
    entry.dtype = desc.dtype;
    entry.peer = desc.op == BRAZE_OP_BROADCAST || entry.p2p ? desc.peer : -1;
    if (desc.stack) entry.stack = desc.stack;
    work->flight_id = recorder_->Record(std::move(entry));
  }
  RunHooks(BRAZE_HOOK_PRE, InfoOf(*work, 0, Status::Ok()));
  *out = work;
  return Status::Ok();
}

braze_op_info_t Communicator::InfoOf(const Work& work, double duration, const Status& status) const {
  braze_op_info_t info{};
  info.op = braze_op_name(work.ctx.desc.op);
  info.seq = work.ctx.seq;
  info.in_count = work.ctx.desc.in_count;
  info.out_count = work.ctx.desc.out_count;
  info.dtype = work.ctx.desc.dtype;
  info.peer = work.ctx.desc.peer;
  info.duration = duration;
  info.status = status.code;
  info.message = status.message.c_str();
  return info;
}

void Communicator::WorkerLoop() {
  for (;;) {
    std::shared_ptr<Work> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // running_ may be an op executed inline by RunSync; wait for it.
      cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !running_); });
      if (stopping_) return;
      work = queue_.front();
      queue_.pop_front();
      running_ = work;
    }
    Execute(work);
  }
}

Status Communicator::RunSync(const braze_op_desc_t& desc) {
  std::shared_ptr<Work> work;
  BRAZE_RETURN_IF_ERROR(Prepare(desc, &work));
  bool inline_run = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Nothing queued or running: run on this thread and skip two thread
    // hand-offs, which dominate the latency of small ops.
    if (queue_.empty() && !running_ && !stopping_) {
      running_ = work;
      inline_run = true;
    } else {
      queue_.push_back(work);
    }
  }
  if (inline_run) {
    Execute(work);
  } else {
    cv_.notify_all();
  }
  std::unique_lock<std::mutex> lock(work->mu);
  work->cv.wait(lock, [&] { return work->done; });
  return work->status;
}

// Runs one op whose running_ slot the caller has claimed.
void Communicator::Execute(const std::shared_ptr<Work>& work) {
  Transport* transport = nullptr;
  std::string abort_reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    transport = aborted_.load() ? nullptr : transport_.get();
    abort_reason = abort_reason_;
    work->started = Clock::now();
    work->ctx.deadline = DeadlineAfter(work->ctx.timeout);
  }
  recorder_->MarkStarted(work->flight_id);
  Status status = transport ? transport->Run(work->ctx)
                            : Error(BRAZE_ABORTED, work->ctx.label + ": communicator aborted (" + abort_reason + ")");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (watchdog_fired_ && status.code == BRAZE_ABORTED)
      status = Error(BRAZE_TIMEOUT, work->ctx.label + " timed out after " + std::to_string(work->ctx.timeout) +
                                        " s (watchdog); ranks " + FormatRanks(watchdog_missing_) +
                                        " had not arrived", watchdog_missing_);
  }
  // A rank that comes back long after its op's deadline is the one its
  // peers gave up on, whatever it finds now (their closed connections, its
  // own timeout): it names itself, so the flight recorders agree on it.
  double late = SecondsPast(work->ctx.deadline);
  if ((status.code == BRAZE_TIMEOUT || status.code == BRAZE_RANK_FAILED) && late > kStalledSeconds)
    status = Error(BRAZE_TIMEOUT, work->ctx.label + ": this rank stalled: it ran again " + std::to_string(late) +
                                      " s after the op's deadline (stopped, or starved of CPU), so its peers gave "
                                      "up on it (" + status.message + ")",
                   {(int32_t)rank_});
  // A timeout or a lost peer leaves the transport mid-protocol: nothing
  // after it can be trusted until the group is rebuilt.
  if (status.code == BRAZE_TIMEOUT || status.code == BRAZE_RANK_FAILED || status.code == BRAZE_INTERNAL ||
      status.code == BRAZE_UNAVAILABLE) {
    double duration = std::chrono::duration<double>(Clock::now() - work->started).count();
    braze_op_info_t info = InfoOf(*work, duration, status);
    recorder_->MarkFinished(work->flight_id, status.message);
    EnterAborted(status.message, &info, status.missing_ranks);
  }
  Finish(work, std::move(status));
  bool queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_.reset();
    queued = !queue_.empty();
  }
  idle_cv_.notify_all();
  if (queued) cv_.notify_all();  // queued work waited for this op
}

void Communicator::WatchdogLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    watchdog_cv_.wait_for(lock, std::chrono::milliseconds(50));
    if (!running_ || watchdog_fired_ || !transport_) continue;
    auto limit = running_->ctx.deadline + std::chrono::milliseconds((int64_t)(kWatchdogGraceSeconds * 1000));
    if (Clock::now() < limit) continue;
    watchdog_fired_ = true;
    watchdog_missing_ = transport_->Missing();
    transport_->Abort();
  }
}

void Communicator::Finish(const std::shared_ptr<Work>& work, Status status) {
  double duration = std::chrono::duration<double>(Clock::now() - work->started).count();
  recorder_->MarkFinished(work->flight_id, status.ok() ? "" : status.message);
  RunHooks(BRAZE_HOOK_POST, InfoOf(*work, duration, status));
  {
    std::lock_guard<std::mutex> lock(work->mu);
    work->status = std::move(status);
    work->done = true;
  }
  work->cv.notify_all();
}

void Communicator::EnterAborted(const std::string& reason, const braze_op_info_t* failed_op,
                                const std::vector<int32_t>& missing) {
  std::deque<std::shared_ptr<Work>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.exchange(true)) return;
    abort_reason_ = reason;
    if (transport_) transport_->Abort();
    pending.swap(queue_);
  }
  for (auto& work : pending)
    Finish(work, Error(BRAZE_ABORTED, work->ctx.label + ": communicator aborted (" + reason + ")"));
  DumpOnFailure(reason, missing, failed_op ? UnixNow() - failed_op->duration : 0);
  braze_op_info_t info{};
  if (failed_op) {
    info = *failed_op;
  } else {
    info.op = "abort";
    info.seq = -1;
    info.status = BRAZE_ABORTED;
    info.message = reason.c_str();
  }
  RunHooks(BRAZE_HOOK_ABORT, info);
}

void Communicator::DumpOnFailure(const std::string& reason, const std::vector<int32_t>& missing, double since) {
  if (dump_dir_.empty()) return;
  FlightMeta meta{rank_, world_, generation_, backend_, prefix_, reason, missing, since};
  // Atomically: a rank killed while dumping leaves no half-written file.
  (void)WriteFileAtomically(dump_dir_ + "/braze_fr_g" + std::to_string(generation_) + "_rank" +
                                std::to_string(rank_) + ".json",
                            recorder_->ToJson(meta));
}

void Communicator::Abort(const std::string& reason) {
  EnterAborted(reason.empty() ? "abort() called" : reason, nullptr, {});
}

int64_t Communicator::AddHook(braze_hook_kind_t kind, braze_hook_fn_t fn, void* user) {
  std::lock_guard<std::mutex> lock(hooks_mu_);
  hooks_.push_back({next_hook_, kind, fn, user});
  return next_hook_++;
}

void* Communicator::RemoveHook(int64_t handle) {
  std::lock_guard<std::mutex> lock(hooks_mu_);
  for (auto it = hooks_.begin(); it != hooks_.end(); ++it) {
    if (it->id == handle) {
      void* user = it->user;
      hooks_.erase(it);
      return user;
    }
  }
  return nullptr;
}

void Communicator::RunHooks(braze_hook_kind_t kind, const braze_op_info_t& info) {
  std::vector<Hook> hooks;
  {
    std::lock_guard<std::mutex> lock(hooks_mu_);
    for (auto& h : hooks_)
      if (h.kind == kind) hooks.push_back(h);
  }
  for (auto& h : hooks) h.fn(h.user, &info);
}

Status Communicator::Reconfigure(const std::string& uuid, const std::vector<int32_t>& members) {
  if (uuid.empty() || uuid.find('/') != std::string::npos)
    return Error(BRAZE_INVALID_ARGUMENT, "reconfigure: uuid must be a non-empty string without '/'");
  auto me = std::find(members.begin(), members.end(), rank_);
  if (me == members.end())
    return Error(BRAZE_INVALID_ARGUMENT, "reconfigure: this rank (" + std::to_string(rank_) +
                                             ") is not in members " + FormatRanks(members));
  std::vector<int32_t> seen;
  for (int32_t m : members) {
    if (m < -1 || m >= world_)
      return Error(BRAZE_INVALID_ARGUMENT, "reconfigure: member " + std::to_string(m) + " is not an old rank");
    if (m >= 0 && std::count(members.begin(), members.end(), m) > 1)
      return Error(BRAZE_INVALID_ARGUMENT, "reconfigure: member " + std::to_string(m) + " is listed twice");
  }
  // The uuid names the store namespace of the new generation; a reused one
  // would meet the old generation's keys (and its unlinked shm segment).
  if (!used_uuids_.insert(uuid).second)
    return Error(BRAZE_INVALID_ARGUMENT, "reconfigure: uuid '" + uuid +
                                             "' was already used by this communicator; every reconfigure "
                                             "needs a fresh one");
  int new_rank = (int)(me - members.begin()), new_world = (int)members.size();
  const double started = UnixNow();
  // The members meet by this deadline. A rank that gets past it by far was
  // not running meanwhile (stopped, or starved of CPU), and the others gave up on it.
  const auto members_deadline = DeadlineAfter(timeout_);
  if (!aborted_.load()) Abort("reconfigure to " + FormatRanks(members));
  {
    // The running op, if any, fails promptly because the transport is aborted.
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return !running_ && queue_.empty(); });
    transport_.reset();  // unmaps shared memory, closes sockets
  }
  // A replacement rank was created in "<group>/<uuid>"; later generations of
  // the group live under the same base as everyone else's.
  std::string prefix = group_.substr(0, group_.find('/')) + "/" + uuid;
  std::string mine = FormatRanks(members);
  BRAZE_RETURN_IF_ERROR(store_->Set(prefix + "/members/" + std::to_string(new_rank), mine));
  for (int j = 0; j < new_world; ++j) {
    std::string theirs;
    double left = std::max(std::chrono::duration<double>(members_deadline - Clock::now()).count(), 0.001);
    Status s = store_->Get(prefix + "/members/" + std::to_string(j), left, &theirs);
    if (!s.ok()) {
      // A member that died after the failure that led here: name it, and
      // leave a dump that says so (braze-fr reads the missing ranks).
      s.message = "reconfigure " + uuid + ": " +
                  (members[j] >= 0 ? "rank " + std::to_string(members[j]) : "the newcomer") +
                  " never arrived: " + s.message;
      if (members[j] >= 0) s.missing_ranks = {members[j]};
      DumpOnFailure(s.message, s.missing_ranks, started);
      return s;
    }
    bool newcomer = members[j] == -1 && theirs == "join";
    if (theirs != mine && !newcomer)
      return Error(BRAZE_MISMATCH, "reconfigure " + uuid + ": rank " + std::to_string(j) + " proposes members " +
                                       theirs + " but this rank proposes " + mine);
  }
  double late = SecondsPast(members_deadline);
  Status s = late > kStalledSeconds
                 ? Error(BRAZE_TIMEOUT, "this rank stalled: it ran again " + std::to_string(late) +
                                            " s after the deadline for the members to meet (stopped, or starved of "
                                            "CPU), so its peers gave up on it", {new_rank})
                 : Status::Ok();
  std::unique_ptr<Transport> transport;
  TransportConfig config{new_rank, new_world, store_, prefix, timeout_};
  if (s.ok()) s = FindTransport(backend_)(config, &transport);
  if (!s.ok()) {
    // The transport names new ranks; the dump and the caller speak old ones.
    for (int32_t& r : s.missing_ranks) r = r >= 0 && r < new_world ? members[r] : r;
    s.message = "reconfigure " + uuid + ": " + s.message;
    DumpOnFailure(s.message, s.missing_ranks, started);
    return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  transport_ = std::move(transport);
  rank_ = new_rank;
  world_ = new_world;
  prefix_ = prefix;
  next_seq_ = next_p2p_ = 0;
  ++generation_;
  watchdog_fired_ = false;
  watchdog_missing_.clear();
  abort_reason_.clear();
  aborted_.store(false);
  return Status::Ok();
}

std::string Communicator::FlightJson(const std::string& reason) {
  FlightMeta meta;
  {
    std::lock_guard<std::mutex> lock(mu_);
    meta = FlightMeta{rank_, world_, generation_, backend_, prefix_, reason, {}};
  }
  return recorder_->ToJson(meta);
}

Status Communicator::DumpFlightRecorder(const std::string& path, const std::string& reason) {
  std::string target = path;
  if (target.empty()) {
    if (dump_dir_.empty()) return Error(BRAZE_INVALID_ARGUMENT, "flight_recorder_dump: no path and no dump_dir");
    target = dump_dir_ + "/braze_fr_g" + std::to_string(generation_) + "_rank" + std::to_string(rank_) + ".json";
  }
  Status s = WriteFileAtomically(target, FlightJson(reason));
  if (!s.ok()) s.message = "flight_recorder_dump: " + s.message;
  return s;
}

}  // namespace braze::comm
