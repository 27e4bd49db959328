"""The rivals as their users call them, without braze's adapters in between:
torch.distributed's Gloo process group and mpi4py. Same methods as the
subset of braze's Comm that collectives.measure uses."""

from __future__ import annotations

import datetime

import numpy as np


class RawGloo:
    def __init__(self, store, rank, world, prefix="raw-gloo"):
        import torch
        import torch.distributed as dist

        from braze.comm.process_group import _torch_store

        self.torch, self.dist = torch, dist
        self.pg = dist.ProcessGroupGloo(_torch_store(store, prefix), rank, world, datetime.timedelta(seconds=300))
        self.ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}

    def all_reduce(self, t, op="sum"):
        opts = self.dist.AllreduceOptions()
        opts.reduceOp = self.ops[op]
        self.pg.allreduce([self.torch.from_numpy(t)], opts).wait()

    def all_gather(self, out, t):
        self.pg._allgather_base(self.torch.from_numpy(out), self.torch.from_numpy(t)).wait()

    def reduce_scatter(self, out, t):
        self.pg._reduce_scatter_base(self.torch.from_numpy(out), self.torch.from_numpy(t)).wait()

    def barrier(self):
        self.pg.barrier().wait()


class RawMpi:
    def __init__(self):
        from mpi4py import MPI

        self.MPI, self.comm = MPI, MPI.COMM_WORLD
        self.ops = {"sum": MPI.SUM, "max": MPI.MAX}

    def all_reduce(self, t, op="sum"):
        self.comm.Allreduce(self.MPI.IN_PLACE, t, self.ops[op])

    def all_gather(self, out, t):
        self.comm.Allgather(t, out)

    def reduce_scatter(self, out, t):
        self.comm.Reduce_scatter_block(t, out, self.MPI.SUM)

    def barrier(self):
        self.comm.Barrier()


def measure_raw_gloo(comm, rank, world, sizes):
    """Runs in a spawned braze group; borrows only its store for rendezvous."""
    import collectives

    return collectives.measure(RawGloo(comm.store, rank, world), rank, world, sizes)


def gloo_recovery(comm, rank, world, repeats=5):
    """Destroy + re-create a Gloo process group + first all_reduce (the
    restart path torch users take), all ranks alive."""
    import time

    times = []
    pg = RawGloo(comm.store, rank, world, "rec-0")
    for i in range(1, repeats + 1):
        comm.barrier()
        start = time.perf_counter()
        pg = None  # noqa: F841 (destroys the old process group)
        pg = RawGloo(comm.store, rank, world, f"rec-{i}")
        t = np.ones(1024, np.float32)
        pg.all_reduce(t)
        times.append((time.perf_counter() - start) * 1e3)
    return times
