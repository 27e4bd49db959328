"""The torch.distributed adapter: one process-group adapter, two engines.

`gloo` runs ProcessGroupGloo on CPU tensors (numpy arrays too); `nccl` runs
ProcessGroupNCCL on CUDA tensors. Both rendezvous through the braze store
and share every op's definition, hooks, flight recorder, abort and
`reconfigure` (a new process group among the members); they differ in where
tensors live and in when an op counts as done:

- Gloo works on the host: an op runs to completion on the communicator's
  worker thread (or inline when synchronous), as for any adapter.
- NCCL works on a CUDA stream of its own: an op is issued on the caller's
  thread (ProcessGroupNCCL orders it after the work already queued on the
  caller's current stream) and returns at once. `Work.wait()` makes the
  caller's current stream wait for it, like torch's `work.wait()`, without
  blocking the host. The worker thread watches each op's completion event to
  record it, run the post hooks and enforce the timeout.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import os
import time

import numpy as np

from braze.comm import _tensors
from braze.comm.adapter import AdapterComm
from braze.comm.base import Work
from braze.comm.errors import CommAborted, CommDeviceMismatch, CommError, CommInvalidArgument, CommTimeout


def _torch_store(store, prefix):
    import torch.distributed as dist

    class BrazeTorchStore(dist.Store):
        """torch.distributed.Store over a braze store, keys under `prefix`."""

        def __init__(self):
            super().__init__()

        def set(self, key, value):
            store.set(f"{prefix}/{key}", value if isinstance(value, (bytes, str)) else bytes(value))

        def get(self, key):
            return store.get(f"{prefix}/{key}", 300.0)

        def add(self, key, delta):
            return store.add(f"{prefix}/{key}", delta)

        def wait(self, keys, timeout=None):
            for key in keys:
                store.get(f"{prefix}/{key}", 300.0)

        def check(self, keys):
            return True

    return BrazeTorchStore()


class ProcessGroupComm(AdapterComm):
    """What Gloo and NCCL share: the ops as torch.distributed calls, each
    issued by an `issue()` closure that returns torch's Work, handed to the
    engine's `_collective`."""

    def __init__(self, backend, rank, world_size, store, timeout=30.0, **options):
        super().__init__(backend, rank, world_size, store, timeout, **options)
        self._pg = self._new_process_group(self.group, rank, world_size)

    def _new_process_group(self, prefix, rank, world_size):
        try:
            return self._engine_process_group(_torch_store(self.store, prefix), rank, world_size)
        except RuntimeError as exc:
            raise CommError(f"{self.backend}: creating the process group failed: {exc}") from exc

    def _flat(self, obj, what, writable=False):
        """`obj` as a flat torch tensor (a numpy array without a copy) and its description."""
        import torch

        buf = self._describe(obj, what, writable)
        t = torch.from_numpy(obj) if isinstance(obj, np.ndarray) else obj
        return t.reshape(-1), buf

    def _divide(self, t):
        """Turns a sum into an average, integers truncated toward zero like
        the native runtime (for engines without a native average)."""
        import torch

        if t.is_floating_point():
            t.div_(self.world_size)
        else:
            t.copy_(torch.div(t, self.world_size, rounding_mode="trunc"))

    def all_reduce(self, t, op="sum", async_op=False):
        import torch.distributed as dist

        self._check_reduce("all_reduce", op)
        tt, buf = self._flat(t, "all_reduce", True)

        def issue():
            opts = dist.AllreduceOptions()
            opts.reduceOp = self._reduce_op(op)
            return self._pg.allreduce([tt], opts)

        return self._collective("all_reduce", issue, async_op, averaged=tt if op == "avg" else None,
                                in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype)

    def all_gather(self, out, t, async_op=False):
        src, dst = self._pair("all_gather", out, t, out_factor=self.world_size)
        ti, to = self._flat(t, "all_gather")[0], self._flat(out, "all_gather", True)[0]
        return self._collective("all_gather", lambda: self._pg._allgather_base(to, ti), async_op,
                                in_numel=src.numel, out_numel=dst.numel, dtype=src.dtype)

    def reduce_scatter(self, out, t, op="sum", async_op=False):
        import torch.distributed as dist

        self._check_reduce("reduce_scatter", op)
        src, dst = self._pair("reduce_scatter", out, t, in_factor=self.world_size)
        ti, to = self._flat(t, "reduce_scatter")[0], self._flat(out, "reduce_scatter", True)[0]

        def issue():
            opts = dist.ReduceScatterOptions()
            opts.reduceOp = self._reduce_op(op)
            return self._pg._reduce_scatter_base(to, ti, opts)

        return self._collective("reduce_scatter", issue, async_op, averaged=to if op == "avg" else None,
                                in_numel=src.numel, out_numel=dst.numel, dtype=src.dtype)

    def broadcast(self, t, root, async_op=False):
        import torch.distributed as dist

        self._check_rank("broadcast", "root", root)
        tt, buf = self._flat(t, "broadcast", True)

        def issue():
            opts = dist.BroadcastOptions()
            opts.rootRank = int(root)
            return self._pg.broadcast([tt], opts)

        return self._collective("broadcast", issue, async_op, in_numel=buf.numel, out_numel=buf.numel,
                                dtype=buf.dtype, peer=int(root))

    def all_to_all_single(self, out, t, out_splits=None, in_splits=None, async_op=False):
        import torch.distributed as dist

        ti, src = self._flat(t, "all_to_all_single")
        to, dst = self._flat(out, "all_to_all_single", True)
        _tensors.same_dtype("all_to_all_single", src, dst)
        outs = [int(x) for x in out_splits] if out_splits is not None else []
        ins = [int(x) for x in in_splits] if in_splits is not None else []
        return self._collective("all_to_all_single",
                                lambda: self._pg.alltoall_base(to, ti, outs, ins, dist.AllToAllOptions()),
                                async_op, in_numel=src.numel, out_numel=dst.numel, dtype=src.dtype)

    def send(self, t, dst, async_op=False):
        self._check_rank("send", "dst", dst)
        tt, buf = self._flat(t, "send")
        return self._collective("send", lambda: self._pg.send([tt], int(dst), 0), async_op,
                                in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype, peer=int(dst))

    def recv(self, t, src, async_op=False):
        self._check_rank("recv", "src", src)
        tt, buf = self._flat(t, "recv", True)
        return self._collective("recv", lambda: self._pg.recv([tt], int(src), 0), async_op,
                                in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype, peer=int(src))

    def barrier(self, async_op=False):
        return self._collective("barrier", lambda: self._pg.barrier(), async_op)

    def reconfigure(self, uuid, members):
        new_rank, prefix = self._agree_on_members(uuid, members)
        self._release_process_group()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"braze-{self.backend}")
        self._pg = self._new_process_group(prefix, new_rank, len(members))
        self.rank, self.world_size = new_rank, len(members)
        self._seq = self._p2p = 0
        self._generation += 1
        self._aborted, self._abort_reason = False, ""

    def _release_process_group(self):
        self._pg = None  # destroys it (Gloo's context)

    def close(self):
        super().close()
        if self._pg is not None:
            self._release_process_group()


