"""Run under mpirun by run.py: the collective sweep over raw mpi4py (the
rival as its users call it) and over braze's mpi adapter."""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

from mpi4py import MPI  # noqa: E402

import braze.comm as bc  # noqa: E402
import collectives  # noqa: E402
import rivals  # noqa: E402

rank, world = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
path = MPI.COMM_WORLD.bcast(tempfile.mkdtemp(prefix="braze-mpi-bench") if rank == 0 else None, root=0)
comm = bc.new_comm("mpi", rank, world, bc.FileStore(path), timeout=120.0)
sizes = [int(s) for s in sys.argv[1].split(",")]
raw = collectives.measure(rivals.RawMpi(), rank, world, sizes)
adapter = collectives.measure(comm, rank, world, sizes[:1])
if rank == 0:
    print("BENCH-JSON " + json.dumps({"raw": raw, "adapter": adapter}), flush=True)
comm.close()
