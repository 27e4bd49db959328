# cython: language_level=3, boundscheck=False, wraparound=False
"""Thin Cython layer over the C communication runtime (cxx/runtime/comm/capi.h).

Buffers arrive as raw addresses plus element counts; braze.comm checks the
Python objects (dtype, contiguity, sizes) and keeps them alive while an op is
in flight. Blocking calls release the GIL, so the runtime's worker thread can
run Python hooks meanwhile.
"""
from libc.stdint cimport int32_t, int64_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.ref cimport PyObject

cimport braze.runtime._comm_api as capi

import sys
import traceback

from braze.comm import errors as _errors

_ERRORS = {
    capi.BRAZE_INVALID_ARGUMENT: _errors.CommInvalidArgument,
    capi.BRAZE_MISMATCH: _errors.CommMismatch,
    capi.BRAZE_TIMEOUT: _errors.CommTimeout,
    capi.BRAZE_ABORTED: _errors.CommAborted,
    capi.BRAZE_RANK_FAILED: _errors.CommRankFailed,
}

OP_CODES = {"all_reduce": 0, "all_gather": 1, "reduce_scatter": 2, "broadcast": 3,
            "all_to_all_single": 4, "send": 5, "recv": 6, "barrier": 7}
HOOK_PRE, HOOK_POST, HOOK_ABORT = 0, 1, 2
_DTYPE_NAMES = ("float32", "float16", "bfloat16", "int32", "int64")


cdef object _exception_of(capi.braze_status_t status):
    """The Python exception for a status (consumes the status)."""
    cdef const int32_t* ranks = NULL
    cdef size_t n = capi.braze_status_missing_ranks(status, &ranks)
    missing = [ranks[i] for i in range(n)]
    cls = _ERRORS.get(capi.braze_status_code(status), _errors.CommError)
    message = capi.braze_status_message(status).decode("utf-8", "replace")
    capi.braze_status_free(status)
    return cls(message, missing_ranks=missing)


cdef inline int _check(capi.braze_status_t status) except -1:
    if status != NULL:
        raise _exception_of(status)
    return 0


cdef class NativeStore:
    cdef capi.braze_store_t* handle

    @staticmethod
    def tcp(str host, int port, bint is_server, double timeout, bytes secret):
        cdef NativeStore s = NativeStore.__new__(NativeStore)
        cdef bytes h = host.encode()
        cdef const char* hp = h
        cdef const char* sp = secret
        cdef size_t sn = len(secret)
        cdef capi.braze_status_t st
        with nogil:
            st = capi.braze_tcp_store_create(hp, port, is_server, timeout, sp, sn, &s.handle)
        _check(st)
        return s

    @staticmethod
    def file(str path, double timeout, bytes secret):
        cdef NativeStore s = NativeStore.__new__(NativeStore)
        _check(capi.braze_file_store_create(path.encode(), timeout, secret, len(secret), &s.handle))
        return s

    @property
    def port(self):
        return capi.braze_store_port(self.handle)

    def set(self, str key, bytes value):
        _check(capi.braze_store_set(self.handle, key.encode(), <const char*>value, len(value)))

    def get(self, str key, double timeout):
        cdef void* value = NULL
        cdef size_t n = 0
        cdef bytes k = key.encode()
        cdef const char* kp = k
        cdef capi.braze_status_t st
        with nogil:
            st = capi.braze_store_get(self.handle, kp, timeout, &value, &n)
        _check(st)
        try:
            return (<char*>value)[:n]
        finally:
            free(value)

    def add(self, str key, int64_t delta):
        cdef int64_t result = 0
        _check(capi.braze_store_add(self.handle, key.encode(), delta, &result))
        return result

    def __dealloc__(self):
        if self.handle != NULL:
            capi.braze_store_release(self.handle)


