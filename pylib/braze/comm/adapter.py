"""Shared machinery for adapters over existing engines (torch.distributed,
MPI): the same API, hooks, abort, timeouts and a flight recorder in the same
JSON format as the native runtime, with ops run in order on one worker thread.
A subclass runs each op through `_run` (a function that does it to completion)
or, for an engine that queues ops on a device, records them itself with the
same steps (`_begin`, `_started`, `_failed`, `_completed`; see
process_group.NcclComm), and overrides `_engine_abort` where it can cancel."""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import threading
import time
import traceback

from braze.comm import _tensors
from braze.comm.base import REDUCE_OPS, Comm, HookHandle, Work
from braze.comm.errors import CommAborted, CommError, CommInvalidArgument, CommRankFailed, CommTimeout


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _caller_stack() -> str:
    """The Python stack that issued an op, without braze.comm's own frames."""
    frames = traceback.extract_stack(limit=24)
    while frames and os.path.abspath(frames[-1].filename).startswith(_PACKAGE_DIR + os.sep):
        frames.pop()
    return "".join(traceback.format_list(frames[-12:]))


class AdapterWork(Work):
    def __init__(self, comm, future, entry):
        self._comm, self._future, self._entry = comm, future, entry

    def wait(self, timeout=None):
        op_left = self._entry["deadline"] - time.monotonic()
        limit = op_left if timeout is None else min(op_left, float(timeout))
        try:
            self._future.result(timeout=max(limit, 0.0))
        except concurrent.futures.TimeoutError:
            if time.monotonic() < self._entry["deadline"]:
                raise CommTimeout(f"{self._label()}: wait({timeout} s) returned before the op finished") from None
            self._comm._on_failure(self._entry, f"{self._label()} timed out after {self._comm.timeout} s")
            raise CommTimeout(f"{self._label()} timed out after {self._comm.timeout} s") from None
        if self._comm._aborted and self._entry["state"] != "completed":
            raise CommAborted(f"{self._label()}: communicator aborted ({self._comm._abort_reason})")
        return True

    def _label(self):
        return f"{self._entry['op']} (seq {self._entry['seq']})"

    def is_completed(self):
        return self._future.done()

    def exception(self):
        if not self._future.done():
            return None
        return self._future.exception()


