import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # spawned ranks import group/workers too


def _braze_segments():
    return {n for n in os.listdir("/dev/shm") if n.startswith("braze-")}


@pytest.fixture(autouse=True)
def no_shm_leftovers():
    """Every test must leave /dev/shm as it found it."""
    before = _braze_segments()
    yield
    leaked = _braze_segments() - before
    assert not leaked, f"shared-memory segments left behind: {sorted(leaked)}"
