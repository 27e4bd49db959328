#!/usr/bin/env python3
"""Load time of an AOT package against a cold compile (braze.aot, docs/aot.md).

    .venv/bin/python benchmarks/aot/load_time.py [--models mlp,block,...] [--json PATH]

Per model of benchmarks/cpu/models.py, three fresh subprocesses of this
script, each with OMP_NUM_THREADS=1 and torch.set_num_threads(1), timing
only the step itself (imports of torch and braze come before the clock):

  * cold compile: `braze.compile(model, args)` with an empty BRAZE_CACHE_DIR
    (capture, passes, emit, the C++ compiler, program build);
  * package: `braze.aot.package(...)` into a temporary directory (a cold
    compile plus writing the package; its time is reported, not compared);
  * load: `braze.aot.load(path)` (hash checks, weights, library, program),
    then the first call, compared with eager.

Times are wall-clock seconds and CPU seconds (the process's and its
children's: the C++ compiler runs as a child). The ratio compile / load is
the target's measure (at least 10x); on a shared machine the CPU-time ratio
is the steadier one. The first call after loading (the template made from
the weights, the thread pools started) is reported apart.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MODELS = ("mlp", "block", "softmax_layernorm", "handwritten_decoder")


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def child(step: str, model_name: str, path: str) -> dict:
    import torch

    import braze
    from braze import aot

    sys.path.insert(0, str(HERE.parent / "cpu"))
    from models import build

    torch.set_num_threads(1)
    model, args = build(model_name)
    wall, cpu = time.perf_counter(), _cpu_seconds()
    if step == "compile":
        braze.compile(model, args)
    elif step == "package":
        aot.package(model, args, path)
    else:
        loaded = aot.load(path)
    result = {"wall": time.perf_counter() - wall, "cpu": _cpu_seconds() - cpu}
    if step == "load":
        started = time.perf_counter()
        output = loaded(*args)
        result["first_call"] = time.perf_counter() - started
        with torch.no_grad():
            result["max_abs_error"] = float((output - model(*args)).abs().max())
    return result


def _run_child(step: str, model: str, path: Path, cache: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", BRAZE_CACHE_DIR=str(cache))
    run = subprocess.run([sys.executable, __file__, "--child", step, model, str(path)],
                         capture_output=True, text=True, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"{step} of {model} failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", nargs=3, metavar=("STEP", "MODEL", "PATH"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(child(*options.child)))
        return
    rows = {}
    print("| model | cold compile s (cpu s) | package s | load s (cpu s) | first call s "
          "| compile / load, wall (cpu) | max abs err |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model in options.models.split(","):
        with tempfile.TemporaryDirectory() as scratch:
            scratch = Path(scratch)
            compiled = _run_child("compile", model, scratch / "unused", scratch / "cache-compile")
            packaged = _run_child("package", model, scratch / "package", scratch / "cache-package")
            loaded = _run_child("load", model, scratch / "package", scratch / "cache-load")
            size = sum(f.stat().st_size for f in (scratch / "package").iterdir())
        rows[model] = {"compile": compiled, "package": packaged, "load": loaded, "package_bytes": size}
        print(f"| {model} | {compiled['wall']:.2f} ({compiled['cpu']:.2f}) | {packaged['wall']:.2f} | "
              f"{loaded['wall']:.3f} ({loaded['cpu']:.3f}) | {loaded['first_call']:.3f} | "
              f"{compiled['wall'] / loaded['wall']:.0f}x ({compiled['cpu'] / loaded['cpu']:.0f}x) | "
              f"{loaded['max_abs_error']:.1e} |", flush=True)
    if options.json:
        options.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
