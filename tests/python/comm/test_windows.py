"""One-sided windows and symmetric memory."""

import pytest

import workers
from group import run_group


@pytest.mark.parametrize("backend", ["shm", "tcp"])
@pytest.mark.parametrize("world", [2, 3])
def test_window_put_get_signal(backend, world):
    for rank, r in run_group(workers.windows, world, backend).items():
        left = (rank - 1) % world
        assert r["local"] == [left + 1.0] * 4
        remote = [0.0] * 16
        remote[2:6] = [rank + 1.0] * 4  # what this rank put into its right neighbour
        assert r["remote"] == remote


@pytest.mark.parametrize("world", [2, 4])
def test_symmetric_memory_peers(world):
    for rank, r in run_group(workers.symmetric, world, "shm").items():
        assert r["seen"] == [float(x) for x in range(world)]
        left = (rank - 1) % world
        assert r["row"][left] == 100 + left
