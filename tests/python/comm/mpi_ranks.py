"""Run by mpirun from test_adapters.py: every collective over the mpi backend."""

import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from mpi4py import MPI  # noqa: E402

import braze.comm as bc  # noqa: E402
import workers  # noqa: E402

rank, world = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
path = MPI.COMM_WORLD.bcast(tempfile.mkdtemp(prefix="braze-mpi-store") if rank == 0 else None, root=0)
comm = bc.new_comm("mpi", rank, world, bc.FileStore(path), timeout=30.0)
# Open MPI has no 16-bit float reductions; those dtypes are rejected (tested below).
failures = workers.collectives(comm, rank, world, (1, 13, 4099), ("float32", "int32", "int64"))
try:
    comm.all_reduce(np.ones(3, np.float16))
    failures.append("float16 all_reduce was not rejected")
except bc.CommInvalidArgument:
    pass
if failures:
    print(f"rank {rank} failures: {failures[:5]}", flush=True)
    sys.exit(1)
assert workers.async_overlap(comm, rank, world)
print("MPI-RANK-OK", flush=True)
comm.close()
MPI.COMM_WORLD.Barrier()  # both ranks are done with the store (a failed run keeps it)
if rank == 0:
    shutil.rmtree(path)
