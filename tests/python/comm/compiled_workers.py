"""What the spawned ranks of test_compiled_collectives.py run: programs with
torch.distributed functional collectives, compiled by braze (collectives
through braze.comm) and run eagerly (the same collectives through
torch.distributed's Gloo), on the same inputs."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

import group
from braze.testing.parallel import TensorParallelBlock, block_weights

D, H, ROWS, HEADS = 16, 32, 8, 4


def _setup(comm, rank, world, port):
    import braze

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    braze.register_communicator(comm, group=dist.group.WORLD.group_name)
    return dist.group.WORLD


class TensorParallelMLP(torch.nn.Module):
    """Column-parallel then row-parallel: each rank holds H/world hidden
    units; one all_reduce sums the partial outputs."""

    def __init__(self, w1: torch.Tensor, w2: torch.Tensor, pg):
        super().__init__()
        self.w1, self.w2, self.pg = torch.nn.Parameter(w1), torch.nn.Parameter(w2), pg

    def forward(self, x):
        partial = torch.relu(x @ self.w1) @ self.w2
        return fc.all_reduce(partial, "sum", self.pg) + 1.0


def tensor_parallel_numbers(comm, rank, world, port):
    """Per overlap mode, the largest difference between braze and eager
    (Gloo) of a tensor-parallel MLP (through braze.compile) and block
    (through torch.compile), and of each against the unsharded model; then
    the uneven all_to_all and the bucketed data-parallel step."""
    import braze

    pg = _setup(comm, rank, world, port)
    torch.manual_seed(0)
    w1, w2 = torch.randn(D, H), torch.randn(H, D)
    x = torch.randn(ROWS, D)
    shard = H // world
    mlp = TensorParallelMLP(w1[:, rank * shard:(rank + 1) * shard].clone(),
                            w2[rank * shard:(rank + 1) * shard].clone(), pg)
    weights = block_weights(D, H)
    block = TensorParallelBlock(weights, HEADS, rank, world, pg)
    tokens = torch.randn(2, ROWS, D)
    with torch.no_grad():
        eager_mlp, eager_block = mlp(x), block(tokens)
        full_mlp = torch.relu(x @ w1) @ w2 + 1.0
        full_block = TensorParallelBlock(weights, HEADS)(tokens)
    # The compiled programs' all_reduces go through braze.comm (eager ones
    # through Gloo): counted, they show braze ran each program.
    reduces = []
    comm.register_pre_hook(lambda info: reduces.append(info["op"]) if info["op"] == "all_reduce" else None)
    results = {}
    for mode in ("simple", "cost"):
        options = {"overlap_mode": mode}
        reduces.clear()
        got = braze.compile(mlp, (x,), options=options)(x)
        got = got[0] if isinstance(got, (list, tuple)) else got
        results[f"mlp_{mode}_vs_eager"] = (got - eager_mlp).abs().max().item()
        results[f"mlp_{mode}_vs_unsharded"] = (got - full_mlp).abs().max().item()
        torch._dynamo.reset()
        with torch.no_grad():
            got = torch.compile(block, backend="braze", options=options)(tokens)
        results[f"block_{mode}_vs_eager"] = (got - eager_block).abs().max().item()
        results[f"block_{mode}_vs_unsharded"] = (got - full_block).abs().max().item()
        results[f"{mode}_braze_all_reduces"] = len(reduces)
    results.update(uneven_all_to_all(pg, rank, world))
    results.update(bucketed_training_step(comm, pg, rank))
    dist.destroy_process_group()
    return results


def dp_step(x, target, w1, w2, pg, world: int):
    """One data-parallel SGD step of a 2-layer MLP with the gradients written
    out: the second layer's gradient is reduced while the first layer's is
    computed."""
    h = torch.relu(x @ w1)
    err = (h @ w2 - target) / x.shape[0]
    g2 = fc.all_reduce(h.t() @ err, "sum", pg) / world
    gh = (err @ w2.t()) * (h > 0)
    g1 = fc.all_reduce(x.t() @ gh, "sum", pg) / world
    return w1 - 0.1 * g1, w2 - 0.1 * g2


class ReducedGradient(torch.autograd.Function):
    """Identity forward; the backward all_reduces the gradient and averages
    it, so the backward graph AOTAutograd traces holds one all_reduce per
    parameter (what DDP's hooks issue), for braze to bucket."""

    @staticmethod
    def forward(ctx, weight, pg):
        ctx.pg = pg
        return weight.view_as(weight)

    @staticmethod
    def backward(ctx, grad):
        return fc.all_reduce(grad, "sum", ctx.pg) / dist.get_world_size(ctx.pg), None


class DataParallelMLP(torch.nn.Module):
    """Three small linear layers: six gradients of 16 to 1024 bytes."""

    def __init__(self, pg):
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(8, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)])
        self.pg = pg

    def forward(self, x):
        for index, layer in enumerate(self.layers):
            x = torch.nn.functional.linear(x, ReducedGradient.apply(layer.weight, self.pg),
                                           ReducedGradient.apply(layer.bias, self.pg))
            x = torch.tanh(x) if index + 1 < len(self.layers) else x
        return x


