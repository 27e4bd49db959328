"""What the spawned ranks of test_devices.py and test_nccl.py run: the
checks of braze.testing.comm_checks through one adapter, against
torch.distributed over the same ranks."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from braze.testing.comm_checks import check_collectives
from compiled_workers import TensorParallelMLP


def gloo_against_torch(comm, rank, world, port):
    """The shared process-group adapter's checks through Gloo, against torch.distributed's Gloo."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        return check_collectives(comm, reference=dist.group.WORLD)
    finally:
        dist.destroy_process_group()


def nccl_against_torch(comm, rank, world, port, target):
    """On GPU `rank`: an nccl braze.comm communicator checked against
    torch.distributed's NCCL, its errors for host tensors, and a compiled
    tensor-parallel MLP on CUDA tensors (braze target `target`) against
    eager NCCL and the unsharded model. `comm` (Gloo) only carries the store."""
    import braze
    import braze.comm as bc

    torch.cuda.set_device(rank)
    nccl = bc.new_comm("nccl", rank, world, comm.store, timeout=comm.timeout, group="nccl")
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    try:
        result = {"failures": check_collectives(nccl, reference=dist.group.WORLD)}
        try:
            nccl.all_reduce(torch.ones(4))
        except bc.CommDeviceMismatch as error:
            result["host_tensor_error"] = str(error)

        # The host is not held while NCCL works: behind a kernel that keeps
        # the stream busy for about half a second, issuing and waiting
        # return at once, and the result is right once the stream ran.
        t = torch.ones(1024, device="cuda")
        torch.cuda.synchronize()
        torch.cuda._sleep(1_000_000_000)
        started = time.perf_counter()
        work = nccl.all_reduce(t, async_op=True)
        work.wait()
        result["issue_and_wait_s"] = time.perf_counter() - started
        result["done_at_wait"] = work.is_completed()
        torch.cuda.synchronize()
        result["sum_behind_busy_stream_ok"] = bool((t == world).all().item())

        braze.register_communicator(nccl, group=dist.group.WORLD.group_name)
        torch.manual_seed(0)
        d, hidden, rows = 16, 32, 8
        w1, w2, x = torch.randn(d, hidden), torch.randn(hidden, d), torch.randn(rows, d)
        shard = hidden // world
        mlp = TensorParallelMLP(w1[:, rank * shard:(rank + 1) * shard].clone().cuda(),
                                w2[rank * shard:(rank + 1) * shard].clone().cuda(), dist.group.WORLD)
        x = x.cuda()
        reduces = []
        nccl.register_pre_hook(lambda info: reduces.append(info["op"]) if info["op"] == "all_reduce" else None)
        with torch.no_grad():
            eager = mlp(x)
            got = braze.compile(mlp, (x,), target=target)(x)
        got = got[0] if isinstance(got, (list, tuple)) else got
        result["mlp_device"] = str(got.device)
        result["mlp_vs_eager"] = (got - eager).abs().max().item()
        result["mlp_vs_unsharded"] = (got.cpu() - (torch.relu(x.cpu() @ w1) @ w2 + 1.0)).abs().max().item()
        result["mlp_braze_all_reduces"] = len(reduces)
        return result
    finally:
        braze.unregister_communicator(nccl)
        nccl.close()
        dist.destroy_process_group()