class GlooComm(ProcessGroupComm):
    _inline_sync = True  # Gloo's timeout is the communicator's

    def __init__(self, rank, world_size, store, timeout=30.0, **options):
        super().__init__("gloo", rank, world_size, store, timeout, **options)

    def _engine_process_group(self, torch_store, rank, world_size):
        import torch.distributed as dist

        return dist.ProcessGroupGloo(torch_store, rank, world_size, datetime.timedelta(seconds=self.timeout))

    @staticmethod
    def _reduce_op(op):
        import torch.distributed as dist

        return {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
                "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op]

    def _collective(self, op, issue, async_op, averaged=None, **meta):
        def run():
            issue().wait()  # Gloo's wait blocks until the op is done
            if averaged is not None:
                self._divide(averaged)

        return self._run(op, run, async_op, **meta)

    def _engine_abort(self):
        # Gloo has no cancel: a blocked op returns at Gloo's own timeout
        # (the communicator's); the worker thread is replaced by reconfigure.
        self._executor.shutdown(wait=False, cancel_futures=True)


# torch's own watchdog is the backstop behind braze's deadline: it fires this
# much later, so braze's timeout (naming the op) comes first.
NCCL_WATCHDOG_GRACE_S = 2.0
_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
# CleanUpOnly: on a timeout or an NCCL error torch's watchdog aborts the
# communicators and fails the work; torch's default (3) kills the process,
# which braze.comm never does.
_CLEAN_UP_ONLY = "2"


def nccl_unavailable() -> str | None:
    """Why the nccl backend cannot run in this process (None: it can)."""
    import torch
    import torch.distributed as dist

    reasons = []
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        reasons.append(f"torch.cuda.is_available() is false (torch {torch.__version__}, {build})")
    if not dist.is_nccl_available():
        reasons.append("this torch build has no NCCL (torch.distributed.is_nccl_available() is false)")
    return "; ".join(reasons) or None


class StreamWork(Work):
    """An NCCL op in flight. `wait()` makes the caller's current CUDA stream
    wait for it (torch's `work.wait()`) and returns without blocking the
    host; with `timeout` it first blocks the host until the op completes, at
    most that long. Either raises the op's CommError if it already failed."""

    def __init__(self, comm, work, watcher, entry):
        self._comm, self._work, self._watcher, self._entry = comm, work, watcher, entry

    def _label(self):
        return f"{self._entry['op']} (seq {self._entry['seq']})"

    def wait(self, timeout=None):
        import torch

        if timeout is not None:
            try:
                self._watcher.result(timeout=float(timeout))
            except concurrent.futures.TimeoutError:
                raise CommTimeout(f"{self._label()}: wait({timeout} s) returned before the op finished") from None
        if self._watcher.done() and self._watcher.exception() is not None:
            raise self._watcher.exception()
        if self._comm._aborted and self._entry["state"] != "completed":
            raise CommAborted(f"{self._label()}: communicator aborted ({self._comm._abort_reason})")
        with torch.cuda.device(self._comm.device):
            self._work.wait()
        return True

    def wait_on_host(self):
        """Blocks the host until the op completed on the GPU (the watcher
        enforces the communicator's timeout); raises its CommError."""
        self._watcher.result()

    def is_completed(self):
        return self._watcher.done()

    def exception(self):
        return self._watcher.exception() if self._watcher.done() else None


class NcclComm(ProcessGroupComm):
    """ProcessGroupNCCL on the CUDA tensors of one GPU (`device`, default
    the current one). Ops are issued on the caller's thread and stream; the
    worker thread watches their completion events (flight recorder, post
    hooks, timeout)."""

    def __init__(self, rank, world_size, store, timeout=30.0, *, device=None, **options):
        reason = nccl_unavailable()
        if reason:
            raise CommError(f"the nccl backend cannot run here: {reason}; use gloo, shm or tcp for CPU tensors")
        import torch

        chosen = torch.device(torch.cuda.current_device() if device is None else device)  # an int means a GPU
        if chosen.type != "cuda":
            raise CommInvalidArgument(f"the nccl backend's device must be a CUDA device, got {chosen}")
        self.device = torch.device("cuda", torch.cuda.current_device() if chosen.index is None else chosen.index)
        super().__init__("nccl", rank, world_size, store, timeout, **options)

    def _engine_process_group(self, torch_store, rank, world_size):
        import torch.distributed as dist

        options = dist.ProcessGroupNCCL.Options()
        options.is_high_priority_stream = False
        options._timeout = datetime.timedelta(seconds=self.timeout + NCCL_WATCHDOG_GRACE_S)
        user_setting = os.environ.get(_ERROR_HANDLING)
        if user_setting is None:  # read by the constructor only
            os.environ[_ERROR_HANDLING] = _CLEAN_UP_ONLY
        try:
            pg = dist.ProcessGroupNCCL(torch_store, rank, world_size, options)
        finally:
            if user_setting is None:
                del os.environ[_ERROR_HANDLING]
        # Connect now, within new_comm (and reconfigure), not in the first collective.
        pg.eager_connect_single_device(self.device)
        return pg

    def _describe(self, obj, what, writable=False):
        buf = _tensors.as_cuda_tensor(obj, what, backend=self.backend)
        if obj.device != self.device:
            raise CommDeviceMismatch(f"{what}: this nccl communicator runs on {self.device}, but the tensor is on "
                                     f"{obj.device}")
        return buf

    @staticmethod
    def _reduce_op(op):
        import torch.distributed as dist

        # NCCL averages itself (ncclAvg; integers truncate toward zero, as in the native runtime).
        return {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "prod": dist.ReduceOp.PRODUCT,
                "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op]

    def _collective(self, op, issue, async_op, averaged=None, **meta):
        """Issues the op on the caller's stream and returns; `averaged` is
        ignored because `_reduce_op` asks NCCL for the average itself.

        Durations come from CUDA events: one recorded on the caller's stream
        just before the op (the NCCL stream waits for it), one recorded in a
        callback of the work's future, which torch runs on a stream that
        waits for the NCCL kernels. So a duration is the op's time on the
        GPU, including any wait for the group's earlier ops."""
        import torch

        entry, info = self._begin(op, **meta)
        with torch.cuda.device(self.device):
            started, finished = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            started.record()
            self._started(entry)
            try:
                work = issue()
            except Exception as exc:
                raise self._failed(entry, info, exc, 0.0) from exc
            recorded = []  # an event never recorded counts as done: the watcher waits for this too

            def record_finished(_):
                finished.record()
                recorded.append(True)

            work.get_future().then(record_finished)
        watcher = self._executor.submit(self._watch, entry, info, work, started, finished, recorded)
        handle = StreamWork(self, work, watcher, entry)
        if async_op:
            return handle
        handle.wait()
        return None

    def _watch(self, entry, info, work, started, finished, recorded):
        """On the worker thread: waits for the op's completion event, polling
        (a blocking event wait could not be abandoned at the deadline), and
        records the result."""
        pause = 50e-6
        while not (recorded and finished.query()):
            if self._aborted or entry["generation"] != self._generation:
                # Its group is aborted (perhaps rebuilt since): only record it,
                # the group's state is no longer this op's to change.
                error = CommAborted(f"{entry['op']} (seq {entry['seq']}): communicator aborted "
                                    f"({self._abort_reason or 'the group was reconfigured'})")
                entry["state"], entry["error"] = "failed", str(error)
                self._call_hooks("post", dict(info, ok=False, error=str(error)))
                raise error
            if time.monotonic() > entry["deadline"]:
                reason = f"{entry['op']} (seq {entry['seq']}) timed out after {self.timeout} s"
                self._on_failure(entry, reason)  # aborts the NCCL communicators: the stuck kernels end
                raise CommTimeout(reason)
            time.sleep(pause)
            pause = min(2 * pause, 1e-3)
        duration = started.elapsed_time(finished) / 1000.0
        error = work.exception()  # set by torch's watchdog when NCCL failed (the kernels then ended early)
        if error is not None:
            raise self._failed(entry, info, error, duration)
        self._completed(entry, info, duration)

    def barrier(self, async_op=False):
        """A one-element all_reduce on this GPU (what ProcessGroupNCCL's
        barrier does); a synchronous barrier holds the host until every rank
        reached it, within the timeout."""
        import torch

        token = torch.zeros(1, device=self.device)
        work = self._collective("barrier", lambda: self._pg.allreduce([token]), True)
        if async_op:
            return work
        work.wait_on_host()
        return None

    def _engine_abort(self):
        # ncclCommAbort: kernels blocked on a dead peer end, so the streams
        # that wait for them go on (the data they produced is not valid).
        if self._pg is not None:
            self._pg.abort()

    def _release_process_group(self):
        # A healthy group is shut down as torch.distributed's destroy does; an
        # aborted one has nothing left to finish.
        if self._pg is not None and not self._aborted:
            self._pg.shutdown()
        self._pg = None


def create_gloo(rank, world_size, store, timeout=30.0, **options):
    return GlooComm(rank, world_size, store, timeout, **options)


def create_nccl(rank, world_size, store, timeout=30.0, **options):
    return NcclComm(rank, world_size, store, timeout, **options)
