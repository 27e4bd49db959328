"""Decode GEMV bandwidth (issue 12): a linear layer with an epilogue at a
decode shape (x [M, K], weight [N, K], M <= 16), braze's GEMV vs eager
(MKL) vs Inductor, against two read-bandwidth probes over a tensor of the
weight's bytes, at the same thread count and in the same rounds:

* torch.sum over a float32 tensor of the weight's size;
* a streaming dot product, torch.mv of that tensor, viewed as [rows, 4096],
  with a vector: MKL's f32 GEMV, one multiply-add per float read.

Each round calls every engine and probe `--calls` times in turn
(alternating, so a burst of other load hits all of them alike; thread
CPU time at 1 thread, as benchmarks/cpu/epilogue.py, wall-clock time at
more); the median over rounds is kept. Models:

* `linear`: x @ W^T + b alone (a lone GEMM: braze's GEMV at M <= 4, the
  CPU target's decode_gemm_rows; eager is the library's GEMM);
* `silu`: SiLU(x @ W^T + b) (an epilogue per element);
* `layernorm`: LayerNorm(r + x @ W^T + b) (row statistics: the GEMM's
  epilogue sums each row);
* `conv1d`: addmm(b, x, W) with W [K, N], GPT-2's Conv1D (the weight's
  rows run along N).

    .venv/bin/python benchmarks/cpu/gemv.py [--threads 1] [--rounds 21] [--calls 5]
        [--shapes 4096x4096,4096x11008,11008x4096] [--dtypes f32,bf16] [--rows 1,4] [--models linear,silu,layernorm]
        [--footprint MB]

Shapes are K x N. Prints a markdown table; GB/s is the weight's bytes
over the median time per call. `--footprint 96` calls copies of the layer
in turn (and sizes the probes alike) until their weights add up to 96 MB,
so that every weight comes from memory, as in a decode step, not from a
last-level cache that holds one layer (32 MB on the AMD Zen 4 here: its
probes read 63-88 GB/s from L3 without it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

DTYPES = {"f32": "float32", "bf16": "bfloat16"}


def make_model(torch, kind: str, k: int, n: int, dtype):
    import torch.nn.functional as F

    class Silu(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(k, n, dtype=dtype)

        def forward(self, x):
            return F.silu(self.fc(x))

    class Norm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(k, n, dtype=dtype)
            self.norm = torch.nn.LayerNorm(n, dtype=dtype)

        def forward(self, x, residual):
            return self.norm(residual + self.fc(x))

    class Conv1D(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(k, n, dtype=dtype) * k ** -0.5)
            self.bias = torch.nn.Parameter(torch.randn(n, dtype=dtype))

        def forward(self, x):
            return torch.addmm(self.bias, x, self.weight)

    if kind == "linear":
        return torch.nn.Linear(k, n, dtype=dtype).eval()
    if kind == "conv1d":
        return Conv1D().eval()
    return (Silu() if kind == "silu" else Norm()).eval()


def medians(calls: dict, inputs: tuple, rounds: int, per_round: int, clock) -> dict:
    """The median seconds per call of each of `calls`, called in turn in
    every round (after one untimed call)."""
    samples = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            call(*inputs)
            started = clock()
            for _ in range(per_round):
                call(*inputs)
            samples[name].append((clock() - started) / per_round)
    return {name: statistics.median(v) for name, v in samples.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--shapes", default="4096x4096,4096x11008,11008x4096")
    parser.add_argument("--dtypes", default="f32,bf16")
    parser.add_argument("--rows", default="1,4")
    parser.add_argument("--models", default="linear,silu,layernorm")
    parser.add_argument("--footprint", type=float, default=0, metavar="MB",
                        help="call copies of the layer in turn, their weights adding up to MB (past the caches)")
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-gemv-"))
    import torch
    import torch._dynamo

    import braze

    torch.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    print(f"threads {args.threads}, load average before {os.getloadavg()}", flush=True)
    print("| model | dtype | M | K x N | weight MB x copies | eager GB/s | Inductor GB/s | braze GB/s | torch.sum GB/s "
          "| torch.mv GB/s | braze / sum | braze / mv | max rel err |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for kind in args.models.split(","):
        for dtype_name in args.dtypes.split(","):
            dtype = getattr(torch, DTYPES[dtype_name])
            for shape in args.shapes.split(","):
                k, n = (int(v) for v in shape.split("x"))
                for m in (int(v) for v in args.rows.split(",")):
                    torch.manual_seed(0)
                    model = make_model(torch, kind, k, n, dtype)
                    inputs = (torch.randn(m, k, dtype=dtype),)
                    if kind == "layernorm":
                        inputs += (torch.randn(m, n, dtype=dtype),)
                    weight = model.weight if kind in ("linear", "conv1d") else model.fc.weight
                    weight_bytes = weight.numel() * weight.element_size()
                    copies = max(1, -(-int(args.footprint * 1e6) // weight_bytes))
                    models = [model] + [make_model(torch, kind, k, n, dtype) for _ in range(copies - 1)]
                    read = copies * weight_bytes
                    probe = torch.randn(read // 4 // 4096, 4096)
                    ones = torch.ones(4096)
                    torch._dynamo.reset()
                    torch._dynamo.config.cache_size_limit = max(8, 2 * copies)
                    torch._dynamo.config.accumulated_cache_size_limit = max(256, 4 * copies)
                    with torch.no_grad():
                        engines = {"eager": models, "inductor": [torch.compile(c) for c in models],
                                   "braze": [braze.compile(c, inputs) for c in models]}
                        calls = {name: (lambda each: lambda *a: [c(*a) for c in each][-1])(each)
                                 for name, each in engines.items()}
                        calls.update(sum=lambda *_: probe.sum(), mv=lambda *_: torch.mv(probe, ones))
                        expected = model(*inputs).float()
                        error = ((engines["braze"][0](*inputs).float() - expected).abs().max()
                                 / expected.abs().max()).item()
                        times = medians(calls, inputs, args.rounds, args.calls, clock)
                    rate = {name: read / t / 1e9 for name, t in times.items()}
                    print(f"| {kind} | {dtype_name} | {m} | {k} x {n} | {weight_bytes / 1e6:.1f} x {copies} "
                          f"| {rate['eager']:.1f} | {rate['inductor']:.1f} | {rate['braze']:.1f} | {rate['sum']:.1f} "
                          f"| {rate['mv']:.1f} | {rate['braze'] / rate['sum']:.0%} | {rate['braze'] / rate['mv']:.0%} "
                          f"| {error:.1e} |", flush=True)
    print(f"load average after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
