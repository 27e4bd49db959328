/* braze communication runtime: the plain C interface.
 *
 * Everything the Python layer (Cython) and, later, the compiled-graph executor
 * need goes through this header. Handles are opaque; every call that can fail
 * returns a braze_status_t, NULL meaning success. A non-NULL status owns its
 * message and must be released with braze_status_free. No MLIR/LLVM here.
 */
#ifndef BRAZE_RUNTIME_COMM_API_H
#define BRAZE_RUNTIME_COMM_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*----------------------------------------------------------------------------
 * Status
 *--------------------------------------------------------------------------*/
typedef enum {
  BRAZE_OK = 0,
  BRAZE_INVALID_ARGUMENT = 1, /* bad rank, size, dtype, offset: caught locally */
  BRAZE_MISMATCH = 2,         /* ranks disagree on op, size, dtype or root */
  BRAZE_TIMEOUT = 3,          /* an op or a store wait ran past its timeout */
  BRAZE_ABORTED = 4,          /* the communicator was aborted */
  BRAZE_RANK_FAILED = 5,      /* a peer died or closed its connection */
  BRAZE_UNAVAILABLE = 6,      /* a system resource failed (socket, shm) */
  BRAZE_INTERNAL = 7,
} braze_status_code_t;

typedef struct braze_status_s* braze_status_t;

braze_status_code_t braze_status_code(braze_status_t status);
const char* braze_status_message(braze_status_t status);
/* Ranks that had not arrived when an op timed out or failed (may be empty). */
size_t braze_status_missing_ranks(braze_status_t status, const int32_t** ranks);
void braze_status_free(braze_status_t status);

/*----------------------------------------------------------------------------
 * Key-value stores (rendezvous)
 *--------------------------------------------------------------------------*/
typedef struct braze_store_s braze_store_t;

/* `secret` (secret_len bytes, may be empty) is the job secret every
 * connection made through this store authenticates with: the store's own
 * and those of the transports and windows rendezvousing on it. */
braze_status_t braze_tcp_store_create(const char* host, int port, int is_server,
                                      double timeout, const char* secret,
                                      size_t secret_len, braze_store_t** out);
braze_status_t braze_file_store_create(const char* path, double timeout,
                                       const char* secret, size_t secret_len,
                                       braze_store_t** out);
braze_status_t braze_store_set(braze_store_t* store, const char* key,
                               const void* value, size_t n);
/* Blocks until the key exists or the timeout passes. *value is malloc'ed. */
braze_status_t braze_store_get(braze_store_t* store, const char* key,
                               double timeout, void** value, size_t* n);
braze_status_t braze_store_add(braze_store_t* store, const char* key,
                               int64_t delta, int64_t* result);
/* The port a TCP store server listens on (useful with port 0), else -1. */
int braze_store_port(braze_store_t* store);
void braze_store_release(braze_store_t* store);
/* Connections this process refused (failed authentication, malformed
 * requests): each is also logged to stderr with the peer's address. */
uint64_t braze_comm_rejected_connections(void);

/*----------------------------------------------------------------------------
 * Communicators and operations
 *--------------------------------------------------------------------------*/
typedef enum {
  BRAZE_DTYPE_FLOAT32 = 0,
  BRAZE_DTYPE_FLOAT16 = 1,
  BRAZE_DTYPE_BFLOAT16 = 2,
  BRAZE_DTYPE_INT32 = 3,
  BRAZE_DTYPE_INT64 = 4,
} braze_dtype_t;

typedef enum {
  BRAZE_REDUCE_SUM = 0,
  BRAZE_REDUCE_PROD = 1,
  BRAZE_REDUCE_MIN = 2,
  BRAZE_REDUCE_MAX = 3,
  BRAZE_REDUCE_AVG = 4,
} braze_reduce_op_t;

typedef enum {
  BRAZE_OP_ALL_REDUCE = 0,
  BRAZE_OP_ALL_GATHER = 1,
  BRAZE_OP_REDUCE_SCATTER = 2,
  BRAZE_OP_BROADCAST = 3,
  BRAZE_OP_ALL_TO_ALL = 4,
  BRAZE_OP_SEND = 5,
  BRAZE_OP_RECV = 6,
  BRAZE_OP_BARRIER = 7,
} braze_op_kind_t;

const char* braze_op_name(braze_op_kind_t op);

/* One operation. Counts are in elements. `peer` is the root (broadcast), the
 * destination (send) or the source (recv). The split arrays (all_to_all) have
 * world_size entries and must stay alive until the work completes, as must the
 * buffers. */
typedef struct {
  braze_op_kind_t op;
  braze_dtype_t dtype;
  braze_reduce_op_t reduce_op;
  int32_t peer;
  const void* in;
  uint64_t in_count;
  void* out;
  uint64_t out_count;
  const uint64_t* in_splits;
  const uint64_t* out_splits;
  double timeout; /* seconds; <= 0 means the communicator's default */
  const char* stack; /* optional Python stack for the flight recorder; copied */
} braze_op_desc_t;

