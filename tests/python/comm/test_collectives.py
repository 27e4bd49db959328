"""Every collective of the native backends against numpy, for 2, 3 and 4
ranks, odd sizes and all dtypes; async overlap; hooks; bad input."""

import pytest

import workers
from group import run_group

SIZES = (1, 13, 4099, 300_007)  # 300k float32 spans several shm chunks
DTYPES = ("float32", "float16", "bfloat16", "int32", "int64")


@pytest.mark.parametrize("backend", ["shm", "tcp"])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_collectives_match_numpy(backend, world):
    sizes = SIZES if world == 2 else SIZES[:3]
    results = run_group(workers.collectives, world, backend, args=(sizes, DTYPES), deadline=120)
    for rank, failures in results.items():
        assert failures == [], f"rank {rank}: {failures[:5]}"


@pytest.mark.parametrize("backend", ["shm", "tcp"])
def test_async_ops_overlap(backend):
    assert all(run_group(workers.async_overlap, 2, backend).values())


@pytest.mark.parametrize("backend", ["shm", "tcp"])
def test_hooks_fire_in_order(backend):
    for events in run_group(workers.hooks_in_order, 2, backend).values():
        assert [e[:3] for e in events] == [("pre", "all_reduce", 0), ("post", "all_reduce", 0),
                                          ("pre", "broadcast", 1), ("post", "broadcast", 1)]
        assert events[0][3:] == (5, "float32") and events[1][3:] == (True, True)


@pytest.mark.parametrize("backend", ["shm", "tcp"])
@pytest.mark.parametrize("world", [2, 3])
def test_bad_input_gives_clear_errors(backend, world):
    for rank, seen in run_group(workers.bad_inputs, world, backend).items():
        assert all(seen), f"rank {rank}: {seen}"


@pytest.mark.parametrize("backend", ["shm", "tcp"])
def test_dropped_async_work_keeps_buffers_alive(backend):
    assert all(run_group(workers.dropped_work_handle, 2, backend).values())
