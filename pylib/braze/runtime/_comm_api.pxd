# Declarations of cxx/runtime/comm/api.h for the Cython wrapper.
from libc.stdint cimport int32_t, int64_t, uint64_t

cdef extern from "api.h" nogil:
    ctypedef enum braze_status_code_t:
        BRAZE_OK
        BRAZE_INVALID_ARGUMENT
        BRAZE_MISMATCH
        BRAZE_TIMEOUT
        BRAZE_ABORTED
        BRAZE_RANK_FAILED
        BRAZE_UNAVAILABLE
        BRAZE_INTERNAL

    ctypedef struct braze_status_s
    ctypedef braze_status_s* braze_status_t
    braze_status_code_t braze_status_code(braze_status_t status)
    const char* braze_status_message(braze_status_t status)
    size_t braze_status_missing_ranks(braze_status_t status, const int32_t** ranks)
    void braze_status_free(braze_status_t status)

    ctypedef struct braze_store_t
    braze_status_t braze_tcp_store_create(const char* host, int port, int is_server, double timeout,
                                          const char* secret, size_t secret_len, braze_store_t** out)
    braze_status_t braze_file_store_create(const char* path, double timeout, const char* secret, size_t secret_len,
                                           braze_store_t** out)
    braze_status_t braze_store_set(braze_store_t* store, const char* key, const void* value, size_t n)
    braze_status_t braze_store_get(braze_store_t* store, const char* key, double timeout, void** value, size_t* n)
    braze_status_t braze_store_add(braze_store_t* store, const char* key, int64_t delta, int64_t* result)
    int braze_store_port(braze_store_t* store)
    void braze_store_release(braze_store_t* store)
    uint64_t braze_comm_rejected_connections()

    ctypedef enum braze_dtype_t:
        BRAZE_DTYPE_FLOAT32
    ctypedef enum braze_reduce_op_t:
        BRAZE_REDUCE_SUM
    ctypedef enum braze_op_kind_t:
        BRAZE_OP_ALL_REDUCE
    ctypedef enum braze_hook_kind_t:
        BRAZE_HOOK_PRE

    ctypedef struct braze_op_desc_t:
        braze_op_kind_t op
        braze_dtype_t dtype
        braze_reduce_op_t reduce_op
        int32_t peer
        const void* in_ "in"
        uint64_t in_count
        void* out
        uint64_t out_count
        const uint64_t* in_splits
        const uint64_t* out_splits
        double timeout
        const char* stack

    ctypedef struct braze_op_info_t:
        const char* op
        int64_t seq
        uint64_t in_count
        uint64_t out_count
        braze_dtype_t dtype
        int32_t peer
        double duration
        braze_status_code_t status
        const char* message

    ctypedef void (*braze_hook_fn_t)(void* user, const braze_op_info_t* info) noexcept

    ctypedef struct braze_comm_t
    ctypedef struct braze_work_t

    ctypedef struct braze_comm_options_t:
        const char* backend
        int32_t rank
        int32_t world_size
        double timeout
        const char* group
        size_t flight_recorder_size
        const char* dump_dir

    braze_status_t braze_comm_create(const braze_comm_options_t* options, braze_store_t* store, braze_comm_t** out)
    void braze_comm_release(braze_comm_t* comm)
    int32_t braze_comm_rank(braze_comm_t* comm)
    int32_t braze_comm_world_size(braze_comm_t* comm)
    braze_status_t braze_comm_enqueue(braze_comm_t* comm, const braze_op_desc_t* op, braze_work_t** out)
    braze_status_t braze_comm_run(braze_comm_t* comm, const braze_op_desc_t* op)
    braze_status_t braze_work_wait(braze_work_t* work, double timeout)
    int braze_work_is_completed(braze_work_t* work)
    braze_status_t braze_work_status(braze_work_t* work)
    void braze_work_release(braze_work_t* work)
    int64_t braze_comm_add_hook(braze_comm_t* comm, braze_hook_kind_t kind, braze_hook_fn_t fn, void* user)
    void* braze_comm_remove_hook(braze_comm_t* comm, int64_t handle)
    void braze_comm_abort(braze_comm_t* comm, const char* reason)
    int braze_comm_is_aborted(braze_comm_t* comm)
    braze_status_t braze_comm_reconfigure(braze_comm_t* comm, const char* uuid, const int32_t* members, size_t n)
    char* braze_comm_flight_recorder_json(braze_comm_t* comm, const char* reason)
    braze_status_t braze_comm_flight_recorder_dump(braze_comm_t* comm, const char* path, const char* reason)

    ctypedef struct braze_window_t
    braze_status_t braze_window_create(braze_comm_t* comm, void* base, uint64_t nbytes, braze_window_t** out)
    uint64_t braze_window_size(braze_window_t* window, int32_t rank)
    braze_status_t braze_window_put(braze_window_t* window, int32_t rank, const void* data, uint64_t nbytes, uint64_t offset)
    braze_status_t braze_window_get(braze_window_t* window, int32_t rank, void* data, uint64_t nbytes, uint64_t offset)
    braze_status_t braze_window_signal(braze_window_t* window, int32_t rank)
    braze_status_t braze_window_wait_signal(braze_window_t* window, int32_t rank, double timeout)
    void braze_window_release(braze_window_t* window)

    ctypedef struct braze_symmetric_t
    braze_status_t braze_symmetric_create(braze_comm_t* comm, uint64_t nbytes, braze_symmetric_t** out)
    void* braze_symmetric_peer(braze_symmetric_t* mem, int32_t rank)
    uint64_t braze_symmetric_size(braze_symmetric_t* mem)
    void braze_symmetric_release(braze_symmetric_t* mem)
