"""The nccl backend on CUDA tensors: the shared adapter checks at 1 rank and,
with two GPUs, at 2 ranks against torch.distributed's NCCL, plus a compiled
tensor-parallel MLP whose collectives stay on the GPU. Skipped, saying
why, without CUDA or NCCL (test_devices.py covers what runs without them)."""

from __future__ import annotations

import socket

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import braze.comm as bc  # noqa: E402
import device_workers  # noqa: E402
from braze.target import get as get_target  # noqa: E402
from braze.testing.comm_checks import check_collectives  # noqa: E402
from group import run_group  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and dist.is_nccl_available()),
    reason="needs CUDA and NCCL (torch.cuda.is_available() and torch.distributed.is_nccl_available()); "
           "the nccl backend's CPU-side behaviour is tested in test_devices.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gpu_target() -> str:
    for name in ("cuda", "triton"):
        target = get_target(name)
        if not (target.compiler_missing() or target.device_missing()):
            return name
    pytest.skip("neither braze's cuda nor its triton target can run here")


def test_one_rank_collectives_hooks_and_flight_recorder():
    store = bc.TCPStore("127.0.0.1", 0, True)
    with bc.new_comm("nccl", 0, 1, store, timeout=30.0) as comm:
        assert comm.device == torch.device("cuda", torch.cuda.current_device())
        assert check_collectives(comm) == []
        with pytest.raises(bc.CommDeviceMismatch, match="the nccl backend takes CUDA tensors, but this one is on cpu"):
            comm.all_reduce(torch.ones(4))
        assert not comm.is_aborted()


def test_one_rank_reconfigure_builds_a_new_group():
    store = bc.TCPStore("127.0.0.1", 0, True)
    with bc.new_comm("nccl", 0, 1, store) as comm:
        comm.reconfigure("nccl-again", [0])
        t = torch.ones(4, device="cuda")
        comm.all_reduce(t)
        assert t.tolist() == [1.0] * 4 and comm.world_size == 1


def test_abort_fails_the_next_op_until_reconfigure():
    store = bc.TCPStore("127.0.0.1", 0, True)
    with bc.new_comm("nccl", 0, 1, store) as comm:
        aborts = []
        comm.register_abort_hook(aborts.append)
        comm.abort("testing")
        assert comm.is_aborted() and aborts[0]["op"] == "abort"
        with pytest.raises(bc.CommAborted, match="testing"):
            comm.all_reduce(torch.ones(4, device="cuda"))
        comm.reconfigure("after-abort", [0])
        comm.barrier()


def test_compiled_tensor_parallel_mlp_stays_on_the_gpu_at_one_rank():
    """A world of one still runs the compiled all_reduce through the nccl communicator."""
    results = run_group(device_workers.nccl_against_torch, 1, "gloo", args=(_free_port(), _gpu_target()),
                        deadline=300)
    _check_nccl_results(results, 1)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs for a 2-rank NCCL group")
def test_two_ranks_against_torch_distributed_nccl():
    results = run_group(device_workers.nccl_against_torch, 2, "gloo", args=(_free_port(), _gpu_target()),
                        deadline=300)
    _check_nccl_results(results, 2)


def _check_nccl_results(results, world):
    for rank, r in sorted(results.items()):
        assert r["failures"] == [], (rank, r)
        assert "the nccl backend takes CUDA tensors, but this one is on cpu" in r["host_tensor_error"], (rank, r)
        assert r["sum_behind_busy_stream_ok"], (rank, r)
        assert r["issue_and_wait_s"] < 0.1 and not r["done_at_wait"], (rank, r)  # the GPU was still busy
        assert r["mlp_device"] == f"cuda:{rank}", (rank, r)
        assert r["mlp_vs_eager"] < 1e-4 and r["mlp_vs_unsharded"] < 1e-4, (rank, r)
        assert r["mlp_braze_all_reduces"] == 1, (rank, r)  # the compiled program's, through braze.comm
