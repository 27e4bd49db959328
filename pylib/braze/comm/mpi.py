"""The MPI adapter (mpi4py). The processes must be launched by `mpirun`; the
braze rank and world size must match MPI_COMM_WORLD's. The store is used only
to agree on the group, never for data."""

from __future__ import annotations

import numpy as np

from braze.comm import _tensors
from braze.comm.adapter import AdapterComm
from braze.comm.errors import CommError, CommInvalidArgument


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise CommError("the mpi backend needs mpi4py (pip install mpi4py; Debian: openmpi-bin libopenmpi-dev)") from exc
    return MPI


def _as_numpy(obj, what, writable=False, reduce=False):
    """A flat numpy view; 16-bit floats travel as int16 (Open MPI has no
    half or bfloat16 datatype, so it cannot reduce them)."""
    buf = _tensors.as_buffer(obj, what, writable, backend="mpi")
    if buf.dtype in ("float16", "bfloat16") and reduce:
        raise CommInvalidArgument(f"{what}: MPI cannot reduce {buf.dtype}; use the shm or tcp backend")
    if buf.dtype == "bfloat16":
        import torch

        return obj.reshape(-1).view(torch.int16).numpy(), buf
    arr = (obj if isinstance(obj, np.ndarray) else obj.numpy()).reshape(-1)
    return (arr.view(np.int16) if buf.dtype == "float16" else arr), buf


class MpiComm(AdapterComm):
    def __init__(self, rank, world_size, store, timeout=30.0, **options):
        super().__init__("mpi", rank, world_size, store, timeout, **options)
        MPI = _mpi()
        world = MPI.COMM_WORLD
        if world.Get_size() != world_size or world.Get_rank() != rank:
            raise CommInvalidArgument(
                f"mpi backend: launched as rank {world.Get_rank()} of {world.Get_size()} by mpirun, but asked for "
                f"rank {rank} of {world_size}")
        self._comm = world.Dup()
        self._ops = {"sum": MPI.SUM, "avg": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}

    def _average(self, arr, op):
        if op == "avg":
            if np.issubdtype(arr.dtype, np.floating):
                arr /= self.world_size
            else:  # truncate toward zero, like the native runtime
                arr[:] = np.trunc(arr / self.world_size)

    def all_reduce(self, t, op="sum", async_op=False):
        self._check_reduce("all_reduce", op)
        arr, buf = _as_numpy(t, "all_reduce", True, reduce=True)

        def run():
            self._comm.Allreduce(_mpi().IN_PLACE, arr, self._ops[op])
            self._average(arr, op)

        return self._run("all_reduce", run, async_op, in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype)

    def all_gather(self, out, t, async_op=False):
        src, dst = self._pair("all_gather", out, t, out_factor=self.world_size)
        a, o = _as_numpy(t, "all_gather")[0], _as_numpy(out, "all_gather", True)[0]
        return self._run("all_gather", lambda: self._comm.Allgather(a, o), async_op,
                         in_numel=src.numel, out_numel=dst.numel, dtype=src.dtype)

    def reduce_scatter(self, out, t, op="sum", async_op=False):
        self._check_reduce("reduce_scatter", op)
        src, dst = self._pair("reduce_scatter", out, t, in_factor=self.world_size)
        a, o = _as_numpy(t, "reduce_scatter", reduce=True)[0], _as_numpy(out, "reduce_scatter", True)[0]

        def run():
            self._comm.Reduce_scatter_block(a, o, self._ops[op])
            self._average(o, op)

        return self._run("reduce_scatter", run, async_op, in_numel=src.numel, out_numel=dst.numel, dtype=src.dtype)

    def broadcast(self, t, root, async_op=False):
        self._check_rank("broadcast", "root", root)
        arr, buf = _as_numpy(t, "broadcast", True)
        return self._run("broadcast", lambda: self._comm.Bcast(arr, int(root)), async_op,
                         in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype, peer=int(root))

    def all_to_all_single(self, out, t, out_splits=None, in_splits=None, async_op=False):
        a, src = _as_numpy(t, "all_to_all_single")
        o, dst = _as_numpy(out, "all_to_all_single", True)
        _tensors.same_dtype("all_to_all_single", src, dst)
        n = self.world_size
        ins = np.asarray(in_splits if in_splits is not None else [src.numel // n] * n, dtype=np.int64)
        outs = np.asarray(out_splits if out_splits is not None else [dst.numel // n] * n, dtype=np.int64)
        if ins.sum() != src.numel or outs.sum() != dst.numel:
            raise CommInvalidArgument("all_to_all_single: splits do not add up to the tensor sizes")
        in_displs = np.concatenate([[0], np.cumsum(ins)[:-1]])
        out_displs = np.concatenate([[0], np.cumsum(outs)[:-1]])
        return self._run("all_to_all_single",
                         lambda: self._comm.Alltoallv([a, (ins, in_displs)], [o, (outs, out_displs)]),
                         async_op, in_numel=src.numel, out_numel=dst.numel, dtype=src.dtype)

    def send(self, t, dst, async_op=False):
        self._check_rank("send", "dst", dst)
        arr, buf = _as_numpy(t, "send")
        return self._run("send", lambda: self._comm.Send(arr, int(dst)), async_op,
                         in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype, peer=int(dst))

    def recv(self, t, src, async_op=False):
        self._check_rank("recv", "src", src)
        arr, buf = _as_numpy(t, "recv", True)
        return self._run("recv", lambda: self._comm.Recv(arr, int(src)), async_op,
                         in_numel=buf.numel, out_numel=buf.numel, dtype=buf.dtype, peer=int(src))

    def barrier(self, async_op=False):
        return self._run("barrier", lambda: self._comm.Barrier(), async_op)

    def reconfigure(self, uuid, members):
        raise CommError("mpi backend: Open MPI without ULFM cannot rebuild a communicator after a rank failure; "
                        "use the shm or tcp backend for in-place recovery")


def create(rank, world_size, store, timeout=30.0, **options):
    return MpiComm(rank, world_size, store, timeout, **options)
