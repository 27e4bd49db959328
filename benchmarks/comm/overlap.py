"""Step time of a program with collectives compiled by braze without
braze-overlap, with it in each mode (simple, cost), and run eagerly through
torch.distributed (Gloo):

    python benchmarks/comm/overlap.py [--steps 20]                    # 2-rank data-parallel step
    python benchmarks/comm/overlap.py --model tp-block [--world 4]    # tensor-parallel block

`dp` (2 ranks): an MLP's SGD step with its gradients written out (two GEMMs
per gradient, each gradient all_reduced as soon as it exists), so the second
layer's all_reduce can run while the first layer's gradient is computed.
`tp-block` (4 ranks): the forward of a pre-norm transformer block split
Megatron-style (braze.testing.parallel.TensorParallelBlock): one all_reduce
after the attention's output projection, one after the MLP.

Communication time is the sum of the collectives' durations the
communicator's post hooks report in the run without overlap; the share
hidden is (step without overlap - step with overlap) / that time. Wall-clock
medians of alternating rounds, 1 thread per rank, in one run; prints JSON."""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SIZES = {"dp": "512,1024,1024", "tp-block": "4,128,512,2048,8"}
DEFAULT_WORLD = {"dp": 2, "tp-block": 4}


def _dp_step(pg, world, sizes):
    """The data-parallel step and its inputs (rows, d, h)."""
    import torch
    import torch.distributed._functional_collectives as fc

    rows, d, h = sizes

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Parameter(torch.randn(d, h) / d ** 0.5)
            self.w2 = torch.nn.Parameter(torch.randn(h, d) / h ** 0.5)

        def forward(self, x, target):
            hidden = torch.relu(x @ self.w1)
            err = (hidden @ self.w2 - target) / x.shape[0]
            g2 = fc.all_reduce(hidden.t() @ err, "sum", pg)
            gh = (err @ self.w2.t()) * (hidden > 0)
            g1 = fc.all_reduce(x.t() @ gh, "sum", pg)
            return self.w1 - 0.1 * g1 / world, self.w2 - 0.1 * g2 / world

    return Step(), (torch.randn(rows, d), torch.randn(rows, d))


def _tp_block(pg, rank, world, sizes):
    """This rank's shard of the tensor-parallel block and its input (batch,
    seq, d, hidden, heads)."""
    import torch

    from braze.testing.parallel import TensorParallelBlock, block_weights

    batch, seq, d, hidden, heads = sizes
    block = TensorParallelBlock(block_weights(d, hidden), heads, rank, world, pg)
    return block, (torch.randn(batch, seq, d),)


def _rank(comm, rank, world, port, steps, model_name, sizes):
    import torch
    import torch.distributed as dist

    import braze

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    pg = dist.group.WORLD
    braze.register_communicator(comm, group=pg.group_name)
    torch.manual_seed(0)  # every rank the same weights (dp) and shards of one model (tp)
    model, inputs = _dp_step(pg, world, sizes) if model_name == "dp" else _tp_block(pg, rank, world, sizes)
    durations = []
    comm.register_post_hook(lambda info: durations.append(info["duration"]))

    def timed(*fns):
        """Median step time of each of `fns`, timed in alternating rounds
        (the machine's load drifts; alternating spreads it evenly)."""
        for fn in fns:
            fn(*inputs)  # warm
        dist.barrier()
        times = [[] for _ in fns]
        for _ in range(steps):
            for fn, samples in zip(fns, times):
                started = time.perf_counter()
                fn(*inputs)
                samples.append(time.perf_counter() - started)
        return [statistics.median(samples) * 1e3 for samples in times]

    with torch.no_grad():
        plain = braze.compile(model, inputs, options={"overlap": False})
        simple = braze.compile(model, inputs)
        cost = braze.compile(model, inputs, options={"overlap_mode": "cost"})
        durations.clear()
        timed(plain)  # the communication time alone, from the post hooks
        comm_ms = sum(durations) / (steps + 1) * 1e3
        eager, no_overlap, overlap, overlap_cost = timed(model, plain, simple, cost)
    result = {"eager_gloo_ms": eager, "braze_no_overlap_ms": no_overlap, "braze_overlap_ms": overlap,
              "braze_overlap_cost_ms": overlap_cost, "comm_ms_per_step": comm_ms}
    dist.destroy_process_group()
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--model", choices=sorted(DEFAULT_SIZES), default="dp")
    parser.add_argument("--world", type=int, help="ranks (default: 2 for dp, 4 for tp-block)")
    parser.add_argument("--sizes", help="dp: rows,d,h (512,1024,1024); "
                                        "tp-block: batch,seq,d,hidden,heads (4,128,512,2048,8)")
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    from braze.comm.launch import spawn_group

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sizes = tuple(int(v) for v in (args.sizes or DEFAULT_SIZES[args.model]).split(","))
    world = args.world or DEFAULT_WORLD[args.model]
    results = spawn_group(_rank, world, "shm", args=(port, args.steps, args.model, sizes), deadline=600, timeout=60)
    summary = {k: statistics.mean(r[k] for r in results.values()) for k in results[0]}
    for mode, key in (("simple", "braze_overlap_ms"), ("cost", "braze_overlap_cost_ms")):
        summary[f"hidden_share_{mode}"] = ((summary["braze_no_overlap_ms"] - summary[key])
                                           / summary["comm_ms_per_step"])
    summary.update(model=args.model, world=world, sizes=sizes)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
