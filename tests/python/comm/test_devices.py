"""Tensors on the wrong device, and the torch.distributed adapter's shared
checks through Gloo. No GPU needed: a `meta` tensor stands in for a CUDA
one wherever only its device matters (the CPU backends check the device
type, whatever it is); test_nccl.py runs the CUDA side where a GPU exists."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import braze.comm as bc  # noqa: E402
import device_workers  # noqa: E402
from braze.comm import _tensors, mpi  # noqa: E402
from braze.errors import BrazeError  # noqa: E402
from group import run_group  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nccl_is_a_registered_backend():
    assert {"shm", "tcp", "gloo", "nccl", "mpi"} <= set(bc.available_backends())


@pytest.mark.skipif(torch.cuda.is_available() and dist.is_nccl_available(),
                    reason="CUDA and NCCL are available here: test_nccl.py runs the backend instead")
def test_nccl_refuses_to_start_without_cuda_or_nccl():
    store = bc.TCPStore("127.0.0.1", 0, True)
    with pytest.raises(bc.CommError, match=r"the nccl backend cannot run here: .*"
                                           r"(torch.cuda.is_available\(\) is false|has no NCCL)"):
        bc.new_comm("nccl", 0, 1, store)


@pytest.mark.parametrize("backend", ["shm", "tcp", "gloo"])
def test_cpu_backends_name_the_device_of_a_tensor_they_cannot_take(backend):
    store = bc.TCPStore("127.0.0.1", 0, True)
    with bc.new_comm(backend, 0, 1, store) as comm:
        elsewhere, here = torch.empty(8, device="meta"), torch.zeros(8)
        message = rf"the {backend} backend takes CPU tensors, but this one is on meta"
        calls = [lambda: comm.all_reduce(elsewhere), lambda: comm.all_reduce(elsewhere, async_op=True),
                 lambda: comm.broadcast(elsewhere, 0), lambda: comm.all_gather(here, elsewhere),
                 lambda: comm.reduce_scatter(elsewhere, here), lambda: comm.all_to_all_single(here, elsewhere)]
        for call in calls:
            with pytest.raises(bc.CommDeviceMismatch, match=message) as raised:
                call()
            assert isinstance(raised.value, BrazeError) and isinstance(raised.value, bc.CommInvalidArgument)
        comm.all_reduce(here)  # refused input leaves the group usable
        assert not comm.is_aborted()


def test_cuda_tensors_are_named_with_the_nccl_backend_as_the_way():
    cuda_like = "cuda:1"
    error = _tensors.wrong_device("all_reduce", "shm", cuda_like, "CPU")
    assert isinstance(error, BrazeError) and error.message == str(error)
    assert str(error) == ("all_reduce: the shm backend takes CPU tensors, but this one is on cuda:1 (CUDA tensors "
                          "go through the nccl backend); braze.comm never copies between devices")


def test_mpi_names_the_device_too():
    with pytest.raises(bc.CommInvalidArgument, match=r"all_reduce: the mpi backend takes CPU tensors, but this "
                                                     r"one is on meta"):
        mpi._as_numpy(torch.empty(4, device="meta"), "all_reduce", True)


def test_nccl_refuses_host_tensors_naming_their_device():
    with pytest.raises(bc.CommDeviceMismatch, match=r"all_gather input: the nccl backend takes CUDA tensors, but "
                                                     r"this one is on cpu \(CPU tensors and numpy arrays go "
                                                     r"through shm, tcp, gloo or mpi\)"):
        _tensors.as_cuda_tensor(torch.zeros(4), "all_gather input", backend="nccl")
    with pytest.raises(bc.CommInvalidArgument, match=r"this one is on cpu \(a numpy array\)"):
        _tensors.as_cuda_tensor(np.zeros(4, np.float32), "all_reduce", backend="nccl")
    with pytest.raises(bc.CommInvalidArgument, match=r"this one is on meta; braze.comm never copies"):
        _tensors.as_cuda_tensor(torch.zeros(4, device="meta"), "all_reduce", backend="nccl")


@pytest.mark.parametrize("world", [1, 2])
def test_shared_adapter_checks_through_gloo_match_torch_distributed(world):
    results = run_group(device_workers.gloo_against_torch, world, "gloo", args=(_free_port(),), deadline=120)
    for rank, failures in results.items():
        assert failures == [], f"rank {rank}: {failures}"


def test_flight_recorder_stack_ends_in_the_callers_code():
    store = bc.TCPStore("127.0.0.1", 0, True)
    with bc.new_comm("gloo", 0, 1, store, record_stack=True) as comm:
        def training_step():
            comm.all_reduce(torch.ones(4))

        training_step()
        stack = json.loads(comm.flight_recorder_dump())["entries"][-1]["stack"]
    assert stack.splitlines()[-2].strip().endswith("in training_step"), stack


class _Event:
    """Stands in for a CUDA event: done once `done` is set."""

    def __init__(self, done=True, milliseconds=0.0):
        self.done, self.milliseconds = done, milliseconds

    def query(self):
        return self.done

    def elapsed_time(self, other):
        return other.milliseconds - self.milliseconds


class _Work:
    def __init__(self, error=None):
        self.error = error

    def exception(self):
        return self.error


class _ProcessGroup:
    def __init__(self):
        self.aborted = False

    def abort(self):
        self.aborted = True


def _watched_comm(timeout):
    """An NcclComm's bookkeeping without CUDA: its completion watcher runs
    for real on stand-in events, the process group only records abort()."""
    from braze.comm.adapter import AdapterComm
    from braze.comm.process_group import NcclComm

    comm = NcclComm.__new__(NcclComm)
    AdapterComm.__init__(comm, "nccl", 0, 1, None, timeout)
    comm._pg = _ProcessGroup()
    events = {"post": [], "abort": []}
    comm.register_post_hook(events["post"].append)
    comm.register_abort_hook(events["abort"].append)
    entry, info = comm._begin("all_reduce", in_numel=4, out_numel=4, dtype="float32")
    comm._started(entry)
    return comm, entry, info, events


def test_nccl_watcher_records_completion_with_the_events_duration():
    comm, entry, info, events = _watched_comm(5.0)
    comm._watch(entry, info, _Work(), _Event(milliseconds=1.0), _Event(milliseconds=3.5), [True])
    assert entry["state"] == "completed" and events["post"][0]["duration"] == pytest.approx(0.0025)
    assert not comm.is_aborted()


def test_nccl_watcher_times_out_and_aborts_the_group():
    comm, entry, info, events = _watched_comm(0.2)
    with pytest.raises(bc.CommTimeout, match=r"all_reduce \(seq 0\) timed out after 0.2 s"):
        comm._watch(entry, info, _Work(), _Event(), _Event(done=False), [True])
    assert comm.is_aborted() and comm._pg.aborted and entry["state"] == "failed"
    assert events["abort"][0]["op"] == "all_reduce"


def test_nccl_watcher_waits_for_the_finish_event_to_be_recorded():
    """An event never recorded reports done: until torch ran the callback that records it, the op is running."""
    comm, entry, info, events = _watched_comm(0.2)
    with pytest.raises(bc.CommTimeout):
        comm._watch(entry, info, _Work(), _Event(), _Event(), [])


def test_nccl_watcher_fails_the_op_torch_reports_failed():
    comm, entry, info, events = _watched_comm(5.0)
    with pytest.raises(bc.CommRankFailed, match="nccl lost a peer: NCCL error: remote process exited"):
        comm._watch(entry, info, _Work(RuntimeError("NCCL error: remote process exited (peer 1)")), _Event(),
                    _Event(), [True])
    assert comm.is_aborted() and comm._pg.aborted and not events["post"][0]["ok"]


def test_nccl_watcher_leaves_a_rebuilt_group_alone():
    comm, entry, info, events = _watched_comm(5.0)
    comm._generation += 1  # reconfigure ran while the op was stuck
    with pytest.raises(bc.CommAborted, match="the group was reconfigured"):
        comm._watch(entry, info, _Work(), _Event(), _Event(done=False), [True])
    assert not comm.is_aborted() and not comm._pg.aborted and entry["state"] == "failed"
