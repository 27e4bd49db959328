"""Collectives in one process (a group of one): what braze refuses, and
that the IR it captures is what the ops say."""

from __future__ import annotations

import socket

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.distributed._functional_collectives as fc  # noqa: E402

import braze  # noqa: E402
import braze.comm  # noqa: E402
from braze.errors import BrazeError  # noqa: E402


@pytest.fixture
def world_of_one():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


class Reduce(torch.nn.Module):
    def __init__(self, pg):
        super().__init__()
        self.pg = pg

    def forward(self, x, w):
        y = fc.all_reduce(x @ w, "sum", self.pg)
        z = torch.relu(x) * 2  # independent: braze-overlap moves the wait below it
        return y + z


def test_capture_and_an_unregistered_group(world_of_one):
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    compiled = braze.compile(Reduce(world_of_one), (x, w))
    text = str(compiled.exported.module)
    assert 'braze.all_reduce_start' in text and f'group "{world_of_one.group_name}" ranks [0]' in text
    with pytest.raises(BrazeError, match=rf"no braze.comm communicator serves process group "
                                         rf"'{world_of_one.group_name}' \(ranks \[0\]\)"):
        compiled(x, w)


def test_runs_through_a_registered_communicator(world_of_one):
    store = braze.comm.TCPStore("127.0.0.1", 0, True)
    comm = braze.comm.new_comm("tcp", 0, 1, store)
    braze.register_communicator(comm, group=world_of_one.group_name)
    try:
        x, w = torch.randn(4, 4), torch.randn(4, 4)
        model = Reduce(world_of_one)
        compiled = braze.compile(model, (x, w))
        got = compiled(x, w)
        got = got[0] if isinstance(got, (list, tuple)) else got
        torch.testing.assert_close(got, model(x, w))
        dump = comm.flight_recorder_dump()
        assert '"all_reduce"' in dump  # the recorder saw the compiled collective (and the sequence check)
    finally:
        braze.unregister_communicator(comm)
        comm.close()


class ThreeGradients(torch.nn.Module):
    """Three independent all_reduces of one group, as a data-parallel step's
    gradients (16, 128 and 64 bytes)."""

    def __init__(self, pg):
        super().__init__()
        self.pg = pg

    def forward(self, a, b, c):
        return tuple(fc.all_reduce(x * 2, "sum", self.pg) / 2 for x in (a, b, c))


def test_bucket_bytes_merges_all_reduces_and_says_so(world_of_one, tmp_path, caplog):
    """bucket_bytes runs braze-bucket-collectives: one all_reduce in the
    compiled program, its remarks on the fusion log topic, the same numbers."""
    import logging

    store = braze.comm.TCPStore("127.0.0.1", 0, True)
    comm = braze.comm.new_comm("tcp", 0, 1, store)
    braze.register_communicator(comm, group=world_of_one.group_name)
    braze.set_logs("fusion")
    try:
        args = (torch.randn(4), torch.randn(4, 8), torch.randn(16))
        model = ThreeGradients(world_of_one)
        with caplog.at_level(logging.INFO, logger="braze"):
            compiled = braze.compile(model, args, options={"bucket_bytes": 1024, "dump_dir": str(tmp_path)})
        for got, want in zip(compiled(*args), model(*args)):
            torch.testing.assert_close(got, want)
        final = sorted(tmp_path.glob("**/*braze-plan-memory.mlir"))[-1].read_text()
        assert final.count("braze.all_reduce_start") == 1 and "tensor<52xf32>" in final
        remarks = [r.getMessage() for r in caplog.records if r.name == "braze.fusion"]
        assert any("and 2 later all_reduce(s) reduced as one bucket of 208 bytes" in m for m in remarks), remarks
    finally:
        braze.set_logs(None)
        braze.unregister_communicator(comm)
        comm.close()


class _CudaCommunicator:
    """Stands in for an nccl communicator on this machine without a GPU: the
    check reads only its device and backend, and no collective may be issued."""

    backend, device, rank, world_size = "nccl", "cuda", 0, 1

    def __getattr__(self, name):
        raise AssertionError(f"a collective ({name}) was issued on a communicator for another device")


def test_a_communicator_for_another_device_is_refused_before_anything_is_issued(world_of_one):
    comm = _CudaCommunicator()
    braze.register_communicator(comm, group=world_of_one.group_name)
    try:
        x, w = torch.randn(4, 4), torch.randn(4, 4)
        compiled = braze.compile(Reduce(world_of_one), (x, w))
        with pytest.raises(BrazeError, match=rf"process group '{world_of_one.group_name}' is served by a nccl "
                                             rf"communicator, which takes CUDA tensors, but the program's tensor "
                                             rf"is on cpu; register a shm, tcp, gloo or mpi communicator"):
            compiled(x, w)
    finally:
        braze.unregister_communicator(comm)
