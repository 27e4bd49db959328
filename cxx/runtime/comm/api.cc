// The C interface over Communicator (see api.h).
#include <cstdlib>
#include <cstring>

#include "communicator.h"

using namespace braze::comm;

extern "C" {

const char* braze_op_name(braze_op_kind_t op) {
  switch (op) {
    case BRAZE_OP_ALL_REDUCE: return "all_reduce";
    case BRAZE_OP_ALL_GATHER: return "all_gather";
    case BRAZE_OP_REDUCE_SCATTER: return "reduce_scatter";
    case BRAZE_OP_BROADCAST: return "broadcast";
    case BRAZE_OP_ALL_TO_ALL: return "all_to_all_single";
    case BRAZE_OP_SEND: return "send";
    case BRAZE_OP_RECV: return "recv";
    case BRAZE_OP_BARRIER: return "barrier";
  }
  return "unknown";
}

braze_status_t braze_comm_create(const braze_comm_options_t* options, braze_store_t* store,
                                 braze_comm_t** out) {
  std::unique_ptr<Communicator> comm;
  Status s = Communicator::Create(*options, store->store, &comm);
  if (!s.ok()) return ToC(s);
  *out = new braze_comm_s{std::move(comm)};
  return nullptr;
}

void braze_comm_release(braze_comm_t* comm) { delete comm; }
int32_t braze_comm_rank(braze_comm_t* comm) { return comm->comm->rank(); }
int32_t braze_comm_world_size(braze_comm_t* comm) { return comm->comm->world(); }
const char* braze_comm_backend(braze_comm_t* comm) { return comm->comm->backend().c_str(); }

braze_status_t braze_comm_enqueue(braze_comm_t* comm, const braze_op_desc_t* op, braze_work_t** out) {
  std::shared_ptr<Work> work;
  Status s = comm->comm->Enqueue(*op, &work);
  if (!s.ok()) return ToC(s);
  *out = new braze_work_s{std::move(work)};
  return nullptr;
}

braze_status_t braze_comm_run(braze_comm_t* comm, const braze_op_desc_t* op) {
  return ToC(comm->comm->RunSync(*op));
}

braze_status_t braze_work_wait(braze_work_t* handle, double timeout) {
  Work& work = *handle->work;
  std::unique_lock<std::mutex> lock(work.mu);
  if (timeout < 0) {
    work.cv.wait(lock, [&] { return work.done; });
  } else if (!work.cv.wait_until(lock, DeadlineAfter(timeout), [&] { return work.done; })) {
    return ToC(Error(BRAZE_TIMEOUT, work.ctx.label + ": wait(" + std::to_string(timeout) +
                                        " s) returned before the op finished"));
  }
  return work.status.ok() ? nullptr : ToC(work.status);
}

int braze_work_is_completed(braze_work_t* handle) {
  std::lock_guard<std::mutex> lock(handle->work->mu);
  return handle->work->done ? 1 : 0;
}

braze_status_t braze_work_status(braze_work_t* handle) {
  std::lock_guard<std::mutex> lock(handle->work->mu);
  if (!handle->work->done || handle->work->status.ok()) return nullptr;
  return ToC(handle->work->status);
}

void braze_work_release(braze_work_t* work) { delete work; }

int64_t braze_comm_add_hook(braze_comm_t* comm, braze_hook_kind_t kind, braze_hook_fn_t fn, void* user) {
  return comm->comm->AddHook(kind, fn, user);
}

void* braze_comm_remove_hook(braze_comm_t* comm, int64_t handle) { return comm->comm->RemoveHook(handle); }

void braze_comm_abort(braze_comm_t* comm, const char* reason) { comm->comm->Abort(reason ? reason : ""); }

int braze_comm_is_aborted(braze_comm_t* comm) { return comm->comm->aborted() ? 1 : 0; }

braze_status_t braze_comm_reconfigure(braze_comm_t* comm, const char* uuid, const int32_t* members, size_t n) {
  return ToC(comm->comm->Reconfigure(uuid, std::vector<int32_t>(members, members + n)));
}

char* braze_comm_flight_recorder_json(braze_comm_t* comm, const char* reason) {
  std::string json = comm->comm->FlightJson(reason ? reason : "on demand");
  char* out = static_cast<char*>(malloc(json.size() + 1));
  memcpy(out, json.c_str(), json.size() + 1);
  return out;
}

braze_status_t braze_comm_flight_recorder_dump(braze_comm_t* comm, const char* path, const char* reason) {
  return ToC(comm->comm->DumpFlightRecorder(path ? path : "", reason ? reason : "on demand"));
}

}  // extern "C"
