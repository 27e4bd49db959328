#!/usr/bin/env python3
"""Model-zoo benchmark: eager PyTorch vs torch.compile (Inductor) vs braze.

    .venv/bin/python benchmarks/models/run.py [--models resnet18,bert]
        [--size bench|small] [--sequence N] [--dynamo] [--engines LIST]
        [--threads N] [--budget S] [--dtype bfloat16] [--tolerance T] [--wait-quiet S]
        [--retries K] [--json PATH] [--md PATH] [--render JSON]

Every model of `braze.testing.zoo.ZOO` (random weights, eval mode) at the
`bench` size (images 224, text: batch 2, sequence 128, hidden 768, 2 layers)
or `small`, in one process, with the same weights and inputs for every
engine, under torch.no_grad(), 2 threads (--threads), in float32 or
(--dtype) with bf16/f16 weights and floating inputs:

  * eager: the model itself;
  * inductor: torch.compile(model) (default backend);
  * braze: braze.compile(model, args, kwargs=kwargs);
  * dynamo (--dynamo): torch.compile(model, backend="braze").

Each compiled engine's output (the first tensor, or `last_hidden_state`) is
checked against eager: max relative error = max |out - eager| / max |eager|;
above --tolerance it is reported as a MISMATCH. Timing reuses
benchmarks/cpu/run.py's `time_engines` (warm-up, then the engines take turns
in 5 blocks, each after a pause; median per call); the number of timed calls
per engine is chosen from the eager time so a model costs about --budget
seconds of timed calls per engine (10 to 200 calls). Compile times are
in-process, with fresh, empty TORCHINDUCTOR_CACHE_DIR and BRAZE_CACHE_DIR
(every model after the first is compiled in a process that has already
loaded the compilers).

Writes benchmarks/models/results.json (after every model, so an interrupted
run keeps what it measured) and benchmarks/models/results.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CPU_DIR = os.path.join(os.path.dirname(HERE), "cpu")


def _load_cpu_runner():
    """benchmarks/cpu/run.py as a module (its name would clash with this file's)."""
    spec = importlib.util.spec_from_file_location("braze_bench_cpu_run", os.path.join(CPU_DIR, "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # puts benchmarks/cpu on sys.path for its `machine` import
    return module


cpu = _load_cpu_runner()
from machine import CpuLoad, machine_info, wait_quiet  # noqa: E402  (benchmarks/cpu/machine.py)

THREADS = cpu.THREADS
ENGINES = ("eager", "inductor", "braze", "dynamo")
COMPILED = ("inductor", "braze", "dynamo")
LABEL = {"eager": "eager", "inductor": "Inductor", "braze": "braze", "dynamo": "braze via torch.compile"}
BUDGET_S = 2.0  # default timed seconds per engine and model
MIN_RUNS, MAX_RUNS = 10, 200
# A model whose eager call takes longer than HEAVY_S gets fewer untimed calls
# (warm-up at least HEAVY_WARMUP calls, HEAVY_ROUNDS blocks, each after 2
# untimed calls) and at least HEAVY_MIN_RUNS timed ones, so a slow model on a
# loaded machine does not take most of the run.
HEAVY_S = 0.25
HEAVY_WARMUP, HEAVY_ROUNDS, HEAVY_MIN_RUNS = 2, 3, 6
TOLERANCE = 1e-3
# bf16 keeps 8 bits of mantissa: two orders of summation differ by a few of its ulps (2^-8 = 4e-3) after a layer.
HALF_TOLERANCE = 5e-2


# --------------------------------------------------------------------------- engines


def make_engine(engine, model, args, kwargs, torch):
    """(callable taking no arguments, info) for one engine; raises on failure."""
    info = {}
    if engine == "eager":
        return lambda: model(*args, **kwargs), info
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        if engine == "inductor":
            compiled = torch.compile(model)
        elif engine == "dynamo":
            compiled = torch.compile(model, backend="braze")
        elif engine == "braze":
            import braze

            compiled = braze.compile(model, args, kwargs=kwargs)
            info["compile_s"] = time.perf_counter() - t0
            info["stats"] = {k: v for k, v in compiled.stats.items() if k != "source"}
        else:
            raise ValueError(engine)
        t1 = time.perf_counter()
        compiled(*args, **kwargs)
        info["first_call_s"] = time.perf_counter() - t1
        info["total_compile_s"] = time.perf_counter() - t0
    braze_warnings = sorted({str(w.message) for w in caught if str(w.message).startswith("braze")})
    if braze_warnings:  # the dynamo backend ran some graph in eager instead
        info["warnings"] = braze_warnings
    return lambda: compiled(*args, **kwargs), info


def first_tensor(out, torch):
    """The tensor an output is checked by: itself, `last_hidden_state`, or
    the first tensor of a tuple, list or dict (ModelOutput is an OrderedDict)."""
    if isinstance(out, torch.Tensor):
        return out
    hidden = getattr(out, "last_hidden_state", None)
    if isinstance(hidden, torch.Tensor):
        return hidden
    items = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else ()
    for item in items:
        try:
            return first_tensor(item, torch)
        except TypeError:
            continue
    raise TypeError(f"no tensor in output of type {type(out).__name__}")


def compare(out, ref, torch) -> dict:
    o, r = first_tensor(out, torch), first_tensor(ref, torch)
    if tuple(o.shape) != tuple(r.shape) or o.dtype != r.dtype:
        raise ValueError(f"output {tuple(o.shape)} {o.dtype}, eager {tuple(r.shape)} {r.dtype}")
    diff = (o.double() - r.double()).abs().max().item() if r.numel() else 0.0
    scale = r.double().abs().max().item() if r.numel() else 0.0
    rel = diff / scale if scale else diff
    return {"max_abs_err": diff, "max_rel_err": rel}


def choose_runs(call, torch, budget_s) -> dict:
    """Timed calls per engine, warm-up calls and timed blocks, from one
    eager call's time (after a first one)."""
    with torch.no_grad():
        call()
        t0 = time.perf_counter()
        call()
        t = time.perf_counter() - t0
    heavy = t > HEAVY_S
    return {"eager_probe_s": t, "runs": max(HEAVY_MIN_RUNS if heavy else MIN_RUNS, min(MAX_RUNS, int(budget_s / t))),
            "warmup_min_calls": HEAVY_WARMUP if heavy else cpu.WARMUP_MIN,
            "rounds": HEAVY_ROUNDS if heavy else cpu.ROUNDS}


def time_engines(fns, plan, torch):
    """benchmarks/cpu/run.py's time_engines with this model's warm-up and
    block counts (set on this process's own copy of that module)."""
    saved = cpu.WARMUP_MIN, cpu.ROUNDS
    cpu.WARMUP_MIN, cpu.ROUNDS = plan["warmup_min_calls"], plan["rounds"]
    try:
        return cpu.time_engines(dict(fns), (), plan["runs"], 1, torch)
    finally:
        cpu.WARMUP_MIN, cpu.ROUNDS = saved


# --------------------------------------------------------------------------- one model


def bench_model(entry, size, engines, torch, a) -> dict:
    model, args, kwargs = entry.make(size, dtype=getattr(torch, a.dtype))
    with torch.no_grad():
        ref = model(*args, **kwargs)
    result = {"family": entry.family, "engines": {}}
    if entry.family == "text":
        result["input"] = {k: list(v.shape) for k, v in kwargs.items()}
    else:
        result["input"] = {"image": list(args[0].shape)}
    fns = {}
    for e in engines:
        info = {}
        try:
            fn, info = make_engine(e, model, args, kwargs, torch)
            with torch.no_grad():
                out = fn()
            if e != "eager":
                info.update(compare(out, ref, torch))
                info["mismatch"] = info["max_rel_err"] > a.tolerance
            fns[e] = fn
        except Exception as exc:  # noqa: BLE001
            info["error"] = cpu._err(exc)
            if os.environ.get("BENCH_TRACEBACK"):
                traceback.print_exc()
        result["engines"][e] = info
        if "error" in info:
            msg = f"error: {info['error']}"
        elif info.get("mismatch"):
            msg = f"!!! MISMATCH: max relative error {info['max_rel_err']:.2e} > {a.tolerance:g} !!!"
        else:
            msg = "ready" + (f" (rel err {info['max_rel_err']:.1e})" if "max_rel_err" in info else "")
        if "total_compile_s" in info:
            msg += f", compile + first call {info['total_compile_s']:.1f} s"
        if info.get("warnings"):
            msg += f"; {len(info['warnings'])} braze warning(s): {info['warnings'][0][:200]}"
        print(f"  {entry.name}/{e}: {msg}", flush=True)
    if "eager" not in fns:
        return result
    plan = result["timing_plan"] = choose_runs(fns["eager"], torch, a.budget)
    runs = plan["runs"]
    attempts = []
    for _ in range(1 + a.retries):
        quiet = wait_quiet(a.wait_quiet) if a.wait_quiet > 0 else None
        load = CpuLoad()
        timing = time_engines(fns, plan, torch)
        load = load.result()
        attempts.append({"timing": timing, "load": load, "wait_quiet": quiet})
        print(f"  {entry.name}: {runs} timed calls per engine, {load.get('other_cpu_pct', '?')}% other CPU load",
              flush=True)
        if load.get("other_cpu_pct", 0.0) <= cpu.RETRY_ABOVE_PCT:
            break
    best = min(attempts, key=lambda x: x["load"].get("other_cpu_pct", 0.0))
    result["load"] = best["load"]
    result["attempts"] = [{"load": x["load"], "wait_quiet": x["wait_quiet"]} for x in attempts]
    for e, t in best["timing"].items():
        result["engines"][e].update(t)
    eng = result["engines"]
    eager = eng["eager"].get("median_s")
    for e in COMPILED:
        if eng.get(e, {}).get("median_s") and eager:
            eng[e]["speedup_vs_eager"] = eager / eng[e]["median_s"]
    if eng.get("braze", {}).get("median_s") and eng.get("inductor", {}).get("median_s"):
        result["braze_vs_inductor"] = eng["inductor"]["median_s"] / eng["braze"]["median_s"]
    stats = eng.get("braze", {}).get("stats")
    if stats and stats.get("captured_ops"):
        result["extern_pct"] = 100.0 * stats["externs"] / stats["captured_ops"]
    line = ", ".join(f"{e} {eng[e]['median_s'] * 1e3:.2f} ms" for e in eng if eng[e].get("median_s"))
    print(f"  {entry.name}: {line}", flush=True)
    return result


def geomeans(models) -> dict:
    """Geometric means of slow time / fast time over the models both ran,
    from medians and from minima."""
    out = {}
    for fast, slow in (("inductor", "eager"), ("braze", "eager"), ("dynamo", "eager"), ("braze", "inductor")):
        pairs = [(r["engines"][fast], r["engines"][slow]) for r in models.values()
                 if r["engines"].get(fast, {}).get("median_s") and r["engines"].get(slow, {}).get("median_s")]
        if pairs:
            out[f"{fast}_vs_{slow}"] = {
                key[:-2] if key == "median_s" else "min": cpu.geomean([s[key] / f[key] for f, s in pairs])
                for key in ("median_s", "min_s")} | {"models": len(pairs)}
    return out


# --------------------------------------------------------------------------- report


def markdown(res) -> str:
    fmt = cpu.fmt
    m = res["machine"]
    dyn = any("dynamo" in r["engines"] for r in res["models"].values())
    s = res["size"]
    lines = [f"## Model zoo: eager vs Inductor vs braze ({res['size_name']})", "", f"`{res['command']}`", ""]
    lines.append(
        f"Measured {m['date'][:16]} on {m['cpu_model']} ({m['logical_cpus']} logical CPUs), torch {m['torch']}, "
        f"braze at git {m.get('git_commit') or '?'}, {res['threads']} threads, {res.get('dtype', 'float32')}, "
        f"`torch.no_grad()`, eval mode, random weights (`braze.testing.zoo`), one process, the same inputs for every engine. Vision: "
        f"batch {s['batch']} × 3 × {s['image']}²; text: batch {s['batch']} × sequence {s['sequence']} "
        f"(first row padded by a quarter), hidden {s['hidden']}, {s['layers']} layers. Median per-call latency; "
        f"timing as in `benchmarks/cpu/run.py` (warm-up, engines in turns in {cpu.ROUNDS} blocks); timed calls "
        f"per engine chosen so each engine gets ≈{res['budget_s']:g} s (10 to 200; a model whose eager call takes over {HEAVY_S:g} s: at least {HEAVY_MIN_RUNS}, in {HEAVY_ROUNDS} blocks, warm-up ≥ {HEAVY_WARMUP} calls). 1-minute load average at "
        f"start / end: {', '.join(f'{x:.2f}' for x in m['loadavg_start'])} / "
        f"{', '.join(f'{x:.2f}' for x in m.get('loadavg_end', []))}"
        + (f"; before timing each model the runner waited up to {res['wait_quiet_s']:g} s for other processes "
           f"to use < 10% of the CPUs" if res.get("wait_quiet_s") else "") + ".")
    lines.append("")

    def ms(r):
        if r is None:
            return "—"
        if "error" in r:
            return "error"
        if not r.get("median_s"):
            return "—"
        return f"{r['median_s'] * 1e3:.2f} ({r['min_s'] * 1e3:.2f})"

    def speedup(fast, slow, key):  # slow time / fast time
        return slow[key] / fast[key] if fast and slow and fast.get(key) and slow.get(key) else None

    def sp(fast, slow):
        med, low = speedup(fast, slow, "median_s"), speedup(fast, slow, "min_s")
        return "—" if med is None else f"{med:.2f}× ({low:.2f}×)"

    def err(r):
        if not r or "max_rel_err" not in r:
            return "—"
        return f"**{r['max_rel_err']:.1e} MISMATCH**" if r.get("mismatch") else f"{r['max_rel_err']:.0e}"

    head = "| model | eager ms | Inductor ms | braze ms |" + (" braze via torch.compile ms |" if dyn else "")
    head += (" Inductor / eager | braze / eager | braze / Inductor | rel err Inductor | rel err braze |"
             + (" rel err braze via torch.compile |" if dyn else "")
             + " kernels | GEMMs | convs | externs (% of ops) | compile s braze / Inductor | other CPU load |")
    lines.append(head)
    lines.append("| --- |" + " ---: |" * (head.count("|") - 2))
    errors = {}
    for name, r in res["models"].items():
        e = r["engines"]
        for eng, er in e.items():
            if "error" in er:
                errors.setdefault(er["error"], []).append(f"{name}/{eng}")
        st = e.get("braze", {}).get("stats") or {}
        ext = f"{st['externs']} ({r['extern_pct']:.0f}%)" if "extern_pct" in r else fmt(st.get("externs"), "d")
        cells = [name, ms(e.get("eager")), ms(e.get("inductor")), ms(e.get("braze"))]
        if dyn:
            cells.append(ms(e.get("dynamo")))
        cells += [sp(e.get("inductor"), e.get("eager")), sp(e.get("braze"), e.get("eager")),
                  sp(e.get("braze"), e.get("inductor")),
                  err(e.get("inductor")), err(e.get("braze"))]
        if dyn:
            cells.append(err(e.get("dynamo")))
        cells += [fmt(st.get("kernels"), "d"), fmt(st.get("gemms"), "d"), fmt(st.get("convolutions"), "d"), ext,
                  f"{fmt(e.get('braze', {}).get('total_compile_s'), '.1f')} / "
                  f"{fmt(e.get('inductor', {}).get('total_compile_s'), '.1f')}",
                  fmt(r.get("load", {}).get("other_cpu_pct"), ".0f", "%")]
        lines.append("| " + " | ".join(cells) + " |")
    gm = res["geomean"] = geomeans(res["models"])
    if gm:
        def g(key):
            med, low = gm.get(key, {}).get("median"), gm.get(key, {}).get("min")
            return "" if med is None else f"**{med:.2f}× ({low:.2f}×)**"

        cells = ["**geomean**", "", "", ""] + ([""] if dyn else [])
        cells += [g("inductor_vs_eager"), g("braze_vs_eager"), g("braze_vs_inductor")]
        cells += [""] * (head.count("|") - 1 - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    extra = ""
    if "dynamo_vs_eager" in gm:
        extra = f"; braze via torch.compile / eager: {gm['dynamo_vs_eager']['median']:.2f}× ({gm['dynamo_vs_eager']['min']:.2f}×)"
    lines.append(
        "Times: median (min) ms per call. *X / eager* = eager time / X time (above 1: X faster than eager); "
        "*braze / Inductor* = Inductor time / braze time (above 1: braze faster); from medians (from minima: "
        "on a loaded machine the minimum is the less disturbed figure). Geomeans over the models both engines ran"
        f"{extra}. *rel err* = max |out − eager| / max |eager| over the first output tensor "
        f"(`last_hidden_state` for transformers); above {res['tolerance']:g} it is a MISMATCH. Kernels, GEMMs, "
        "convs, externs: `braze.compile(...).stats` (externs: aten ops run through torch, % of the captured aten "
        "ops). Compile s: `braze.compile` / `torch.compile` to the end of the first call, in-process, empty "
        "caches. *Other CPU load*: CPU time other processes took while the model was timed, % of all CPUs.")
    lines.append("")
    ext_rows = [(n, r["engines"]["braze"]["stats"]) for n, r in res["models"].items()
                if (r["engines"].get("braze", {}).get("stats") or {}).get("extern_ops")]
    _bullets(lines, "Extern ops (run through torch) per model:", [
        f"{n}: " + ", ".join(f"`{k}` ×{v}" for k, v in sorted(st["extern_ops"].items(), key=lambda kv: -kv[1]))
        for n, st in ext_rows])
    _bullets(lines, "braze warnings (graphs run in eager):", [
        f"{n}/{eng}: " + "; ".join(f"`{w[:200]}`" for w in r["engines"][eng]["warnings"])
        for n, r in res["models"].items() for eng in r["engines"] if r["engines"][eng].get("warnings")])
    _bullets(lines, "Errors:", [f"{', '.join(where)}: `{msg}`" for msg, where in errors.items()])
    return "\n".join(lines)


def _bullets(lines, title, items) -> None:
    if items:
        lines += [title, "", *(f"- {item}" for item in items), ""]


def write_markdown(res, path) -> str:
    md = markdown(res)
    with open(path, "w") as f:
        f.write(md + "\n")
    return md


def write(res, a) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1, default=str)
    return write_markdown(res, a.md)


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    p.add_argument("--size", choices=("bench", "small"), default="bench")
    p.add_argument("--sequence", type=int, default=None, help="text sequence length (default: the size's, 128)")
    p.add_argument("--dynamo", action="store_true", help='also time torch.compile(model, backend="braze")')
    p.add_argument("--engines", default=None, help="comma-separated subset of " + ",".join(ENGINES))
    p.add_argument("--threads", type=int, default=THREADS, help="torch.set_num_threads (default %(default)s)")
    p.add_argument("--budget", type=float, default=BUDGET_S, help="timed seconds per engine (default %(default)s)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                   help="the models' weights and floating inputs (default %(default)s)")
    p.add_argument("--tolerance", type=float, default=None,
                   help=f"max relative error (default {TOLERANCE} in float32, {HALF_TOLERANCE} in halves)")
    p.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                   help="before timing each model, wait up to S seconds for other processes to use < 10%% "
                        "of the CPUs (over 5 s)")
    p.add_argument("--retries", type=int, default=0,
                   help="time a model again, up to K times, while other processes took > 10%% of the CPUs")
    p.add_argument("--json", default=os.path.join(HERE, "results.json"))
    p.add_argument("--md", default=os.path.join(HERE, "results.md"))
    p.add_argument("--render", metavar="JSON", help="only print and write the markdown of an earlier results JSON")
    a = p.parse_args(argv)
    if a.tolerance is None:
        a.tolerance = TOLERANCE if a.dtype == "float32" else HALF_TOLERANCE

    if a.render:
        with open(a.render) as f:
            print(write_markdown(json.load(f), a.md))
        return 0

    tmp_root = tempfile.mkdtemp(prefix="braze-bench-models-")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tmp_root, "inductor"))
    os.environ.setdefault("BRAZE_CACHE_DIR", os.path.join(tmp_root, "braze"))
    warnings.filterwarnings("ignore")
    import dataclasses

    import torch

    from braze.testing import zoo

    torch.set_num_threads(a.threads)
    size = zoo.BENCH if a.size == "bench" else zoo.SMALL
    if a.sequence:
        size = dataclasses.replace(size, sequence=a.sequence)
    names = [n for n in a.models.split(",") if n] or [m.name for m in zoo.ZOO]
    for n in names:
        if n not in zoo.BY_NAME:
            p.error(f"unknown model {n!r}; choose from {', '.join(zoo.BY_NAME)}")
    engines = [e for e in (a.engines or "").split(",") if e] or [e for e in ENGINES if e != "dynamo" or a.dynamo]
    for e in engines:
        if e not in ENGINES:
            p.error(f"unknown engine {e!r}; choose from {', '.join(ENGINES)}")
    if "eager" not in engines:
        engines.insert(0, "eager")

    rel = os.path.relpath(os.path.abspath(__file__), REPO)
    args_str = " ".join(shlex.quote(x) for x in (sys.argv[1:] if argv is None else argv))
    res = {
        "command": f".venv/bin/python {rel}" + (f" {args_str}" if args_str else ""),
        "threads": a.threads,
        "size_name": a.size + (f", sequence {a.sequence}" if a.sequence else ""),
        "size": dataclasses.asdict(size),
        "budget_s": a.budget,
        "tolerance": a.tolerance,
        "dtype": a.dtype,
        "wait_quiet_s": a.wait_quiet,
        "retries": a.retries,
        "machine": machine_info(torch),
        "models": {},
    }
    t_start = time.perf_counter()
    for name in names:
        print(f"{name}:", flush=True)
        try:
            res["models"][name] = bench_model(zoo.BY_NAME[name], size, engines, torch, a)
        except Exception as exc:  # noqa: BLE001  (building the model, or eager itself)
            traceback.print_exc()
            res["models"][name] = {"engines": {"eager": {"error": cpu._err(exc)}}}
        res["geomean"] = geomeans(res["models"])
        res["machine"]["loadavg_end"] = list(os.getloadavg())
        res["total_wall_s"] = time.perf_counter() - t_start
        write(res, a)
    shutil.rmtree(tmp_root, ignore_errors=True)
    md = write(res, a)
    print()
    print(md)
    bad = [f"{n}/{e}" for n, r in res["models"].items() for e, er in r["engines"].items() if er.get("mismatch")]
    if bad:
        print(f"!!! MISMATCH against eager: {', '.join(bad)} !!!")
    print(f"wrote {a.json} and {a.md} ({res['total_wall_s']:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