cdef int _dtype_code(const Py_buffer* view) noexcept:
    """The runtime's dtype code for a buffer's struct format, -1 if none.
    Byte order: native or little-endian only (braze runs on little-endian hosts)."""
    cdef const char* f = view.format
    if f == NULL:
        return -1
    if f[0] == b'@' or f[0] == b'=' or f[0] == b'<':
        f += 1
    if f[0] == 0 or f[1] != 0:
        return -1
    if f[0] == b'f' and view.itemsize == 4:
        return 0  # float32
    if f[0] == b'e' and view.itemsize == 2:
        return 1  # float16
    if (f[0] == b'i' or f[0] == b'l' or f[0] == b'q') and view.itemsize == 4:
        return 3  # int32
    if (f[0] == b'l' or f[0] == b'q') and view.itemsize == 8:
        return 4  # int64
    return -1


# torch.Tensor and its dtypes' codes, once torch has been imported (braze.comm
# does not import it): torch tensors have no buffer protocol.
cdef object _torch_tensor = None
cdef dict _torch_codes = None


cdef bint _is_torch_tensor(object obj):
    global _torch_tensor, _torch_codes
    if _torch_tensor is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        _torch_codes = {getattr(torch, name): code for code, name in enumerate(_DTYPE_NAMES)}
        _torch_tensor = torch.Tensor
    return type(obj) is _torch_tensor


def rejected_connections():
    """Connections this process refused (failed authentication, malformed input)."""
    return capi.braze_comm_rejected_connections()


cdef void _hook_trampoline(void* user, const capi.braze_op_info_t* info) noexcept with gil:
    try:
        (<object>user)({
            "op": info.op.decode(), "seq": info.seq, "in_numel": info.in_count,
            "out_numel": info.out_count, "dtype": _DTYPE_NAMES[<int>info.dtype], "peer": info.peer,
            "duration": info.duration, "ok": info.status == capi.BRAZE_OK,
            "error": info.message.decode("utf-8", "replace") if info.message != NULL else "",
        })
    except BaseException:
        # A broken hook must not take the communicator down with it.
        traceback.print_exc()


cdef class NativeWork:
    cdef capi.braze_work_t* handle
    cdef readonly object keepalive

    def wait(self, timeout=None):
        cdef double t = -1.0 if timeout is None else float(timeout)
        cdef capi.braze_status_t st
        with nogil:
            st = capi.braze_work_wait(self.handle, t)
        _check(st)
        return True

    def is_completed(self):
        return capi.braze_work_is_completed(self.handle) != 0

    def exception(self):
        cdef capi.braze_status_t st = capi.braze_work_status(self.handle)
        return None if st == NULL else _exception_of(st)

    def __dealloc__(self):
        if self.handle != NULL:
            capi.braze_work_release(self.handle)


