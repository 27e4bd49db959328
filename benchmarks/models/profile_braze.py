#!/usr/bin/env python3
"""Where a braze-compiled zoo model spends its time, next to eager PyTorch.

    .venv/bin/python benchmarks/models/profile_braze.py MODEL [--size bench|small]
        [--sequence N] [--threads N] [--calls N] [--top K] [--json PATH] [--kernel-source]
        [--dtype bfloat16]

braze side: every step of the compiled program (`CompiledModel.compiled.
program.steps`: a compiled kernel, a launch of several small kernels, a
library call such as braze.matmul / braze.convolution, a layout op, an
extern aten op) is wrapped with a timer (braze itself is not changed: the
wrappers live on this process's compiled instance). Reported per call: time
per step (mean and minimum over --calls calls after warm-up), summed per category, and
the rest of the call (argument checks, pytree, output copies: Python around
the steps). Eager side: torch.profiler's self CPU time per aten op (mean over
the same number of calls). Same 2 threads (--threads), torch.no_grad(), same inputs as
benchmarks/models/run.py.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import statistics
import os
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))


def _shape(t) -> str:
    return "×".join(str(s) for s in t.shape) if hasattr(t, "shape") else type(t).__name__


def describe(run, env_shapes) -> tuple[str, str]:
    """(category, description) of one step's callable."""
    kind = type(run).__name__
    if kind == "_NativeKernelCall":
        dom = "×".join("?" if d is None else str(d) for d in run.domain)
        ins = ", ".join(env_shapes.get(s, "?") for s in run.inputs)
        outs = ", ".join(env_shapes.get(s, "?") for s in run.outputs)
        return "kernel", f"{run.name} domain {dom} in [{ins}] out [{outs}] @ {run.location}"
    if kind == "_LaunchCall":
        return "launch (small kernels)", run.name
    if hasattr(run, "record") and hasattr(run, "results"):  # _HostCall and its subclasses (_ConvolutionCall)
        ins = ", ".join(env_shapes.get(s, "?") for s in run.operands)
        outs = ", ".join(env_shapes.get(s, "?") for s in run.results)
        layout = f" layout {run.layout}" if getattr(run, "layout", None) is not None else ""
        extra = f" {run.arguments}" if hasattr(run, "arguments") else ""
        return run.name, f"{run.name}{layout} in [{ins}] out [{outs}]{extra}"
    if kind == "_ExternCall":
        ins = ", ".join(env_shapes.get(s, "?") for s in run.operands)
        return f"extern {run.target}", f"extern {run.target} in [{ins}]"
    return kind, kind


def profile_braze(compiled, call, calls, torch):
    program = compiled.compiled.program
    steps = program.steps
    spent = [[] for _ in steps]
    shapes: dict[int, str] = {}
    originals = [s.run for s in steps]

    def wrap(i, run):
        def timed(env):
            t0 = time.perf_counter()
            run(env)
            spent[i].append(time.perf_counter() - t0)
        return timed

    # One untimed call that records the shape of every slot a step writes.
    def record(i, run):
        def rec(env):
            run(env)
            for attr in ("outputs", "results"):
                for slot in getattr(run, attr, ()):
                    shapes[slot] = _shape(env[slot])
        return rec

    for i, s in enumerate(steps):
        s.run = record(i, originals[i])
    call()
    for i, s in enumerate(steps):
        s.run = wrap(i, originals[i])
    for _ in range(3):
        call()
    spent[:] = [[] for _ in steps]
    totals = []
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        totals.append(time.perf_counter() - t0)
    total = statistics.mean(totals)
    for i, s in enumerate(steps):
        s.run = originals[i]
    # Arguments' shapes too (slots not written by a step).
    rows = []
    for i, run in enumerate(originals):
        cat, desc = describe(run, shapes)
        rows.append({"step": i, "category": cat, "what": desc, "ms": statistics.mean(spent[i]) * 1e3,
                     "min_ms": min(spent[i]) * 1e3})
    return total, rows


