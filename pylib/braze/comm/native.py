"""braze's own backends (shm, tcp): the Python face of the C++ runtime."""

from __future__ import annotations

import os
import traceback

import numpy as np

from braze.comm import _tensors
from braze.comm.base import REDUCE_OPS, Comm, HookHandle, Work
from braze.comm.errors import CommInvalidArgument
from braze.runtime import _comm

_HOOK_PRE, _HOOK_POST, _HOOK_ABORT = _comm.HOOK_PRE, _comm.HOOK_POST, _comm.HOOK_ABORT
_OP_ALL_REDUCE, _OP_BROADCAST = _comm.OP_CODES["all_reduce"], _comm.OP_CODES["broadcast"]
_REDUCE_CODES = {name: code for code, name in enumerate(REDUCE_OPS)}


class NativeWork(Work):
    def __init__(self, native):
        self._native = native

    def wait(self, timeout=None):
        return self._native.wait(timeout)

    def is_completed(self):
        return self._native.is_completed()

    def exception(self):
        return self._native.exception()


def _reduce_code(op_name: str, op: str) -> int:
    if op not in REDUCE_OPS:
        raise CommInvalidArgument(f"{op_name}: unknown reduce op {op!r} (choose from {', '.join(REDUCE_OPS)})")
    return REDUCE_OPS.index(op)


def _splits(values, world_size: int, what: str):
    if values is None:
        return None
    values = list(values)
    if any(int(v) != v or v < 0 for v in values):
        raise CommInvalidArgument(f"all_to_all_single: {what} must be non-negative integers, got {values}")
    arr = np.ascontiguousarray(values, dtype=np.uint64)
    if arr.shape != (world_size,):
        raise CommInvalidArgument(f"all_to_all_single: {what} needs {world_size} entries, got {len(values)}")
    return arr


