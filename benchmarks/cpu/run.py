#!/usr/bin/env python3
"""CPU benchmark: eager PyTorch vs torch.compile (Inductor) vs braze.

    .venv/bin/python benchmarks/cpu/run.py [--models mlp,block] [--runs N]
        [--engines eager,inductor,braze] [--skip-compile-time] [--json PATH]
        [--md PATH] [--wait-quiet S] [--retries K] [--render JSON]

One process, the same weights and inputs for every engine, 2 threads
(torch.set_num_threads(2)), torch.no_grad() and eval mode. Latency is the
median of many timed calls after warm-up; the engines are timed in turns
(5 contiguous blocks each, after a short pause), so a burst of other work on
the machine hits all of them alike. Outputs of Inductor and braze are
compared with eager (max abs error). On a shared machine use
--wait-quiet 60 --retries 2 (about 6 minutes in all; without them about 4).

Also measured:
  * copy bandwidth of this machine (median time of dst.copy_(src) on two
    256 MB float32 buffers, 2 threads; bandwidth = 2 * bytes / time), against
    which the memory-bound softmax_layernorm model's GB/s is set;
  * compile time, cold and warm, of Inductor and braze per model: each in a
    fresh subprocess of this script (--compile-time-child MODEL ENGINE) with
    fresh, empty TORCHINDUCTOR_CACHE_DIR and BRAZE_CACHE_DIR (cold), then a
    second fresh subprocess with the same, now populated, directories (warm);
  * kernel counts: Inductor's generated C++ kernels counted in its output
    code (plus torch._inductor.metrics.generated_kernel_count, which on CPU
    is not the number of kernels, see count_output_code), braze's
    compiled.stats["kernels"] and ["gemms"].

braze's API (braze.compile(model, args, target="cpu") -> callable with
.stats) may not exist yet or may fail on a model: its column then shows the
error instead of a number, and everything else still runs.

Writes benchmarks/cpu/results.json (or --json PATH) and a markdown section,
printed and written to benchmarks/cpu/RESULTS_section.md (or --md PATH).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from machine import CpuLoad, machine_info, wait_quiet  # noqa: E402

THREADS = 2
ENGINES = ("eager", "inductor", "braze")
COMPILED_ENGINES = ("inductor", "braze")
GEOMEAN_MODELS = ("mlp", "block", "softmax_layernorm", "small_chains")

# Default number of timed samples per engine, and calls per sample (a sample
# of the overhead model is a batch of calls, so its per-call time is not
# dominated by the timer). Chosen so a full run (all models, eager +
# Inductor, compile times included) stays well under 10 minutes on 2 cores.
DEFAULT_RUNS = {"mlp": 100, "block": 100, "softmax_layernorm": 200, "handwritten_decoder": 30, "small_chains": 1000, "overhead": 300}
INNER = {"overhead": 100}
WARMUP_S = 0.5  # warm-up per engine: at least this long, and at least WARMUP_MIN calls
WARMUP_MIN = 5
ROUNDS = 5  # timed blocks per engine and model, engines taking turns
PAUSE_S = 0.1  # pause before each block (lets the previous engine's thread pool go idle)
RETRY_ABOVE_PCT = 10.0  # with --retries: time a model again if other processes took more of the CPUs

COPY_MB = 256
COPY_RUNS = 20


def _err(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    return f"{type(exc).__name__}: {first}"[:300]


# --------------------------------------------------------------------------- machine


def copy_bandwidth(torch) -> dict:
    """Median time of dst.copy_(src) on two COPY_MB float32 buffers, 2 threads."""
    n = COPY_MB * 2**20 // 4
    src = torch.randn(n)
    dst = torch.empty(n)
    for _ in range(3):
        dst.copy_(src)
    load = CpuLoad()
    times = []
    for _ in range(COPY_RUNS):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    nbytes = n * 4
    return {
        "method": (f"median of {COPY_RUNS} dst.copy_(src) on two {COPY_MB} MB float32 buffers "
                   f"({THREADS} threads, after 3 warm-up copies); GB/s = 2 * {COPY_MB} MB / time (1 GB = 1e9 B)"),
        "buffer_bytes": nbytes,
        "runs": COPY_RUNS,
        "median_s": med,
        "min_s": min(times),
        "gb_per_s": 2 * nbytes / med / 1e9,
        "gb_per_s_at_min": 2 * nbytes / min(times) / 1e9,
        "load": load.result(),
    }


# --------------------------------------------------------------------------- engines


def make_engine(engine, model, args, torch):
    """(callable, compile-and-first-call info) for one engine; raises on failure."""
    if engine == "eager":
        return model, {}
    if engine == "inductor":
        t0 = time.perf_counter()
        fn = torch.compile(model, backend="inductor")
        with torch.no_grad():
            fn(*args)
        return fn, {"first_call_s": time.perf_counter() - t0}
    if engine == "braze":
        import braze

        t0 = time.perf_counter()
        fn = braze.compile(model, args, target="cpu")
        t1 = time.perf_counter()
        with torch.no_grad():
            fn(*args)
        info = {"compile_s": t1 - t0, "first_call_s": time.perf_counter() - t1}
        try:
            info["stats"] = dict(fn.stats)
        except Exception as e:  # noqa: BLE001
            info["stats_error"] = _err(e)
        return fn, info
    raise ValueError(engine)


def flatten(out, torch):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o, torch)]
    raise TypeError(f"unexpected output type {type(out).__name__}")


def max_abs_err(out, ref, torch) -> float:
    out, ref = flatten(out, torch), flatten(ref, torch)
    if len(out) != len(ref):
        raise ValueError(f"{len(out)} outputs, eager has {len(ref)}")
    err = 0.0
    for o, r in zip(out, ref):
        if tuple(o.shape) != tuple(r.shape) or o.dtype != r.dtype:
            raise ValueError(f"output {tuple(o.shape)} {o.dtype}, eager {tuple(r.shape)} {r.dtype}")
        if r.numel():
            err = max(err, (o.double() - r.double()).abs().max().item())
    return err


def time_engines(fns, args, runs, inner, torch):
    """Per-call seconds of each engine: median over `runs` samples of `inner` calls.

    The engines take turns in ROUNDS contiguous blocks (so a burst of other
    work on the machine hits all of them alike), each block after a pause and
    two untimed calls: a thread pool spin-waits for a while after each call
    (libgomp briefly, OpenBLAS ~0.1 s), and with 2 threads on 2 CPUs the
    spinning pool of one engine slows the next if they alternate call by call.

    Returns {engine: {"median_s", "min_s", "samples", "calls"} or {"error"}}."""
    samples = {e: [] for e in fns}
    errors = {}

    def sample(e):
        fn = fns[e]
        t0 = time.perf_counter()
        for _ in range(inner):
            fn(*args)
        return (time.perf_counter() - t0) / inner

    def guarded(e, body):
        try:
            body()
        except Exception as exc:  # noqa: BLE001
            errors[e] = _err(exc)
            del fns[e]

    with torch.no_grad():
        for e in list(fns):  # warm-up
            def warm(e=e):
                time.sleep(PAUSE_S)
                t_end = time.perf_counter() + WARMUP_S
                k = 0
                while k < WARMUP_MIN or time.perf_counter() < t_end:
                    sample(e)
                    k += 1
            guarded(e, warm)
        rounds = max(1, min(ROUNDS, runs))
        per_round = [runs // rounds + (1 if i < runs % rounds else 0) for i in range(rounds)]
        for n in per_round:
            for e in list(fns):
                def block(e=e, n=n):
                    time.sleep(PAUSE_S)
                    sample(e)
                    sample(e)
                    samples[e].extend(sample(e) for _ in range(n))
                guarded(e, block)
    out = {}
    for e, s in samples.items():
        if e in errors:
            out[e] = {"error": errors[e]}
        else:
            out[e] = {"median_s": statistics.median(s), "min_s": min(s), "samples": len(s), "calls": len(s) * inner}
    return out


def bench_model(name, engines, runs, torch, models, wait_s=0.0, retries=0):
    model, args = models.build(name)
    with torch.no_grad():
        ref = model(*args)
    result = {"description": models.MODELS[name], "engines": {}}
    fns = {}
    for e in engines:
        info = {}
        try:
            fn, info = make_engine(e, model, args, torch)
            with torch.no_grad():
                out = fn(*args)
            if e != "eager":
                info["max_abs_err"] = max_abs_err(out, ref, torch)
            fns[e] = fn
        except Exception as exc:  # noqa: BLE001
            info["error"] = _err(exc)
            if os.environ.get("BENCH_TRACEBACK"):
                traceback.print_exc()
        result["engines"][e] = info
        print(f"  {name}/{e}: " + (f"error: {info['error']}" if "error" in info else "ready"), flush=True)
    n = runs if runs else DEFAULT_RUNS[name]
    inner = INNER.get(name, 1)
    attempts = []
    for attempt in range(1 + retries):
        quiet = wait_quiet(wait_s) if wait_s > 0 else None
        load = CpuLoad()
        timing = time_engines(dict(fns), args, n, inner, torch)
        load = load.result()
        attempts.append({"timing": timing, "load": load, "wait_quiet": quiet})
        print(f"  {name}: timed with {load.get('other_cpu_pct', '?')}% other CPU load", flush=True)
        if load.get("other_cpu_pct", 0.0) <= RETRY_ABOVE_PCT:
            break
    best = min(attempts, key=lambda a: a["load"].get("other_cpu_pct", 0.0))
    timing = best["timing"]
    result["load"] = best["load"]
    result["attempts"] = [{"load": a["load"], "wait_quiet": a["wait_quiet"]} for a in attempts]
    for e, t in timing.items():
        result["engines"][e].update(t)
    eager = result["engines"].get("eager", {}).get("median_s")
    for e in COMPILED_ENGINES:
        r = result["engines"].get(e, {})
        if eager and r.get("median_s"):
            r["speedup_vs_eager"] = eager / r["median_s"]
    ind, brz = (result["engines"].get(e, {}).get("median_s") for e in ("inductor", "braze"))
    if ind and brz:
        result["braze_over_inductor_speedup"] = ind / brz
    if name == "softmax_layernorm":
        x = args[0]
        nbytes = 2 * x.numel() * x.element_size()  # read x, write y
        result["bytes_moved"] = nbytes
        for e, r in result["engines"].items():
            if r.get("median_s"):
                r["gb_per_s"] = nbytes / r["median_s"] / 1e9
    for e, r in result["engines"].items():
        if "median_s" in r:
            print(f"  {name}/{e}: {r['median_s'] * 1e3:.3f} ms median of {r['calls']} calls", flush=True)
    del fns
    torch._dynamo.reset()
    return result


# --------------------------------------------------------------------------- compile time


def count_output_code(src: str) -> dict:
    """Count what one Inductor output-code module does.

    kernels: C++ kernels it defines (`name = async_compile.cpp_pybinding(...)`);
    kernel_calls: calls of them in call(); extern_calls: calls of library
    code in call() (extern_kernels.mm/addmm/bmm, aten fallbacks such as SDPA).

    torch._inductor.metrics.generated_kernel_count is not this on CPU: it
    counts every C++ kernel object codegen creates (one per fused loop nest,
    plus ones it discards), while the C++ backend emits several loop nests
    into one function. In torch 2.13: 64 for small_chains (1 kernel with 64
    loops), 9 for mlp (2 kernels, 4 `omp for` loops).
    """
    names = re.findall(r"^(\w+) = async_compile\.cpp(?:_pybinding)?\(", src, flags=re.M)
    m = re.search(r"\n\s*def call\(.*?\n(.*?)(?:\nrunner = |\ndef get_args|\Z)", src, flags=re.S)
    body = m.group(1) if m else ""
    calls = sum(len(re.findall(rf"^\s+{re.escape(n)}\(", body, flags=re.M)) for n in names)
    ext = re.findall(r"^\s+(?:\w+\s*=\s*)?((?:extern_kernels|torch\.ops\.\w+|aten)\.[\w.]+)\(", body, flags=re.M)
    extern = {}
    for e in ext:
        extern[e] = extern.get(e, 0) + 1
    return {"kernels": len(names), "kernel_calls": calls, "extern_calls": extern,
            "omp_parallel_regions": len(re.findall(r"#pragma omp parallel\b", src)),
            "omp_for_loops": len(re.findall(r"#pragma omp for\b", src))}


def compile_time_child(name: str, engine: str) -> dict:
    """Runs in a fresh subprocess whose env names the cache dirs."""
    warnings.filterwarnings("ignore")
    import torch

    import models

    torch.set_num_threads(THREADS)
    model, args = models.build(name)
    res = {"model": name, "engine": engine, "pid": os.getpid()}
    try:
        if engine == "inductor":
            import torch._inductor.config as iconfig
            import torch._inductor.metrics as metrics
            from torch._dynamo.utils import counters

            res["fx_graph_cache_default"] = bool(iconfig.fx_graph_cache)
            iconfig.fx_graph_cache = True
            res["autograd_cache"] = bool(torch._functorch.config.enable_autograd_cache)
            metrics.reset()
            counters.clear()
            t0 = time.perf_counter()
            fn = torch.compile(model, backend="inductor")
            with torch.no_grad():
                fn(*args)
            res["compile_s"] = time.perf_counter() - t0
            res["generated_kernel_count"] = metrics.generated_kernel_count
            res["generated_cpp_vec_kernel_count"] = metrics.generated_cpp_vec_kernel_count
            res["fxgraph_cache"] = {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")}
            res["aotautograd_cache"] = {k: v for k, v in counters["aot_autograd"].items() if "cache" in k}
            from torch._inductor.codecache import PyCodeCache

            graphs = []
            for mod in PyCodeCache.modules:
                path = getattr(mod, "__file__", None)
                if not path:
                    continue
                with open(path) as f:
                    src = f.read()
                if "def call(" in src and "async_compile" in src:
                    graphs.append({"file": path, **count_output_code(src)})
            res["graphs"] = len(graphs)
            res["kernels"] = sum(g["kernels"] for g in graphs)
            res["kernel_calls"] = sum(g["kernel_calls"] for g in graphs)
            res["omp_parallel_regions"] = sum(g["omp_parallel_regions"] for g in graphs)
            res["omp_for_loops"] = sum(g["omp_for_loops"] for g in graphs)
            extern = {}
            for g in graphs:
                for k, v in g["extern_calls"].items():
                    extern[k] = extern.get(k, 0) + v
            res["extern_calls"] = extern
            res["gemms"] = sum(v for k, v in extern.items()
                               if re.search(r"\b(mm|addmm|bmm|baddbmm|_linear\w*|linear)$", k))
            res["output_code"] = [g["file"] for g in graphs]
        elif engine == "braze":
            import braze

            t0 = time.perf_counter()
            fn = braze.compile(model, args, target="cpu")
            t1 = time.perf_counter()
            with torch.no_grad():
                fn(*args)
            t2 = time.perf_counter()
            res["compile_call_s"] = t1 - t0
            res["first_call_s"] = t2 - t1
            res["compile_s"] = t2 - t0
            stats = dict(fn.stats)
            res["stats"] = stats
            res["kernels"] = stats.get("kernels")
            res["gemms"] = stats.get("gemms")
            res["cache_hit"] = stats.get("cache_hit")
        else:
            raise ValueError(engine)
    except Exception as exc:  # noqa: BLE001
        res["error"] = _err(exc)
    return res


def run_child(name, engine, env, timeout=900) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--compile-time-child", name, engine]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    wall = time.perf_counter() - t0
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("COMPILE-JSON "):
            res = json.loads(line.split(" ", 1)[1])
            res["process_wall_s"] = wall
            return res
    tail = [line for line in (p.stderr or p.stdout).splitlines() if line.strip()]
    return {"error": f"child exited {p.returncode}: {tail[-1].strip()[:300] if tail else ''}",
            "stderr_tail": "\n".join(tail[-30:])}


def compile_times(names, engines, wait_s=0.0, keep_dirs=False) -> dict:
    out = {}
    for name in names:
        out[name] = {}
        for engine in engines:
            root = tempfile.mkdtemp(prefix=f"braze-bench-{name}-{engine}-")
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(root, "inductor"),
                       BRAZE_CACHE_DIR=os.path.join(root, "braze"), OMP_NUM_THREADS=str(THREADS))
            env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
            env.pop("TORCHINDUCTOR_FX_GRAPH_CACHE", None)
            runs = {}
            for tag in ("cold", "warm"):
                quiet = wait_quiet(wait_s) if wait_s > 0 else None
                load = CpuLoad()
                r = run_child(name, engine, env)
                # "other" includes this child's compile workers if it did not reap them.
                r["load"] = load.result()
                r["wait_quiet"] = quiet
                runs[tag] = r
            cold, warm = runs["cold"], runs["warm"]
            out[name][engine] = {"cold": cold, "warm": warm}
            if not keep_dirs:
                shutil.rmtree(root, ignore_errors=True)
            for tag, r in (("cold", cold), ("warm", warm)):
                msg = f"error: {r['error']}" if "error" in r else f"{r['compile_s']:.2f} s"
                print(f"  compile {name}/{engine} {tag}: {msg}", flush=True)
    return out


# --------------------------------------------------------------------------- report


def fmt(v, spec, suffix=""):
    return "—" if v is None else format(v, spec) + suffix


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def markdown(res) -> str:
    m = res["machine"]
    lines = ["## CPU: eager vs Inductor vs braze", ""]
    lines.append(f"`{res['command']}`")
    lines.append("")
    load = ", ".join(f"{x:.2f}" for x in m["loadavg_start"])
    load_end = ", ".join(f"{x:.2f}" for x in m.get("loadavg_end", []))
    lines.append(
        f"Measured {m['date'][:10]} on {m['cpu_model']} ({m['logical_cpus']} logical CPUs, "
        f"{', '.join(m['cpu_isa'])}), torch {m['torch']}, braze at git {m.get('git_commit') or '?'}, "
        f"{res['threads']} threads "
        f"(`torch.set_num_threads({res['threads']})`), float32, `torch.no_grad()`, eval mode, "
        f"one process, the same inputs for every engine. Median per-call latency of the timed calls "
        f"after ≥{WARMUP_S} s warm-up per engine; the engines take turns, {ROUNDS} timed blocks each, "
        f"every block after a {PAUSE_S} s pause and 2 untimed calls (so one engine's spinning thread pool "
        f"does not slow the next). "
        f"1-minute load average at start / end: {load} / {load_end} (other work on the machine "
        f"slows every figure)." + (
            " Before the copy, before timing each model and before each compile-time subprocess, the runner waited for other processes to use "
            "< 10% of the CPUs over 5 s (`--wait-quiet`)" if res.get("wait_quiet") else "") + (
            f"; a model timed while they took more was timed again, up to {res['retries']} times, "
            "keeping the least disturbed attempt (`--retries`)" if res.get("retries") else "") + (
            "." if res.get("wait_quiet") or res.get("retries") else ""))
    lines.append("")
    models = res["models"]

    def cell_ms(r):
        if r is None:
            return "—"
        if "error" in r:
            return "error"
        return fmt(r.get("median_s") and r["median_s"] * 1e3, ".3f")

    lines.append("| model | eager ms | Inductor ms | braze ms | Inductor speedup | braze speedup | braze vs Inductor "
                 "| max abs err Inductor | max abs err braze | timed calls | other CPU load |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    errors = {}
    for name, r in models.items():
        e = r["engines"]
        for eng, er in e.items():
            if "error" in er:
                errors.setdefault(er["error"], []).append(f"{name}/{eng}")
        calls = sorted({er["calls"] for er in e.values() if "calls" in er})
        lines.append(
            f"| {name} | {cell_ms(e.get('eager'))} "
            f"| {cell_ms(e.get('inductor'))} | {cell_ms(e.get('braze'))} "
            f"| {fmt(e.get('inductor', {}).get('speedup_vs_eager'), '.2f', '×')} "
            f"| {fmt(e.get('braze', {}).get('speedup_vs_eager'), '.2f', '×')} "
            f"| {fmt(r.get('braze_over_inductor_speedup'), '.2f', '×')} "
            f"| {fmt(e.get('inductor', {}).get('max_abs_err'), '.1e')} "
            f"| {fmt(e.get('braze', {}).get('max_abs_err'), '.1e')} "
            f"| {'/'.join(str(c) for c in calls)} | {fmt(r.get('load', {}).get('other_cpu_pct'), '.0f', '%')} |")
    gm = res.get("geomean_speedup_vs_eager", {})
    if gm:
        lines.append(
            f"| **geomean {', '.join(gm.get('models', []))}** | | | | **{fmt(gm.get('inductor'), '.2f', '×')}** "
            f"| **{fmt(gm.get('braze'), '.2f', '×')}** | | | | | |")
    lines.append("")
    lines.append("Speedup = eager time / engine time; braze vs Inductor = Inductor time / braze time "
                 "(above 1: braze faster). Timed calls: per engine. *Other CPU load*: CPU time other processes "
                 "(and hypervisor steal) took while the model was timed, in % of both CPUs (from /proc/stat); "
                 "with 2 threads on 2 CPUs, any of it stalls the threads' barriers and inflates the medians.")
    lines.append("")
    if "overhead" in models:
        e = models["overhead"]["engines"]
        cells = []
        for eng in ENGINES:
            r = e.get(eng)
            if r is not None:
                cells.append(f"{eng} {r['median_s'] * 1e6:.2f} µs" if r.get("median_s") else f"{eng} error")
        lines.append(f"Per-call overhead (model `overhead`: 10 inputs of 16 floats summed, median of batches of "
                     f"{INNER['overhead']} calls): " + ", ".join(cells) + ".")
        lines.append("")
    bw = res.get("copy_bandwidth")
    if bw:
        lines.append(f"Copy bandwidth: **{bw['gb_per_s']:.1f} GB/s** ({bw['method']}; "
                     f"{bw['gb_per_s_at_min']:.1f} GB/s at the fastest copy; other CPU load "
                     f"{fmt(bw.get('load', {}).get('other_cpu_pct'), '.0f', '%')}).")
        lines.append("")
    if "softmax_layernorm" in models:
        r = models["softmax_layernorm"]
        lines.append(f"`softmax_layernorm` is memory-bound: bytes moved = read x + write y = "
                     f"{r['bytes_moved'] / 1e6:.1f} MB per call.")
        lines.append("")
        lines.append("| engine | ms | GB/s | of copy bandwidth |")
        lines.append("| --- | ---: | ---: | ---: |")
        for eng in ENGINES:
            er = r["engines"].get(eng)
            if er is None:
                continue
            if "gb_per_s" in er:
                frac = f"{er['gb_per_s'] / bw['gb_per_s'] * 100:.0f}%" if bw else "—"
                lines.append(f"| {eng} | {er['median_s'] * 1e3:.3f} | {er['gb_per_s']:.1f} | {frac} |")
            else:
                lines.append(f"| {eng} | error | — | — |")
        lines.append("")
    ct = res.get("compile_time")
    if ct:
        lines.append("Compile time: `torch.compile(...)` / `braze.compile(...)` to the end of the first call, in a "
                     "fresh subprocess (`run.py --compile-time-child MODEL ENGINE`). *Cold*: fresh, empty "
                     "`TORCHINDUCTOR_CACHE_DIR` and `BRAZE_CACHE_DIR` (Inductor's FX graph cache on, its default); "
                     "*warm*: a second fresh subprocess with the same, now populated, directories. Includes "
                     "Dynamo tracing and torch's lazy imports of its compiler on the first compile in a process. "
                     "*In-process*: the same in the benchmark process itself, with a cold cache (for every model "
                     "but the first, after the models before it were compiled there, so without most one-time "
                     "start-up costs). "
                     "Kernels: generated C++ kernels (Inductor: `async_compile.cpp_pybinding` definitions in its "
                     "output code; braze: `compiled.stats[\"kernels\"]`); GEMMs: BLAS calls (Inductor: "
                     "`extern_kernels.mm/addmm/bmm` in its output code; braze: `compiled.stats[\"gemms\"]`); "
                     "`metrics` is `torch._inductor.metrics.generated_kernel_count`, which on CPU is not the "
                     "number of kernels: it counts every C++ kernel object codegen creates (one per fused loop "
                     "nest, plus discarded ones), e.g. 64 for small_chains' single kernel of 64 loops.")
        lines.append("")
        lines.append("| model | engine | cold s | warm s | in-process s | warm cache hit | kernels | GEMMs "
                     "| other library calls | `metrics` count |")
        lines.append("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: |")
        for name, per in ct.items():
            for eng, cw in per.items():
                cold, warm = cw["cold"], cw["warm"]
                ip = res["models"].get(name, {}).get("engines", {}).get(eng, {})
                inproc = (ip.get("compile_s") or 0.0) + ip["first_call_s"] if "first_call_s" in ip else None
                if "error" in cold:
                    errors.setdefault(cold["error"], []).append(f"{name}/{eng} compile")
                    lines.append(f"| {name} | {eng} | error | {'error' if 'error' in warm else fmt(warm.get('compile_s'), '.2f')} "
                                 f"| {fmt(inproc, '.2f')} | — | — | — | — | — |")
                    continue
                if "error" in warm:
                    errors.setdefault(warm["error"], []).append(f"{name}/{eng} warm compile")
                if eng == "inductor":
                    hit = warm.get("fxgraph_cache", {}).get("fxgraph_cache_hit", 0)
                    miss = warm.get("fxgraph_cache", {}).get("fxgraph_cache_miss", 0)
                    hit_s = f"FX graph cache {hit} hit / {miss} miss"
                    other = ", ".join(f"{k.split('.')[-1] if k.startswith('extern') else k} ×{v}"
                                      for k, v in sorted(cold.get("extern_calls", {}).items())
                                      if not re.search(r"\b(mm|addmm|bmm|baddbmm)$", k))
                    metric = cold.get("generated_kernel_count")
                else:
                    hit_s = str(warm.get("cache_hit"))
                    other = ""
                    metric = None
                lines.append(f"| {name} | {eng} | {fmt(cold.get('compile_s'), '.2f')} "
                             f"| {'error' if 'error' in warm else fmt(warm.get('compile_s'), '.2f')} "
                             f"| {fmt(inproc, '.2f')} | {hit_s} "
                             f"| {fmt(cold.get('kernels'), 'd')} | {fmt(cold.get('gemms'), 'd')} | {other or '—'} "
                             f"| {fmt(metric, 'd')} |")
        lines.append("")
    if errors:
        lines.append("Errors:")
        lines.append("")
        for msg, where in errors.items():
            lines.append(f"- {', '.join(where)}: `{msg}`")
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(DEFAULT_RUNS), help="comma-separated, default all: %(default)s")
    p.add_argument("--engines", default=",".join(ENGINES), help="comma-separated, default %(default)s")
    p.add_argument("--runs", type=int, default=None,
                   help="timed samples per engine and model (default per model: "
                        + ", ".join(f"{k} {v}" for k, v in DEFAULT_RUNS.items()) + ")")
    p.add_argument("--skip-compile-time", action="store_true", help="skip the cold/warm compile-time subprocesses")
    p.add_argument("--json", default=os.path.join(HERE, "results.json"), help="default %(default)s")
    p.add_argument("--md", default=os.path.join(HERE, "RESULTS_section.md"), help="default %(default)s")
    p.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                   help="before the copy bandwidth and before timing each model, wait up to S seconds for "
                        "other processes to use < 10%% of the CPUs (over 5 s)")
    p.add_argument("--retries", type=int, default=0,
                   help="time a model up to this many more times while other processes took > 10%% of the CPUs; "
                        "the attempt with the least other load is kept")
    p.add_argument("--render", metavar="JSON", help="only print and write the markdown of an earlier results JSON")
    p.add_argument("--compile-time-child", nargs=2, metavar=("MODEL", "ENGINE"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)

    if a.compile_time_child:
        res = compile_time_child(*a.compile_time_child)
        print("COMPILE-JSON " + json.dumps(res, default=str), flush=True)
        return 0

    if a.render:
        with open(a.render) as f:
            md = markdown(json.load(f))
        print(md)
        with open(a.md, "w") as f:
            f.write(md + "\n")
        return 0

    import models as models_mod

    names = [n for n in a.models.split(",") if n]
    engines = [e for e in a.engines.split(",") if e]
    for n in names:
        if n not in models_mod.MODELS:
            p.error(f"unknown model {n!r}; choose from {', '.join(models_mod.MODELS)}")
    for e in engines:
        if e not in ENGINES:
            p.error(f"unknown engine {e!r}; choose from {', '.join(ENGINES)}")

    # This process's compiler caches: fresh temp dirs, unless the caller chose.
    tmp_root = tempfile.mkdtemp(prefix="braze-bench-main-")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tmp_root, "inductor"))
    os.environ.setdefault("BRAZE_CACHE_DIR", os.path.join(tmp_root, "braze"))
    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(THREADS)
    rel = os.path.relpath(os.path.abspath(__file__), REPO)
    args_str = " ".join(shlex.quote(x) for x in (sys.argv[1:] if argv is None else argv))
    res = {
        "command": f".venv/bin/python {rel}" + (f" {args_str}" if args_str else ""),
        "threads": THREADS,
        "machine": machine_info(torch),
        "warmup": {"min_seconds": WARMUP_S, "min_calls": WARMUP_MIN},
        "retries": a.retries,
        "models": {},
    }
    if a.wait_quiet > 0:
        print(f"waiting up to {a.wait_quiet:.0f} s for a quiet machine ...", flush=True)
        res["wait_quiet"] = wait_quiet(a.wait_quiet)
        print(f"  {res['wait_quiet']}", flush=True)
    t_start = time.perf_counter()
    print(f"copy bandwidth ({COPY_MB} MB buffers) ...", flush=True)
    res["copy_bandwidth"] = copy_bandwidth(torch)
    print(f"  {res['copy_bandwidth']['gb_per_s']:.2f} GB/s", flush=True)

    for name in names:
        print(f"{name}: {models_mod.MODELS[name]}", flush=True)
        res["models"][name] = bench_model(name, engines, a.runs, torch, models_mod, a.wait_quiet, a.retries)

    gm = {"models": [n for n in GEOMEAN_MODELS if n in res["models"]]}
    if gm["models"]:
        for e in COMPILED_ENGINES:
            sp = [res["models"][n]["engines"].get(e, {}).get("speedup_vs_eager") for n in gm["models"]]
            gm[e] = geomean(sp) if all(sp) else None
            if not all(sp):
                gm[e + "_note"] = "missing on some models"
        res["geomean_speedup_vs_eager"] = gm

    if not a.skip_compile_time:
        print("compile time (fresh subprocesses) ...", flush=True)
        res["compile_time"] = compile_times(names, [e for e in engines if e in COMPILED_ENGINES], a.wait_quiet)

    res["machine"]["loadavg_end"] = list(os.getloadavg())
    res["total_wall_s"] = time.perf_counter() - t_start
    shutil.rmtree(tmp_root, ignore_errors=True)

    md = markdown(res)
    print()
    print(md)
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1, default=str)
    with open(a.md, "w") as f:
        f.write(md + "\n")
    print(f"wrote {a.json} and {a.md} ({res['total_wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