def profile_eager(call, calls, torch):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            call()
    out = []
    for e in prof.key_averages():
        out.append({"op": e.key, "self_ms": e.self_cpu_time_total / 1e3 / calls, "count": e.count // calls})
    out.sort(key=lambda r: -r["self_ms"])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--size", choices=("bench", "small"), default="bench")
    p.add_argument("--sequence", type=int, default=None)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default %(default)s)")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--json", default=None, help="write the rows here")
    p.add_argument("--kernel-source", action="store_true", help="print the C++ of the 3 slowest kernels")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                   help="weights and floating inputs in this type, as run.py --dtype")
    p.add_argument("--options", default="{}", help='braze.compile options as JSON, e.g. \'{"fold_layouts": false}\'')
    a = p.parse_args(argv)

    os.environ.setdefault("BRAZE_CACHE_DIR", os.path.join(tempfile.mkdtemp(prefix="braze-prof-"), "braze"))
    warnings.filterwarnings("ignore")
    import torch

    import braze
    from braze.testing import zoo

    torch.set_num_threads(a.threads)
    size = zoo.BENCH if a.size == "bench" else zoo.SMALL
    if a.sequence:
        size = dataclasses.replace(size, sequence=a.sequence)
    model, args, kwargs = zoo.BY_NAME[a.model].make(size, dtype=getattr(torch, a.dtype))
    with torch.no_grad():
        compiled = braze.compile(model, args, kwargs=kwargs, options=json.loads(a.options))

        def eager():
            return model(*args, **kwargs)

        def bz():
            return compiled(*args, **kwargs)

        for f in (eager, bz):
            f()
            f()
        # Plain medians first (no wrappers, no profiler).
        plain = {}
        for name, f in (("eager", eager), ("braze", bz)):
            ts = []
            for _ in range(a.calls):
                t0 = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t0)
            plain[name] = sorted(ts)[len(ts) // 2] * 1e3
        total, rows = profile_braze(compiled, bz, a.calls, torch)
        eager_ops = profile_eager(eager, a.calls, torch)

    stats = {k: v for k, v in compiled.stats.items() if k != "source"}
    steps_ms = sum(r["ms"] for r in rows)
    print(f"{a.model} ({a.size}, {a.dtype}{', sequence ' + str(a.sequence) if a.sequence else ''}): eager {plain['eager']:.2f} ms, "
          f"braze {plain['braze']:.2f} ms (median of {a.calls}); braze stats: " + json.dumps(stats))
    print(f"{a.threads} thread(s). braze with step timers: mean {total * 1e3:.2f} ms per call; sum of the steps' "
          f"means {steps_ms:.2f} ms ({len(rows)} steps; sum of their minima "
          f"{sum(r['min_ms'] for r in rows):.2f} ms); outside the steps ≈{total * 1e3 - steps_ms:.2f} ms")
    cats = collections.defaultdict(lambda: [0.0, 0, 0.0])
    for r in rows:
        cats[r["category"]][0] += r["ms"]
        cats[r["category"]][1] += 1
        cats[r["category"]][2] += r["min_ms"]
    low_total = sum(r["min_ms"] for r in rows)
    print("\nbraze per category (sum of step means ms, % of the call's mean; sum of step minima ms, % of their "
          "total; steps):")
    for c, (ms, n, low) in sorted(cats.items(), key=lambda kv: -kv[1][2]):
        print(f"  {ms:9.3f} ms {100 * ms / (total * 1e3):5.1f}%   min {low:9.3f} ms {100 * low / low_total:5.1f}%  "
              f"×{n:<4d} {c}")
    print(f"\nbraze top {a.top} steps:")
    for r in sorted(rows, key=lambda r: -r["ms"])[: a.top]:
        print(f"  {r['ms']:8.3f} ms (min {r['min_ms']:7.3f}) {100 * r['ms'] / (total * 1e3):5.1f}%  "
              f"#{r['step']:<4d} {r['what'][:260]}")
    eager_total = sum(r["self_ms"] for r in eager_ops)
    print(f"\neager (torch.profiler self CPU time, {eager_total:.2f} ms per call in aten ops; top {a.top}):")
    for r in eager_ops[: a.top]:
        print(f"  {r['self_ms']:8.3f} ms {100 * r['self_ms'] / max(eager_total, 1e-9):5.1f}%  ×{r['count']:<4d} {r['op']}")
    if a.kernel_source and compiled.stats.get("source"):
        from braze.__main__ import _kernel_text

        source = open(compiled.stats["source"]).read()
        kernels = [r for r in sorted(rows, key=lambda r: -r["ms"]) if r["category"] == "kernel"][:3]
        for r in kernels:
            name = r["what"].split()[0]
            print(f"\n// {r['ms']:.3f} ms: {r['what'][:300]}")
            print(_kernel_text(source, name))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "plain_ms": plain, "timed_call_ms": total * 1e3, "stats": stats,
                       "categories": {c: {"median_ms": v[0], "steps": v[1], "min_ms": v[2]} for c, v in cats.items()}, "steps": rows, "eager_ops": eager_ops},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