class NativeComm(Comm):
    """A communicator of the C++ runtime (see docs/comm.md)."""

    def __init__(self, backend, rank, world_size, store, timeout=30.0, *, group="braze",
                 flight_recorder_size=2048, dump_dir=None, record_stack=False):
        self.backend = backend
        self.store = store
        self.timeout = float(timeout)
        self._record_stack = record_stack
        dump_dir = dump_dir if dump_dir is not None else os.environ.get("BRAZE_FR_DIR", "")
        self._native = _comm.NativeComm(backend, rank, world_size, store.native, self.timeout, group,
                                        flight_recorder_size, dump_dir)

    @property
    def rank(self) -> int:
        return self._native.rank

    @property
    def world_size(self) -> int:
        return self._native.world_size

    # -- ops ----------------------------------------------------------------
    def _submit(self, op, async_op, *, dtype="float32", reduce_op=0, peer=0, src=None, dst=None,
                in_splits=None, out_splits=None):
        in_count = src.numel if src else 0
        out_count = dst.numel if dst else 0
        stack = "".join(traceback.format_stack(limit=12)[:-2]) if self._record_stack else None
        keepalive = (src, dst, in_splits, out_splits)
        work = self._native.enqueue(
            op, _tensors.DTYPE_CODES[dtype], reduce_op, peer,
            src.address if src else 0, in_count, dst.address if dst else 0, out_count,
            in_splits.ctypes.data if in_splits is not None else 0,
            out_splits.ctypes.data if out_splits is not None else 0,
            0.0, stack, keepalive, async_op)
        return NativeWork(work) if async_op else None

    def all_reduce(self, t, op="sum", async_op=False):
        if not async_op and not self._record_stack:  # the small-message path (numpy arrays, torch CPU tensors)
            code = _REDUCE_CODES.get(op)
            if code is not None and self._native.run_in_place(_OP_ALL_REDUCE, t, code, 0):
                return None
        buf = _tensors.as_buffer(t, "all_reduce", writable=True, backend=self.backend)
        return self._submit("all_reduce", async_op, dtype=buf.dtype, reduce_op=_reduce_code("all_reduce", op),
                            src=buf, dst=buf)

    def all_gather(self, out, t, async_op=False):
        src = _tensors.as_buffer(t, "all_gather input", backend=self.backend)
        dst = _tensors.as_buffer(out, "all_gather output", writable=True, backend=self.backend)
        _tensors.same_dtype("all_gather", src, dst)
        return self._submit("all_gather", async_op, dtype=src.dtype, src=src, dst=dst)

    def reduce_scatter(self, out, t, op="sum", async_op=False):
        src = _tensors.as_buffer(t, "reduce_scatter input", backend=self.backend)
        dst = _tensors.as_buffer(out, "reduce_scatter output", writable=True, backend=self.backend)
        _tensors.same_dtype("reduce_scatter", src, dst)
        return self._submit("reduce_scatter", async_op, dtype=src.dtype,
                            reduce_op=_reduce_code("reduce_scatter", op), src=src, dst=dst)

    def broadcast(self, t, root, async_op=False):
        if not async_op and not self._record_stack and type(root) is int:
            if self._native.run_in_place(_OP_BROADCAST, t, 0, root):
                return None
        buf = _tensors.as_buffer(t, "broadcast", writable=True, backend=self.backend)
        return self._submit("broadcast", async_op, dtype=buf.dtype, peer=int(root), src=buf, dst=buf)

    def all_to_all_single(self, out, t, out_splits=None, in_splits=None, async_op=False):
        src = _tensors.as_buffer(t, "all_to_all_single input", backend=self.backend)
        dst = _tensors.as_buffer(out, "all_to_all_single output", writable=True, backend=self.backend)
        _tensors.same_dtype("all_to_all_single", src, dst)
        return self._submit("all_to_all_single", async_op, dtype=src.dtype, src=src, dst=dst,
                            in_splits=_splits(in_splits, self.world_size, "in_splits"),
                            out_splits=_splits(out_splits, self.world_size, "out_splits"))

    def send(self, t, dst, async_op=False):
        buf = _tensors.as_buffer(t, "send", backend=self.backend)
        return self._submit("send", async_op, dtype=buf.dtype, peer=int(dst), src=buf, dst=buf)

    def recv(self, t, src, async_op=False):
        buf = _tensors.as_buffer(t, "recv", writable=True, backend=self.backend)
        return self._submit("recv", async_op, dtype=buf.dtype, peer=int(src), src=buf, dst=buf)

    def barrier(self, async_op=False):
        return self._submit("barrier", async_op)

    # -- hooks, abort, reconfiguration ----------------------------------------
    def _hook(self, kind, fn):
        handle = self._native.add_hook(kind, fn)
        return HookHandle(lambda: self._native.remove_hook(handle))

    def register_pre_hook(self, fn):
        return self._hook(_HOOK_PRE, fn)

    def register_post_hook(self, fn):
        return self._hook(_HOOK_POST, fn)

    def register_abort_hook(self, fn):
        return self._hook(_HOOK_ABORT, fn)

    def abort(self, reason=""):
        self._native.abort(reason)

    def is_aborted(self):
        return self._native.is_aborted()

    def reconfigure(self, uuid, members):
        self._native.reconfigure(str(uuid), list(members))

    def flight_recorder_dump(self, path=None):
        """Returns the flight recorder as JSON text; also writes it to `path`."""
        if path:
            self._native.flight_recorder_dump(str(path), "on demand")
        return self._native.flight_recorder_json("on demand")

    # -- one-sided ------------------------------------------------------------
    def new_window(self, buffer):
        from braze.comm.window import Window

        return Window(self, buffer)

    def close(self):
        self._native.close()


def create_shm(rank, world_size, store, timeout=30.0, **options):
    return NativeComm("shm", rank, world_size, store, timeout, **options)


def create_tcp(rank, world_size, store, timeout=30.0, **options):
    return NativeComm("tcp", rank, world_size, store, timeout, **options)
