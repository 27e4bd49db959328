"""Run under mpirun by run.py: the collective sweep over the mpi adapter and,
for reference, over raw mpi4py (what the adapter's Python layer costs)."""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

from mpi4py import MPI  # noqa: E402

import braze.comm as bc  # noqa: E402
import collectives  # noqa: E402

rank, world = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
path = MPI.COMM_WORLD.bcast(tempfile.mkdtemp(prefix="braze-mpi-bench") if rank == 0 else None, root=0)
comm = bc.new_comm("mpi", rank, world, bc.FileStore(path), timeout=120.0)
rows = collectives.measure(comm, rank, world)
if rank == 0:
    print("BENCH-JSON " + json.dumps(rows), flush=True)
comm.close()
