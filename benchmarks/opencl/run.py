"""The capture-suite models on the OpenCL target (PoCL here) against eager
PyTorch on the CPU: indicative only (PoCL is a CPU device, and each kernel
copies its inputs and results between host and device buffers).

    python benchmarks/opencl/run.py [--runs N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parents[2] / "tests" / "python" / "frontend"))
from test_models import MODELS, _inputs, _model  # noqa: E402

import braze  # noqa: E402


def _median_ms(function, args, runs: int) -> float:
    function(*args)  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    print("| model | kernels | eager CPU ms | braze opencl ms | braze cpu ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in MODELS:
        model, inputs = _model(name), _inputs(name)
        opencl = braze.compile(model, inputs, target="opencl")
        cpu = braze.compile(model, inputs, target="cpu")
        with torch.no_grad():
            eager = _median_ms(model, inputs, args.runs)
            on_opencl = _median_ms(opencl, inputs, args.runs)
            on_cpu = _median_ms(cpu, inputs, args.runs)
        rows.append({"model": name, "kernels": opencl.stats["kernels"], "eager_ms": eager,
                     "opencl_ms": on_opencl, "cpu_ms": on_cpu})
        print(f"| {name} | {opencl.stats['kernels']} | {eager:.3f} | {on_opencl:.3f} | {on_cpu:.3f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