/* What hooks see. duration is 0 for pre hooks. */
typedef struct {
  const char* op;
  int64_t seq; /* collective sequence id, or the p2p id for send/recv */
  uint64_t in_count;
  uint64_t out_count;
  braze_dtype_t dtype;
  int32_t peer;
  double duration;
  braze_status_code_t status;
  const char* message; /* error text for a failed op, else "" */
} braze_op_info_t;

typedef enum {
  BRAZE_HOOK_PRE = 0,
  BRAZE_HOOK_POST = 1,
  BRAZE_HOOK_ABORT = 2,
} braze_hook_kind_t;

/* Pre hooks run on the issuing thread, post hooks on the communicator's
 * worker thread, abort hooks on the thread that aborts. */
typedef void (*braze_hook_fn_t)(void* user, const braze_op_info_t* info);

typedef struct braze_comm_s braze_comm_t;
typedef struct braze_work_s braze_work_t;

typedef struct {
  const char* backend; /* "shm" or "tcp" */
  int32_t rank;
  int32_t world_size;
  double timeout;
  const char* group; /* store namespace; "" means "braze" */
  size_t flight_recorder_size;
  const char* dump_dir; /* flight-recorder dumps on timeout/abort; "" = none */
} braze_comm_options_t;

braze_status_t braze_comm_create(const braze_comm_options_t* options,
                                 braze_store_t* store, braze_comm_t** out);
void braze_comm_release(braze_comm_t* comm);
int32_t braze_comm_rank(braze_comm_t* comm);
int32_t braze_comm_world_size(braze_comm_t* comm);
const char* braze_comm_backend(braze_comm_t* comm);

/* Validates the descriptor and queues the op; returns a work handle. */
braze_status_t braze_comm_enqueue(braze_comm_t* comm, const braze_op_desc_t* op,
                                  braze_work_t** out);
/* Runs the op to completion (on the calling thread when nothing is queued,
 * which saves two thread hand-offs for small ops). */
braze_status_t braze_comm_run(braze_comm_t* comm, const braze_op_desc_t* op);
/* Waits up to timeout seconds (< 0: until the op finishes or fails). Returns
 * the op's own status, or BRAZE_TIMEOUT if the wait itself ran out. */
braze_status_t braze_work_wait(braze_work_t* work, double timeout);
int braze_work_is_completed(braze_work_t* work);
/* The op's failure, or NULL while pending or on success. */
braze_status_t braze_work_status(braze_work_t* work);
void braze_work_release(braze_work_t* work);

int64_t braze_comm_add_hook(braze_comm_t* comm, braze_hook_kind_t kind,
                            braze_hook_fn_t fn, void* user);
/* Returns the user pointer of the removed hook, or NULL if unknown. */
void* braze_comm_remove_hook(braze_comm_t* comm, int64_t handle);

void braze_comm_abort(braze_comm_t* comm, const char* reason);
int braze_comm_is_aborted(braze_comm_t* comm);
/* members[i] is the old rank that becomes rank i; -1 marks a newcomer. */
braze_status_t braze_comm_reconfigure(braze_comm_t* comm, const char* uuid,
                                      const int32_t* members, size_t n);

/* JSON text of the flight recorder; malloc'ed, caller frees with free(). */
char* braze_comm_flight_recorder_json(braze_comm_t* comm, const char* reason);
/* Writes it under the dump directory (or `path` if non-empty). */
braze_status_t braze_comm_flight_recorder_dump(braze_comm_t* comm,
                                               const char* path,
                                               const char* reason);

/*----------------------------------------------------------------------------
 * One-sided windows (served by a background thread on every rank)
 *--------------------------------------------------------------------------*/
typedef struct braze_window_s braze_window_t;

braze_status_t braze_window_create(braze_comm_t* comm, void* base,
                                   uint64_t nbytes, braze_window_t** out);
uint64_t braze_window_size(braze_window_t* window, int32_t rank);
braze_status_t braze_window_put(braze_window_t* window, int32_t rank,
                                const void* data, uint64_t nbytes,
                                uint64_t offset);
braze_status_t braze_window_get(braze_window_t* window, int32_t rank,
                                void* data, uint64_t nbytes, uint64_t offset);
braze_status_t braze_window_signal(braze_window_t* window, int32_t rank);
braze_status_t braze_window_wait_signal(braze_window_t* window, int32_t rank,
                                        double timeout);
void braze_window_release(braze_window_t* window);

/*----------------------------------------------------------------------------
 * Symmetric memory: one shared segment per rank, mapped by every rank of the
 * host.
 *--------------------------------------------------------------------------*/
typedef struct braze_symmetric_s braze_symmetric_t;

braze_status_t braze_symmetric_create(braze_comm_t* comm, uint64_t nbytes,
                                      braze_symmetric_t** out);
void* braze_symmetric_peer(braze_symmetric_t* mem, int32_t rank);
uint64_t braze_symmetric_size(braze_symmetric_t* mem);
void braze_symmetric_release(braze_symmetric_t* mem);

#ifdef __cplusplus
}
#endif

#endif /* BRAZE_RUNTIME_COMM_API_H */