cdef class NativeComm:
    cdef capi.braze_comm_t* handle
    cdef dict hooks
    cdef list removed_hooks
    # Async works not yet seen completed: they hold the buffers the runtime
    # is reading and writing, even when the caller drops its Work handle.
    cdef list inflight
    cdef readonly NativeStore store

    def __cinit__(self, str backend, int rank, int world_size, NativeStore store, double timeout,
                  str group="braze", size_t flight_recorder_size=2048, str dump_dir=""):
        self.hooks = {}
        self.removed_hooks = []
        self.inflight = []
        self.store = store
        cdef bytes b = backend.encode(), g = group.encode(), d = dump_dir.encode()
        cdef capi.braze_comm_options_t o
        o.backend = b
        o.rank = rank
        o.world_size = world_size
        o.timeout = timeout
        o.group = g
        o.flight_recorder_size = flight_recorder_size
        o.dump_dir = d
        cdef capi.braze_status_t st
        with nogil:
            st = capi.braze_comm_create(&o, store.handle, &self.handle)
        _check(st)

    cdef capi.braze_comm_t* _open(self) except NULL:
        """The handle, or CommAborted once the communicator is closed (a
        closed communicator's handle is NULL: no call may reach the C API)."""
        if self.handle == NULL:
            raise _errors.CommAborted("the communicator is closed")
        return self.handle

    @property
    def rank(self):
        return capi.braze_comm_rank(self._open())

    @property
    def world_size(self):
        return capi.braze_comm_world_size(self._open())

    def enqueue(self, str op, int dtype, int reduce_op, int peer, size_t in_ptr, uint64_t in_count,
                size_t out_ptr, uint64_t out_count, size_t in_splits_ptr, size_t out_splits_ptr,
                double timeout, object stack, object keepalive, bint async_op):
        """Queues the op and returns a NativeWork, or (async_op False) runs it
        to completion and returns None."""
        cdef capi.braze_op_desc_t d
        cdef bytes stack_bytes = stack.encode() if stack else b""
        d.op = <capi.braze_op_kind_t><int>OP_CODES[op]
        d.dtype = <capi.braze_dtype_t>dtype
        d.reduce_op = <capi.braze_reduce_op_t>reduce_op
        d.peer = peer
        d.in_ = <const void*>in_ptr
        d.in_count = in_count
        d.out = <void*>out_ptr
        d.out_count = out_count
        d.in_splits = <const uint64_t*>in_splits_ptr
        d.out_splits = <const uint64_t*>out_splits_ptr
        d.timeout = timeout
        d.stack = NULL
        if stack:
            d.stack = <const char*>stack_bytes
        cdef capi.braze_status_t st
        cdef capi.braze_comm_t* handle = self._open()
        if not async_op:
            with nogil:
                st = capi.braze_comm_run(handle, &d)
            _check(st)
            return None
        cdef NativeWork w = NativeWork.__new__(NativeWork)
        _check(capi.braze_comm_enqueue(handle, &d, &w.handle))
        w.keepalive = keepalive
        self.inflight = [x for x in self.inflight if not x.is_completed()]
        self.inflight.append(w)
        return w

    def run_in_place(self, int op, object buf, int reduce_op, int peer):
        """A synchronous in-place op (all_reduce, broadcast) on an object with
        the buffer protocol (numpy arrays) or on a torch CPU tensor: one native
        call, no Python objects kept (a tensor's address and size pass as two
        transient ints). Returns False, having done nothing, when `buf` is not
        a writable contiguous CPU buffer of a supported dtype; the caller then
        takes the checked path, which explains what is wrong."""
        cdef Py_buffer view
        cdef capi.braze_op_desc_t d
        cdef capi.braze_status_t st
        cdef int dtype
        self._open()
        memset(&d, 0, sizeof(d))
        d.op = <capi.braze_op_kind_t>op
        d.reduce_op = <capi.braze_reduce_op_t>reduce_op
        d.peer = peer
        if _torch_tensor is not None and type(buf) is _torch_tensor:
            return self._run_tensor(&d, buf)
        try:
            PyObject_GetBuffer(buf, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE)
        except (BufferError, TypeError, ValueError):
            # The first torch tensor this process passes meets torch here.
            return _is_torch_tensor(buf) and self._run_tensor(&d, buf)
        dtype = _dtype_code(&view)
        if dtype < 0:
            PyBuffer_Release(&view)
            return False
        d.dtype = <capi.braze_dtype_t>dtype
        d.in_ = view.buf
        d.out = view.buf
        d.in_count = d.out_count = <uint64_t>(view.len // view.itemsize)
        with nogil:
            st = capi.braze_comm_run(self.handle, &d)
        PyBuffer_Release(&view)
        _check(st)
        return True

    cdef bint _run_tensor(self, capi.braze_op_desc_t* d, object t) except -1:
        """run_in_place for a torch.Tensor; False when it is not a contiguous
        CPU tensor of a supported dtype."""
        cdef capi.braze_status_t st
        cdef int dtype = _torch_codes.get(t.dtype, -1)
        if dtype < 0 or not t.is_cpu or not t.is_contiguous():
            return False
        d.dtype = <capi.braze_dtype_t>dtype
        d.in_ = d.out = <void*><uintptr_t>t.data_ptr()
        d.in_count = d.out_count = <uint64_t>t.numel()
        with nogil:
            st = capi.braze_comm_run(self.handle, d)
        _check(st)
        return True

    def add_hook(self, int kind, fn):
        cdef int64_t h = capi.braze_comm_add_hook(self._open(), <capi.braze_hook_kind_t>kind, _hook_trampoline, <void*>fn)
        self.hooks[h] = fn  # the runtime holds a borrowed pointer; keep it alive
        return h

    def remove_hook(self, int64_t h):
        capi.braze_comm_remove_hook(self._open(), h)
        # The worker thread may have copied the hook list just before and be
        # waiting for the GIL to call it: keep the callable alive until close.
        if h in self.hooks:
            self.removed_hooks.append(self.hooks.pop(h))

    def abort(self, str reason=""):
        if self.handle != NULL:  # a closed communicator has nothing left to fail
            capi.braze_comm_abort(self.handle, reason.encode())

    def is_aborted(self):
        return self.handle == NULL or capi.braze_comm_is_aborted(self.handle) != 0

    def reconfigure(self, str uuid, members):
        cdef bytes u = uuid.encode()
        cdef const char* up = u
        cdef capi.braze_comm_t* handle = self._open()
        cdef size_t n = len(members)
        cdef int32_t* m = <int32_t*>malloc(max(n, 1) * sizeof(int32_t))
        cdef capi.braze_status_t st
        for i in range(n):
            m[i] = -1 if members[i] is None else int(members[i])
        with nogil:
            st = capi.braze_comm_reconfigure(handle, up, m, n)
        free(m)
        _check(st)

    def flight_recorder_json(self, str reason="on demand"):
        cdef char* text = capi.braze_comm_flight_recorder_json(self._open(), reason.encode())
        try:
            return text.decode("utf-8", "replace")
        finally:
            free(text)

    def flight_recorder_dump(self, str path="", str reason="on demand"):
        _check(capi.braze_comm_flight_recorder_dump(self._open(), path.encode(), reason.encode()))

    def close(self):
        cdef capi.braze_comm_t* h = self.handle
        self.handle = NULL
        if h != NULL:
            with nogil:
                capi.braze_comm_release(h)  # finishes or fails every op first
        self.hooks.clear()
        self.removed_hooks.clear()
        self.inflight.clear()

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                capi.braze_comm_release(self.handle)


cdef class NativeWindow:
    cdef capi.braze_window_t* handle
    cdef readonly object buffer

    def __cinit__(self, NativeComm comm, size_t base, uint64_t nbytes, object buffer):
        self.buffer = buffer
        cdef capi.braze_status_t st
        cdef capi.braze_comm_t* handle = comm._open()
        with nogil:
            st = capi.braze_window_create(handle, <void*>base, nbytes, &self.handle)
        _check(st)

    def size(self, int rank):
        return capi.braze_window_size(self.handle, rank)

    def put(self, int rank, size_t data, uint64_t nbytes, uint64_t offset):
        cdef capi.braze_status_t st
        with nogil:
            st = capi.braze_window_put(self.handle, rank, <const void*>data, nbytes, offset)
        _check(st)

    def get(self, int rank, size_t data, uint64_t nbytes, uint64_t offset):
        cdef capi.braze_status_t st
        with nogil:
            st = capi.braze_window_get(self.handle, rank, <void*>data, nbytes, offset)
        _check(st)

    def signal(self, int rank):
        cdef capi.braze_status_t st
        with nogil:
            st = capi.braze_window_signal(self.handle, rank)
        _check(st)

    def wait_signal(self, int rank, double timeout):
        cdef capi.braze_status_t st
        with nogil:
            st = capi.braze_window_wait_signal(self.handle, rank, timeout)
        _check(st)

    def close(self):
        if self.handle != NULL:
            with nogil:
                capi.braze_window_release(self.handle)
            self.handle = NULL

    def __dealloc__(self):
        self.close()


cdef class NativeSymmetric:
    cdef capi.braze_symmetric_t* handle

    def __cinit__(self, NativeComm comm, uint64_t nbytes):
        cdef capi.braze_status_t st
        cdef capi.braze_comm_t* handle = comm._open()
        with nogil:
            st = capi.braze_symmetric_create(handle, nbytes, &self.handle)
        _check(st)

    def address(self, int rank):
        return <size_t>capi.braze_symmetric_peer(self.handle, rank)

    @property
    def nbytes(self):
        return capi.braze_symmetric_size(self.handle)

    def close(self):
        if self.handle != NULL:
            capi.braze_symmetric_release(self.handle)
            self.handle = NULL

    def __dealloc__(self):
        self.close()