class AdapterComm(Comm):
    # Run a synchronous op on the caller's thread when nothing is pending.
    # Only for engines whose own timeout ends a blocked op (Gloo); an MPI call
    # can block forever, so MPI ops always run on the worker thread, where the
    # caller's wait can time out.
    _inline_sync = False

    def __init__(self, backend, rank, world_size, store, timeout, *, group="braze", flight_recorder_size=2048,
                 dump_dir=None, record_stack=False):
        self.backend, self.store, self.timeout = backend, store, float(timeout)
        self.rank, self.world_size, self.group = rank, world_size, group
        self._dump_dir = dump_dir if dump_dir is not None else os.environ.get("BRAZE_FR_DIR", "")
        self._record_stack = record_stack
        self._ring = collections.deque(maxlen=flight_recorder_size)
        self._hooks = {"pre": {}, "post": {}, "abort": {}}
        self._next_hook = 0
        self._seq = self._p2p = 0
        self._generation = 0
        self._aborted, self._abort_reason = False, ""
        self._lock = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"braze-{backend}")
        self._pending = []

    # -- running ops -----------------------------------------------------------
    def _begin(self, op, *, in_numel=0, out_numel=0, dtype="float32", peer=-1):
        """Numbers an op, records it as scheduled and runs the pre hooks;
        returns its flight-recorder entry and its hooks' info."""
        if self._aborted:
            raise CommAborted(f"{op}: communicator is aborted ({self._abort_reason}); call reconfigure() to continue")
        p2p = op in ("send", "recv")
        with self._lock:
            seq = self._p2p if p2p else self._seq
            if p2p:
                self._p2p += 1
            else:
                self._seq += 1
        entry = {"id": len(self._ring) + 1, "seq": seq, "p2p": p2p, "generation": self._generation, "op": op,
                 "in_count": in_numel, "out_count": out_numel, "dtype": dtype, "peer": peer,
                 "state": "scheduled", "t_scheduled": time.time(), "t_started": 0.0, "t_completed": 0.0,
                 "error": "", "stack": _caller_stack() if self._record_stack else "",
                 "deadline": time.monotonic() + self.timeout}
        self._ring.append(entry)
        info = {"op": op, "seq": seq, "in_numel": in_numel, "out_numel": out_numel, "dtype": dtype, "peer": peer,
                "duration": 0.0, "ok": True, "error": ""}
        self._call_hooks("pre", info)
        return entry, info

    def _started(self, entry):
        entry["state"], entry["t_started"] = "started", time.time()
        entry["deadline"] = time.monotonic() + self.timeout

    def _failed(self, entry, info, exc, duration):
        """Records a failed op, aborts the group unless the input was bad,
        runs the post hooks; returns the CommError to raise."""
        error = self._translate(exc, f"{entry['op']} (seq {entry['seq']})")
        entry["state"], entry["error"] = "failed", str(error)
        failed = dict(info, duration=duration, ok=False, error=str(error))
        if not isinstance(error, CommInvalidArgument):  # the engine's group is now suspect
            self._enter_aborted(str(error), failed)
        self._call_hooks("post", failed)
        return error

    def _completed(self, entry, info, duration):
        entry["state"], entry["t_completed"] = "completed", time.time()
        self._call_hooks("post", dict(info, duration=duration))

    def _run(self, op, fn, async_op, **meta):
        """Runs `fn`, which does the op to completion, in issue order: on the
        worker thread, or inline (see `_inline_sync`)."""
        entry, info = self._begin(op, **meta)

        def body():
            self._started(entry)
            start = time.perf_counter()
            try:
                fn()
            except Exception as exc:
                raise self._failed(entry, info, exc, time.perf_counter() - start) from exc
            self._completed(entry, info, time.perf_counter() - start)

        self._pending = [f for f in self._pending if not f.done()]
        if not async_op and self._inline_sync and not self._pending:
            body()  # the engine's own timeout bounds it; saves a thread hop
            return None
        future = self._executor.submit(body)
        self._pending.append(future)
        work = AdapterWork(self, future, entry)
        if async_op:
            return work
        work.wait()
        return None

    def _translate(self, exc, label):
        if isinstance(exc, CommError):
            return exc
        text = str(exc)
        if any(s in text.lower() for s in ("connection closed", "connection reset", "broken pipe", "peer")):
            return CommRankFailed(f"{label}: {self.backend} lost a peer: {text}")
        if "timed out" in text.lower() or "timeout" in text.lower():
            return CommTimeout(f"{label}: {self.backend} timed out: {text}")
        return CommError(f"{label}: {self.backend} failed: {text}")

    def _on_failure(self, entry, reason):
        entry["state"], entry["error"] = "failed", reason
        self._enter_aborted(reason, {"op": entry["op"], "seq": entry["seq"], "in_numel": entry["in_count"],
                                     "out_numel": entry["out_count"], "dtype": entry["dtype"], "peer": entry["peer"],
                                     "duration": self.timeout, "ok": False, "error": reason})

    # -- validation shared by adapters -------------------------------------------
    def _check_reduce(self, op_name, op):
        if op not in REDUCE_OPS:
            raise CommInvalidArgument(f"{op_name}: unknown reduce op {op!r} (choose from {', '.join(REDUCE_OPS)})")

    def _check_rank(self, op_name, role, r):
        if not 0 <= int(r) < self.world_size:
            raise CommInvalidArgument(f"{op_name}: {role} {r} is out of range [0, {self.world_size})")
        if role in ("dst", "src") and int(r) == self.rank:
            raise CommInvalidArgument(f"{op_name}: {role} is this rank itself")

    def _describe(self, obj, what, writable=False):
        """The engine's view of a tensor argument; adapters over a GPU engine
        override it to take device tensors."""
        return _tensors.as_buffer(obj, what, writable, backend=self.backend)

    def _pair(self, op_name, out, t, out_factor=1, in_factor=1):
        src, dst = self._describe(t, f"{op_name} input"), self._describe(out, f"{op_name} output", True)
        _tensors.same_dtype(op_name, src, dst)
        if dst.numel * in_factor != src.numel * out_factor:
            raise CommInvalidArgument(f"{op_name}: output has {dst.numel} elements but needs "
                                      f"{src.numel * out_factor // in_factor}")
        return src, dst

    # -- hooks, abort, flight recorder ---------------------------------------------
    def _add_hook(self, kind, fn):
        self._next_hook += 1
        key = self._next_hook
        self._hooks[kind][key] = fn
        return HookHandle(lambda: self._hooks[kind].pop(key, None))

    def _call_hooks(self, kind, info):
        for fn in list(self._hooks[kind].values()):
            try:
                fn(info)
            except Exception:
                traceback.print_exc()

    def register_pre_hook(self, fn):
        return self._add_hook("pre", fn)

    def register_post_hook(self, fn):
        return self._add_hook("post", fn)

    def register_abort_hook(self, fn):
        return self._add_hook("abort", fn)

    def abort(self, reason=""):
        self._enter_aborted(reason or "abort() called", None)

    def _enter_aborted(self, reason, failed_op):
        """Like the native runtime: fail what is pending, dump, run abort hooks
        (with the failed op's info, or op "abort" when called by the user)."""
        with self._lock:
            if self._aborted:
                return
            self._aborted, self._abort_reason = True, reason
        if self._dump_dir:
            path = os.path.join(self._dump_dir, f"braze_fr_g{self._generation}_rank{self.rank}.json")
            with open(path, "w") as f:
                f.write(self._flight_json(reason))
        self._engine_abort()
        self._call_hooks("abort", failed_op or {"op": "abort", "seq": -1, "in_numel": 0, "out_numel": 0,
                                                "dtype": "float32", "peer": -1, "duration": 0.0, "ok": False,
                                                "error": reason})

    def is_aborted(self):
        return self._aborted

    def _flight_json(self, reason):
        entries = [{k: v for k, v in e.items() if k != "deadline"} for e in self._ring]
        return json.dumps({"version": 1, "rank": self.rank, "world_size": self.world_size, "pid": os.getpid(),
                           "backend": self.backend, "group": self.group, "generation": self._generation,
                           "reason": reason, "dumped_at": time.time(), "missing_ranks": [], "entries": entries},
                          indent=2)

    def flight_recorder_dump(self, path=None):
        text = self._flight_json("on demand")
        if path:
            with open(path, "w") as f:
                f.write(text)
        return text

    def _agree_on_members(self, uuid, members):
        """Same protocol as the native runtime: every member publishes its
        list. Each waits up to two timeouts for the others: an adapter's
        engine has no abort that reaches its peers (the native runtime's
        does), so a survivor may notice the failure only when its own
        collective times out, a whole timeout after another noticed it
        (a 3-rank Gloo test in CI once gave up on a survivor this way)."""
        if self.rank not in members:
            raise CommInvalidArgument(f"reconfigure: this rank ({self.rank}) is not in members {list(members)}")
        new_rank = list(members).index(self.rank)
        mine = json.dumps(list(members))
        prefix = f"{self.group}/{uuid}"
        self.store.set(f"{prefix}/members/{new_rank}", mine)
        for j in range(len(members)):
            theirs = self.store.get(f"{prefix}/members/{j}", 2 * self.timeout).decode()
            if theirs != mine:
                raise CommError(f"reconfigure {uuid}: rank {j} proposes members {theirs}, this rank {mine}")
        return new_rank, prefix

    def _engine_abort(self):
        """Engines that can cancel in-flight work override this."""

    def close(self):
        self._executor.shutdown(wait=False, cancel_futures=True)
