"""The torch.distributed adapter: Gloo on CPU (NCCL would plug in the same
way where present). Rendezvous goes through the braze store."""

from __future__ import annotations

import datetime

import numpy as np

from braze.comm import _tensors
from braze.comm.adapter import AdapterComm
from braze.comm.errors import CommError


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


def _as_torch(obj, what, writable=False):
    import torch

    buf = _tensors.as_buffer(obj, what, writable)
    t = torch.from_numpy(obj) if isinstance(obj, np.ndarray) else obj
    return t.reshape(-1), buf


class GlooComm(AdapterComm):
    _inline_sync = True  # Gloo's timeout is the communicator's

    def __init__(self, rank, world_size, store, timeout=30.0, **options):
        super().__init__("gloo", rank, world_size, store, timeout, **options)
        self._pg = self._make_pg(self.group, rank, world_size)

    def _make_pg(self, prefix, rank, world_size):
        import torch.distributed as dist

        try:
            return dist.ProcessGroupGloo(_torch_store(self.store, prefix), rank, world_size,
                                         datetime.timedelta(seconds=self.timeout))
        except RuntimeError as exc:
            raise CommError(f"gloo: creating the process group failed: {exc}") from exc

    @staticmethod
    def _reduce_op(op):
        import torch.distributed as dist

        return {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
                "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op]

    def _average(self, t, op):
        import torch

        if op == "avg":
            if t.is_floating_point():
                t.div_(self.world_size)
            else:  # truncate toward zero, like the native runtime
                t.copy_(torch.div(t, self.world_size, rounding_mode="trunc"))

    def all_reduce(self, t, op="sum", async_op=False):
        import torch.distributed as dist

        self._check_reduce("all_reduce", op)
        tt, buf = _as_torch(t, "all_reduce", True)

        def run():
            opts = dist.AllreduceOptions()
            opts.reduceOp = self._reduce_op(op)
            self._pg.allreduce([tt], opts).wait()
            self._average(tt, op)

        return self._run("all_reduce", run, async_op, in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype)

    def all_gather(self, out, t, async_op=False):
        src, dst = self._pair("all_gather", out, t, out_factor=self.world_size)
        ti, to = _as_torch(t, "all_gather")[0], _as_torch(out, "all_gather", True)[0]
        return self._run("all_gather", lambda: self._pg._allgather_base(to, ti).wait(), async_op,
                         in_numel=src.numel, out_numel=dst.numel, dtype=src.dtype)

    def reduce_scatter(self, out, t, op="sum", async_op=False):
        import torch.distributed as dist

        self._check_reduce("reduce_scatter", op)
        src, dst = self._pair("reduce_scatter", out, t, in_factor=self.world_size)
        ti, to = _as_torch(t, "reduce_scatter")[0], _as_torch(out, "reduce_scatter", True)[0]

        def run():
            opts = dist.ReduceScatterOptions()
            opts.reduceOp = self._reduce_op(op)
            self._pg._reduce_scatter_base(to, ti, opts).wait()
            self._average(to, op)

        return self._run("reduce_scatter", run, async_op, in_numel=src.numel, out_numel=dst.numel, dtype=src.dtype)

    def broadcast(self, t, root, async_op=False):
        import torch.distributed as dist

        self._check_rank("broadcast", "root", root)
        tt, buf = _as_torch(t, "broadcast", True)

        def run():
            opts = dist.BroadcastOptions()
            opts.rootRank = int(root)
            self._pg.broadcast([tt], opts).wait()

        return self._run("broadcast", run, async_op, in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype,
                         peer=int(root))

    def all_to_all_single(self, out, t, out_splits=None, in_splits=None, async_op=False):
        import torch.distributed as dist

        ti, src = _as_torch(t, "all_to_all_single")
        to, dst = _as_torch(out, "all_to_all_single", True)
        _tensors.same_dtype("all_to_all_single", src, dst)
        outs = [int(x) for x in out_splits] if out_splits is not None else []
        ins = [int(x) for x in in_splits] if in_splits is not None else []
        return self._run("all_to_all_single",
                         lambda: self._pg.alltoall_base(to, ti, outs, ins, dist.AllToAllOptions()).wait(),
                         async_op, in_numel=src.numel, out_numel=dst.numel, dtype=src.dtype)

    def send(self, t, dst, async_op=False):
        self._check_rank("send", "dst", dst)
        tt, buf = _as_torch(t, "send")
        return self._run("send", lambda: self._pg.send([tt], int(dst), 0).wait(), async_op,
                         in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype, peer=int(dst))

    def recv(self, t, src, async_op=False):
        self._check_rank("recv", "src", src)
        tt, buf = _as_torch(t, "recv", True)
        return self._run("recv", lambda: self._pg.recv([tt], int(src), 0).wait(), async_op,
                         in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype, peer=int(src))

    def barrier(self, async_op=False):
        return self._run("barrier", lambda: self._pg.barrier().wait(), async_op)

    def _engine_abort(self):
        # Gloo has no cancel: a blocked op returns at Gloo's own timeout
        # (the communicator's); the worker thread is then replaced below.
        self._executor.shutdown(wait=False, cancel_futures=True)

    def reconfigure(self, uuid, members):
        import concurrent.futures

        new_rank, prefix = self._agree_on_members(uuid, members)
        self._pg = None  # destroys the old Gloo context
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="braze-gloo")
        self._pg = self._make_pg(prefix, new_rank, len(members))
        self.rank, self.world_size = new_rank, len(members)
        self._seq = self._p2p = 0
        self._generation += 1
        self._aborted, self._abort_reason = False, ""


def create(rank, world_size, store, timeout=30.0, **options):
    return GlooComm(rank, world_size, store, timeout, **options)
