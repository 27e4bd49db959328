#!/usr/bin/env python3
"""Which CPU realisation of a fused GEMM braze generates: a register-blocked
micro-kernel over packed panels, or MKL on panels with the epilogue per panel
(issue 12 item 5). Both in fused_gemm_variants.cpp, on Linear + bias + GELU
(float32, W stored [N, K] as nn.Linear does), against torch.mm alone (the
GEMM's own speed) and the GEMM followed by a separate epilogue pass.

    .venv/bin/python benchmarks/cpu/fused_gemm_variants.py [--threads 1 2] [--rounds 7]

Per shape and thread count, every variant is timed in one interleaved run:
each round calls each variant `--calls` times in turn (thread CPU time per
call, `time.thread_time()`, at 1 thread; wall time at more, as the pool's
threads do the work), and the median over rounds is kept. Prints a table
and writes benchmarks/cpu/fused_gemm_variants.json.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from machine import CpuLoad, cpu_info  # noqa: E402

# (name, M, K, N): Linear layers of the benchmark models at their batch.
SHAPES = [
    ("mlp fc1 (batch 256)", 256, 1024, 4096),
    ("bert ffn up (8 x 128 tokens)", 1024, 768, 3072),
    ("bert attention out (8 x 128)", 1024, 768, 768),
    ("vit mlp up (197 tokens x 2)", 394, 768, 3072),
]


def build() -> ctypes.CDLL:
    source = os.path.join(HERE, "fused_gemm_variants.cpp")
    target = os.path.join(tempfile.mkdtemp(prefix="braze-fused-gemm-"), "variants.so")
    subprocess.run(["g++", "-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
                    "-shared", "-fPIC", "-o", target, source], check=True)
    library = ctypes.CDLL(target)
    mkl = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    library.set_sgemm(ctypes.cast(mkl.sgemm_, ctypes.c_void_p))
    library.set_packed(*(ctypes.cast(getattr(mkl, name), ctypes.c_void_p)
                         for name in ("cblas_sgemm_pack_get_size", "cblas_sgemm_pack", "cblas_sgemm_compute")))
    return library


def variants(library, m, k, n):
    g = torch.Generator().manual_seed(m + k + n)
    x, w, b = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g) / k**0.5, torch.randn(n, generator=g)
    reference = torch.nn.functional.gelu(torch.addmm(b.double(), x.double(), w.double().t())).float()
    pointers = [t.data_ptr() for t in (x, w, b)]
    i64 = ctypes.c_int64
    calls = {}
    out = torch.empty(m, n)
    calls["torch.mm (GEMM alone)"] = (lambda: torch.mm(x, w.t(), out=out), None)
    unfused = torch.empty(m, n)

    def torch_unfused():
        torch.addmm(b, x, w.t(), out=unfused)
        torch.nn.functional.gelu(unfused)

    calls["torch addmm + gelu"] = (torch_unfused, None)
    for name, function, extra in [("mkl_separate", library.mkl_separate, ()),
                                  ("mkl_panels 64x512", library.mkl_panels, (64, 512)),
                                  ("mkl_panels 128x1024", library.mkl_panels, (128, 1024)),
                                  ("mkl_panels 256x256", library.mkl_panels, (256, 256)),
                                  ("mkl_panels Mx1024", library.mkl_panels, (m, 1024)),
                                  ("mkl_panels 512x512", library.mkl_panels, (512, 512)),
                                  ("mkl_packed 32", library.mkl_packed, (32,)),
                                  ("mkl_packed 128", library.mkl_packed, (128,)),
                                  ("microkernel", library.microkernel, ())]:
        result = torch.empty(m, n)
        arguments = [ctypes.c_void_p(p) for p in pointers] + [ctypes.c_void_p(result.data_ptr()),
                                                              i64(m), i64(n), i64(k)] + [i64(e) for e in extra]
        # The default argument keeps `result` alive as long as the call.
        calls[name] = ((lambda f=function, a=arguments, keep=result: f(*a)), result)
    errors = {}
    for name, (call, result) in calls.items():
        call()
        if result is not None:
            errors[name] = ((result - reference).abs().max() / reference.abs().max()).item()
    return {name: call for name, (call, _) in calls.items()}, errors


def time_variants(calls: dict, rounds: int, per_round: int, threads: int) -> dict:
    clock = time.thread_time if threads == 1 else time.perf_counter
    samples = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            call()
            started = clock()
            for _ in range(per_round):
                call()
            samples[name].append((clock() - started) / per_round)
    return {name: (statistics.median(values), min(values)) for name, values in samples.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--json", default=os.path.join(HERE, "fused_gemm_variants.json"))
    args = parser.parse_args(argv)
    library = build()
    rows = []
    load = CpuLoad()
    for threads in args.threads:
        torch.set_num_threads(threads)
        library.set_threads(threads)
        for label, m, k, n in SHAPES:
            calls, errors = variants(library, m, k, n)
            shape_load = CpuLoad()
            times = time_variants(calls, args.rounds, args.calls, threads)
            flop = 2.0 * m * k * n
            row = {"shape": label, "M": m, "K": k, "N": n, "threads": threads, "load": shape_load.result(),
                   "variants": {name: {"median_s": t, "min_s": best, "gflops": flop / t / 1e9,
                                       "max_rel_err": errors.get(name)}
                                for name, (t, best) in times.items()}}
            rows.append(row)
            base, base_min = times["torch.mm (GEMM alone)"]
            print(f"{threads}T {label} ({row['load'].get('other_cpu_pct', '?')}% other load)", flush=True)
            for name, (t, best) in times.items():
                print(f"    {name:24s} {t * 1e3:8.2f} ms ({best * 1e3:8.2f} min)  {base / t:5.2f}x "
                      f"({base_min / best:5.2f}x min)  {flop / t / 1e9:6.1f} GFLOP/s  err {errors.get(name)}",
                      flush=True)
    result = {"command": "python benchmarks/cpu/fused_gemm_variants.py " + " ".join(sys.argv[1:] if argv is None else argv),
              **cpu_info(), "torch": torch.__version__, "loadavg": list(os.getloadavg()), "load": load.result(),
              "rows": rows}
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
