"""A reduced fault-injection campaign (the full one is benchmarks/comm/faults.py):
one trial per kind of fault the campaign draws, each checked the same way."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks", "comm"))
import faults  # noqa: E402

TRIALS = [
    # backend, world, fault, op, victim, point
    ("shm", 3, "kill", "all_reduce", 1, "inside"),
    ("tcp", 4, "kill", "all_to_all_uneven", 2, "inside"),
    ("shm", 3, "kill", "all_to_all_uneven", 2, "before"),
    ("tcp", 3, "kill", "reconfigure", 1, "inside"),
    ("shm", 2, "kill", "window_put", 0, "inside"),
    ("shm", 3, "kill", "reduce_scatter", 2, "between"),
    ("tcp", 3, "stop", "all_reduce", 2, "between"),
    ("tcp", 3, "close", "all_gather", 0, "inside"),
    # Trials the campaign (seed 18) failed: braze-fr named a second rank that
    # had only waited out its timeout; a rank stopped around a reconfigure.
    ("shm", 4, "kill", "send_recv", 1, "between"),
    ("shm", 2, "stop", "reconfigure", 0, "before"),
]


@pytest.mark.parametrize("backend,world,fault,op,victim,point", TRIALS)
def test_fault_trial(backend, world, fault, op, victim, point):
    plan = {"backend": backend, "world": world, "fault": fault, "op": op, "victim": victim, "iterations": 3,
            "at": 1, "point": point, "delay_s": 0.001 if point == "inside" else 0.0, "n": 1000, "dtype": "float32"}
    result = faults.run_trial(plan)
    assert result["outcome"] == "ok", result["problems"]
    if fault != "close":
        assert result["culprit"] is True, result