def bucketed_training_step(comm, pg, rank):
    """The gradients of a data-parallel step through torch.compile with
    1 KiB buckets, against eager Gloo; and how many all_reduces each run
    issued (the compiled backward's buckets: 16 + 256 + 64 bytes, 1024, and
    64 + 512)."""
    torch.manual_seed(1 + rank)  # each rank its own batch
    x, target = torch.randn(4, 8), torch.randn(4, 4)
    reduces = []
    comm.register_pre_hook(lambda info: reduces.append(info["op"]) if info["op"] == "all_reduce" else None)

    def gradients(model):
        ((model(x) - target) ** 2).mean().backward()
        return [p.grad for p in model.parameters()]

    eager = DataParallelMLP(pg)
    want = gradients(eager)
    compiled = DataParallelMLP(pg)
    got = gradients(torch.compile(compiled, backend="braze", options={"bucket_bytes": 1024}))
    return {"dp_bucketed_vs_eager": max((a - b).abs().max().item() for a, b in zip(got, want)),
            "dp_parameters": len(want), "dp_compiled_all_reduces": len(reduces)}


def moe_dispatch_combine(x, out_splits, in_splits, pg):
    """MoE-style: rows go to their expert's rank (uneven), get transformed,
    and come back."""
    routed = fc.all_to_all_single(x, out_splits, in_splits, pg)
    expert = routed * 2.0 + 1.0
    gathered = fc.all_gather_single(expert.sum(0, keepdim=True), 0, pg)
    back = fc.all_to_all_single(expert, in_splits, out_splits, pg)
    return back, gathered


def uneven_all_to_all(pg, rank, world):
    """MoE dispatch and combine through torch.compile against eager Gloo:
    rank r sends (r + j) % world + 1 rows to rank j."""
    everyone = [[(r + j) % world + 1 for j in range(world)] for r in range(world)]
    in_splits = everyone[rank]
    out_splits = [everyone[src][rank] for src in range(world)]
    rows = sum(in_splits)
    tokens = torch.arange(rows * 4, dtype=torch.float32).reshape(rows, 4) + 100 * rank
    moe = torch.compile(lambda t: moe_dispatch_combine(t, out_splits, in_splits, pg), backend="braze")
    got = moe(tokens)
    want = moe_dispatch_combine(tokens, out_splits, in_splits, pg)
    return {"a2a_vs_eager": max((a - b).abs().max().item() for a, b in zip(got, want)),
            "a2a_round_trip": (got[0] - (tokens * 2 + 1)).abs().max().item()}


def numbers_then_kill(comm, rank, world, port, victim):
    """Returns every rank's numbers (per program, the largest difference
    between braze and eager, and for the TP MLP against the unsharded model),
    then kills `victim` in the middle of a compiled step and returns what
    the others saw."""
    import braze

    pg = _setup(comm, rank, world, port)
    torch.manual_seed(0)
    w1, w2 = torch.randn(D, H), torch.randn(H, D)
    x = torch.randn(ROWS, D)
    shard = H // world
    results = {}

    # Tensor parallel, through braze.export.
    tp = TensorParallelMLP(w1[:, rank * shard:(rank + 1) * shard].clone(),
                           w2[rank * shard:(rank + 1) * shard].clone(), pg)
    compiled = braze.compile(tp, (x,))
    with torch.no_grad():
        eager = tp(x)
    got = compiled(x)
    got = got[0] if isinstance(got, (list, tuple)) else got
    full = torch.relu(x @ w1) @ w2 + 1.0
    results["tp_vs_eager"] = (got - eager).abs().max().item()
    results["tp_vs_unsharded"] = (got - full).abs().max().item()

    # Data parallel, through torch.compile: each rank its own batch.
    xs, ts = torch.randn(ROWS, D) + rank, torch.randn(ROWS, D)
    step = torch.compile(lambda a, b, c, d: dp_step(a, b, c, d, pg, world), backend="braze")
    new = step(xs, ts, w1, w2)
    want = dp_step(xs, ts, w1, w2, pg, world)
    results["dp_vs_eager"] = max((a - b).abs().max().item() for a, b in zip(new, want))
    # Every rank ends with the same weights.
    same = [torch.empty_like(new[0]) for _ in range(world)]
    dist.all_gather(same, new[0])
    results["dp_replicas_agree"] = all(torch.equal(same[0], s) for s in same)

    results.update(uneven_all_to_all(pg, rank, world))
    results.update(bucketed_training_step(comm, pg, rank))
    everyone = [None] * world
    dist.all_gather_object(everyone, results)
    dist.destroy_process_group()  # Gloo's teardown must not wait for a dead peer
    return {"numbers": everyone, "killed": killed_mid_step(comm, rank, step, (xs, ts, w1, w2), victim)}


def killed_mid_step(comm, rank, step, arguments, victim):
    """The victim dies inside its second collective of a compiled step; the
    others must get a CollectiveError (not hang, not fall back to eager)."""
    from braze.errors import CollectiveError

    if rank == victim:
        first = []

        def die_on_second(info):
            first.append(info["op"])
            if len(first) == 2:
                group.kill_self()
        comm.register_pre_hook(die_on_second)
    started = time.monotonic()
    try:
        step(*arguments)
    except CollectiveError as error:
        return {"error": type(error).__name__, "cause": type(error.__cause__).__name__,
                "seconds": time.monotonic() - started, "message": str(error)}
    return {"error": None, "seconds": time.monotonic() - started}
