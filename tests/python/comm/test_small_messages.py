"""The small-message path: a synchronous all_reduce or broadcast of a
contiguous numpy array is one native call that creates no Python objects;
anything else takes the checked path, with the same errors as before."""

import tracemalloc

import numpy as np
import pytest

import braze.comm as bc


@pytest.fixture
def solo():
    comm = bc.new_comm("shm", 0, 1, bc.TCPStore("127.0.0.1", 0, True))
    yield comm
    comm.close()


def _peak_bytes_during(fn, calls):
    """Peak traced memory while calling fn `calls` times, above a loop that
    calls a no-op (the loop's own int objects)."""
    def peak(f):
        tracemalloc.start()
        try:
            f()  # warm: first-call caches do not count
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            for _ in range(calls):
                f()
            return tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()

    return peak(fn) - peak(lambda: None)


# numpy builds a small record for every buffer export and frees it at once
# (it compares it with the one cached on the array): 24 bytes, not a Python
# object. Anything the Python path made per call (a Buffer, a tuple, a Work,
# a bytes) would be larger or would add up.
NUMPY_EXPORT_BYTES = 32


def test_small_all_reduce_and_broadcast_allocate_nothing(solo):
    t = np.ones(1024, np.float32)
    for fn in (lambda: solo.all_reduce(t, op="max"), lambda: solo.broadcast(t, 0)):
        assert _peak_bytes_during(fn, 1000) <= NUMPY_EXPORT_BYTES
        assert _peak_bytes_during(fn, 1000) == _peak_bytes_during(fn, 1)  # nothing adds up
    assert np.all(t == 1)


def test_the_checked_path_allocates(solo):
    """The measurement above can fail: the async path makes a Work object."""
    t = np.ones(1024, np.float32)
    assert _peak_bytes_during(lambda: solo.all_reduce(t, async_op=True).wait(), 100) > 200


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "<f4", "=i8"])
def test_every_supported_dtype_takes_the_fast_path(solo, dtype):
    t = np.arange(8).astype(dtype)
    assert _peak_bytes_during(lambda: solo.all_reduce(t), 10) <= NUMPY_EXPORT_BYTES
    assert t.tolist() == list(range(8))


@pytest.mark.parametrize("make,needle", [
    (lambda: np.ones(4, np.float64), "unsupported dtype"),
    (lambda: np.ones((4, 4), np.float32)[:, 1], "contiguous"),
    (lambda: np.ones(4, np.float32).setflags(write=False) or None, None),
])
def test_what_the_fast_path_refuses_gets_the_checked_errors(solo, make, needle):
    t = make()
    if t is None:  # a read-only array
        t = np.ones(4, np.float32)
        t.setflags(write=False)
        needle = "read-only"
    with pytest.raises(bc.CommInvalidArgument, match=needle):
        solo.all_reduce(t)


def test_big_endian_arrays_are_refused_not_misread(solo):
    with pytest.raises(bc.CommInvalidArgument, match="byte order"):
        solo.all_reduce(np.ones(4, ">f4"))


# torch tensors have no buffer protocol: the fast path reads the address and
# the size through two calls, whose ints are made and freed per call.
TORCH_INTS_BYTES = 80


def test_torch_tensors_take_the_fast_path(solo):
    import torch

    t = torch.ones(1024)
    for fn in (lambda: solo.all_reduce(t, op="max"), lambda: solo.broadcast(t, 0)):
        assert _peak_bytes_during(fn, 1000) <= TORCH_INTS_BYTES
        assert _peak_bytes_during(fn, 1000) == _peak_bytes_during(fn, 1)  # nothing adds up
    assert torch.all(t == 1)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "int64"])
def test_every_supported_torch_dtype_takes_the_fast_path(solo, dtype):
    import torch

    t = torch.arange(8).to(getattr(torch, dtype))[2:]  # a contiguous view: its own address
    assert _peak_bytes_during(lambda: solo.all_reduce(t), 10) <= TORCH_INTS_BYTES
    assert t.tolist() == list(range(2, 8))


@pytest.mark.parametrize("make,needle", [
    (lambda torch: torch.ones(4, dtype=torch.float64), "unsupported dtype"),
    (lambda torch: torch.ones(4, 4)[:, 1], "contiguous"),
])
def test_what_the_torch_fast_path_refuses_gets_the_checked_errors(solo, make, needle):
    import torch

    with pytest.raises(bc.CommInvalidArgument, match=needle):
        solo.all_reduce(make(torch))


def test_a_closed_communicator_refuses_every_call_without_crashing():
    comm = bc.new_comm("shm", 0, 1, bc.TCPStore("127.0.0.1", 0, True))
    comm.close()
    t = np.ones(4, np.float32)
    for call in (lambda: comm.rank, lambda: comm.world_size, lambda: comm.all_reduce(t),
                 lambda: comm.all_reduce(t, async_op=True), lambda: comm.broadcast(t, 0)):
        with pytest.raises(bc.CommAborted, match="closed"):
            call()
    comm.abort("after close")  # nothing left to fail: a no-op
