"""The torch.distributed (Gloo) and MPI adapters offer the same API."""

import os
import shutil
import subprocess
import sys

import pytest

import workers
from group import run_group


@pytest.mark.parametrize("world", [2, 3])
def test_gloo_collectives_match_numpy(world):
    results = run_group(workers.collectives, world, "gloo", args=((1, 13, 4099), workers.NP_DTYPES + ("bfloat16",)),
                        deadline=120)
    for rank, failures in results.items():
        assert failures == [], f"rank {rank}: {failures[:5]}"


def test_gloo_hooks_and_async():
    assert all(run_group(workers.async_overlap, 2, "gloo").values())
    for events in run_group(workers.hooks_in_order, 2, "gloo").values():
        assert [e[:3] for e in events] == [("pre", "all_reduce", 0), ("post", "all_reduce", 0),
                                          ("pre", "broadcast", 1), ("post", "broadcast", 1)]


MPI_SCRIPT = os.path.join(os.path.dirname(__file__), "mpi_ranks.py")


def test_mpi_collectives_match_numpy():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (apt-get install openmpi-bin libopenmpi-dev; pip install mpi4py)")
    if not shutil.which("mpirun"):
        pytest.skip("mpirun is not on PATH (apt-get install openmpi-bin)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    out = subprocess.run(["mpirun", "--oversubscribe", "-np", "3", sys.executable, MPI_SCRIPT],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.count("MPI-RANK-OK") == 3, out.stdout[-3000:]


def test_gloo_dead_rank_then_reconfigure(tmp_path):
    results = run_group(workers.fault, 3, "gloo", args=(2, "before", str(tmp_path)), comm_timeout=3.0,
                        options={"dump_dir": str(tmp_path)}, expect_dead=(2,), deadline=60)
    for old_rank, r in results.items():
        assert r["error"] in ("CommRankFailed", "CommTimeout"), r
        assert r["aborts"] == ["all_reduce"], r
        assert (r["rank"], r["world"], r["ok"]) == (old_rank, 2, True), r
