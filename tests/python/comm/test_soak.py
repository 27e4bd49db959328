"""A short soak (the full one is benchmarks/comm/soak.py): 4 ranks, a random
mix of ops, sizes and dtypes with every result checked; resident memory and
descriptor counts must stay flat."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks", "comm"))
import soak  # noqa: E402


@pytest.mark.parametrize("backend", ["shm", "tcp"])
def test_soak(backend):
    ranks, problems = soak.run_soak(backend, seconds=8.0)
    assert problems == [], problems
    assert all(v["ops"] > 50 for v in ranks.values()), {r: v["ops"] for r, v in ranks.items()}
