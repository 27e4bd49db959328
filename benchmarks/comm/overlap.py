"""Step time of a 2-rank data-parallel step compiled by braze with and
without braze-overlap, against eager torch.distributed (Gloo):

    python benchmarks/comm/overlap.py [--steps 20]

The step is an MLP's SGD step with its gradients written out (two GEMMs per
gradient, each gradient all_reduced as soon as it exists), so the second
layer's all_reduce can run while the first layer's gradient is computed.
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


def _rank(comm, rank, world, port, steps, sizes):
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc

    import braze

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    pg = dist.group.WORLD
    braze.register_communicator(comm, group=pg.group_name)
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

    torch.manual_seed(0)
    model = Step()
    x, target = torch.randn(rows, d), torch.randn(rows, d)
    durations = []
    comm.register_post_hook(lambda info: durations.append(info["duration"]))

    def timed(*fns):
        """Median step time of each of `fns`, timed in alternating rounds
        (the machine's load drifts; alternating spreads it evenly)."""
        for fn in fns:
            fn(x, target)  # warm
        dist.barrier()
        times = [[] for _ in fns]
        for _ in range(steps):
            for fn, samples in zip(fns, times):
                started = time.perf_counter()
                fn(x, target)
                samples.append(time.perf_counter() - started)
        return [statistics.median(samples) * 1e3 for samples in times]

    plain = braze.compile(model, (x, target), options={"overlap": False})
    overlapped = braze.compile(model, (x, target))
    durations.clear()
    timed(plain)  # the communication time alone, from the post hooks
    comm_ms = sum(durations) / (steps + 1) * 1e3
    with torch.no_grad():
        eager, no_overlap, overlap = timed(model, plain, overlapped)
    result = {"eager_gloo_ms": eager, "braze_no_overlap_ms": no_overlap, "braze_overlap_ms": overlap,
              "comm_ms_per_step": comm_ms}
    dist.destroy_process_group()
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--sizes", default="512,1024,1024", help="rows,d,h")
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    from braze.comm.launch import spawn_group

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sizes = tuple(int(v) for v in args.sizes.split(","))
    results = spawn_group(_rank, 2, "shm", args=(port, args.steps, sizes), deadline=600, timeout=60)
    summary = {k: statistics.mean(r[k] for r in results.values()) for k in results[0]}
    summary["hidden_share"] = ((summary["braze_no_overlap_ms"] - summary["braze_overlap_ms"])
                               / summary["comm_ms_per_step"])
    summary["sizes"] = sizes
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
