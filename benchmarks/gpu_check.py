"""braze's GPU targets on a GPU: the CPU benchmark's models and the capture
suite compiled with braze (target="cuda" and target="triton", where each can
run) and with Inductor, compared with eager CUDA on the same inputs in one
run: time to first result (compile, autotuning, first call), median wall
time per call, GPU kernel time and kernels per call (from the profiler, which
sees the driver-API launches too). Run it when a session has a GPU; never in
CI. Finishes in under 8 minutes (models past --budget are listed as skipped).

    python benchmarks/gpu_check.py [--targets cuda,triton] [--no-inductor] [--cuda-graph] [--generated]
                                   [--runs N] [--budget SECONDS] [--json PATH]

`--cuda-graph` adds each target with the `cuda_graph` option (a warm-up
call, then one captured graph replayed per call); its error is checked on a
replay too. `--generated` adds each target with `epilogue_fusion` and
`flash_attention` on (engine '<target>+generated'): on CUDA, whose default
is cuBLAS and PyTorch's attention, the shared-memory tiled GEMMs with their
epilogues (codegen/gpu_gemm.py) and the generated flash attention
(codegen/gpu_attention.py), which no run here could time; the numbers
decide whether they become CUDA's default.

First it checks braze.comm's nccl backend (unless `--no-nccl`): a 1-rank
NCCL process group through braze.comm, every collective checked against the
value it must have (braze.testing.comm_checks), its hooks and flight
recorder; tests/python/comm/test_nccl.py goes further (2 ranks, a compiled
tensor-parallel MLP).

Exits 2 with one line per target naming why it cannot run where none of the
asked targets can (no GPU, no CUDA torch, no cuda-bindings, no triton, or
TRITON_INTERPRET set); 1 when the NCCL check or a model fails or differs
from eager; 0 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "python" / "frontend"))

import braze  # noqa: E402
from braze import target as targets  # noqa: E402

# Relative error (max |braze - eager| / max |eager|) accepted: float32
# kernels against cuBLAS/eager reductions in another order.
TOLERANCE = 1e-3


def cases():
    """(name, build) for every model: build() -> (model, args) on the CPU."""
    from test_models import MODELS, _inputs, _model

    # benchmarks/cpu/models.py by path: tests/python/frontend has a models.py too.
    spec = importlib.util.spec_from_file_location("braze_bench_cpu_models", HERE / "cpu" / "models.py")
    benchmark_models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark_models)

    listed = [(f"bench/{name}", lambda name=name: benchmark_models.build(name)) for name in benchmark_models.MODELS]
    listed += [(f"capture/{name}", lambda name=name: (_model(name), _inputs(name))) for name in MODELS]
    return listed


def _on_gpu(value):
    return value.cuda() if isinstance(value, torch.Tensor) else value


def _first_tensor(output):
    if isinstance(output, torch.Tensor):
        return output
    return next(t for t in output if isinstance(t, torch.Tensor))


def _relative_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    """max |got - expected| / max |expected|; integer and bool results must be equal."""
    if got.shape != expected.shape or got.device != expected.device:
        return float("inf")
    if not expected.is_floating_point():
        return 0.0 if torch.equal(got, expected) else float("inf")
    scale = expected.abs().max().item() or 1.0
    return (got.float() - expected.float()).abs().max().item() / scale


def _wall_ms(call, runs: int) -> float:
    """Median milliseconds per call, synchronised."""
    times = []
    for _ in range(runs):
        torch.cuda.synchronize()
        started = time.perf_counter()
        call()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return 1000 * sorted(times)[len(times) // 2]


def _kernel_ms(call, runs: int) -> tuple[float, int]:
    """GPU kernel milliseconds per call and kernels per call, from CUPTI."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as traced:
        for _ in range(runs):
            call()
        torch.cuda.synchronize()
    kernels = [e for e in traced.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith("Memcpy") and not e.name.startswith("Memset")]
    total_us = sum(e.time_range.elapsed_us() for e in kernels)
    return total_us / 1000 / runs, round(len(kernels) / runs)


def _engine_call(engine: str, model, args):
    """(call, kernels) for one engine; compiling happens here."""
    if engine == "eager":
        return (lambda: model(*args)), None
    if engine == "inductor":
        compiled = torch.compile(model)
        return (lambda: compiled(*args)), None
    target, _, variant = engine.partition("+")
    options = {"cuda_graph": variant == "graph"}
    if variant == "generated":
        options.update(epilogue_fusion=True, flash_attention=True)
    compiled = braze.compile(model, args, target=target, options=options)
    return (lambda: compiled(*args)), compiled.stats["kernels"]


def check(name: str, build, runs: int, engines: list[str]) -> list[dict]:
    """One row per engine: time to first result, error against eager, wall
    and kernel time per call."""
    model, args = build()
    model = model.cuda() if isinstance(model, torch.nn.Module) else model
    args = tuple(_on_gpu(a) for a in args)
    rows = []
    with torch.no_grad():
        expected = _first_tensor(model(*args))
        for engine in engines:
            torch.cuda.synchronize()
            started = time.perf_counter()
            call, kernels = _engine_call(engine, model, args)
            got = _first_tensor(call())
            torch.cuda.synchronize()
            row = {"model": name, "engine": engine, "kernels": kernels,
                   "first_result_s": time.perf_counter() - started,
                   "error": _relative_error(got, expected), "ms": _wall_ms(call, runs)}
            # Again after the timed calls: a CUDA graph's replays, not its warm-up.
            row["error"] = max(row["error"], _relative_error(_first_tensor(call()), expected))
            row["kernel_ms"], row["launches"] = _kernel_ms(call, max(runs // 4, 3))
            rows.append(row)
    eager_ms = next(r["ms"] for r in rows if r["engine"] == "eager")
    for row in rows:
        row["speedup"] = eager_ms / row["ms"]
    return rows


def nccl_check() -> list[str]:
    """braze.comm's nccl backend at one rank: one line per failure; prints
    why it cannot run where CUDA or NCCL is missing (not a failure)."""
    import braze.comm
    from braze.comm.process_group import nccl_unavailable
    from braze.testing.comm_checks import check_collectives

    reason = nccl_unavailable()
    if reason:
        print(f"gpu_check: the nccl check cannot run here: {reason}", file=sys.stderr)
        return []
    started = time.perf_counter()
    try:
        store = braze.comm.TCPStore("127.0.0.1", 0, True)
        with braze.comm.new_comm("nccl", 0, 1, store, timeout=60.0) as comm:
            failures = check_collectives(comm)
    except Exception as error:  # a failure like a wrong result; the models still run
        failures = [f"{type(error).__name__}: {str(error)[:300]}"]
    print(f"nccl (braze.comm, 1 rank): {'ok' if not failures else 'FAILED'} "
          f"in {time.perf_counter() - started:.1f} s", flush=True)
    for line in failures:
        print(f"FAILED nccl: {line}")
    return failures


def _unavailable(name: str) -> str | None:
    """Why braze's target `name` cannot run on a GPU here (None: it can)."""
    target = targets.get(name)
    reason = target.compiler_missing() or target.device_missing()
    if reason is None and name == "triton" and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        reason = "TRITON_INTERPRET is set (Triton's CPU interpreter, not the GPU)"
    return reason


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="cuda,triton", help="braze targets to run, comma-separated")
    parser.add_argument("--no-inductor", action="store_true", help="leave torch.compile's Inductor out")
    parser.add_argument("--cuda-graph", action="store_true",
                        help="each target also with the cuda_graph option (engine '<target>+graph')")
    parser.add_argument("--no-nccl", action="store_true", help="leave the braze.comm nccl check out")
    parser.add_argument("--generated", action="store_true",
                        help="each target also with epilogue_fusion and flash_attention on (engine "
                             "'<target>+generated'): generated GEMMs and attention against the vendor library's")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds; later models are skipped")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    nccl_failed = not args.no_nccl and bool(nccl_check())
    asked = [name for name in args.targets.split(",") if name]
    reasons = {name: _unavailable(name) for name in asked}
    runnable = [name for name in asked if reasons[name] is None]
    for name in asked:
        if reasons[name]:
            print(f"gpu_check: the {name} target cannot run here: {reasons[name]}", file=sys.stderr)
    if not runnable:
        return 1 if nccl_failed else 2
    engines = (["eager"] + ([] if args.no_inductor else ["inductor"]) + runnable
               + ([f"{name}+graph" for name in runnable] if args.cuda_graph else [])
               + ([f"{name}+generated" for name in runnable] if args.generated else []))
    print(f"device: {torch.cuda.get_device_name()}; engines: {', '.join(engines)}")
    print("| model | engine | kernels | first result s | max rel. error | ms per call | x eager "
          "| kernel ms (launches) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    started, rows, failed, skipped = time.perf_counter(), [], [], []
    for name, build in cases():
        if time.perf_counter() - started > args.budget:
            skipped.append(name)
            continue
        try:
            model_rows = check(name, build, args.runs, engines)
        except Exception as error:  # report every model, then fail
            failed.append(f"{name}: {type(error).__name__}: {str(error)[:300]}")
            continue
        rows += model_rows
        for row in model_rows:
            mark = "" if row["error"] <= TOLERANCE else " MISMATCH"
            if mark:
                failed.append(f"{name} ({row['engine']}): max relative error {row['error']:.2e} > {TOLERANCE}")
            kernels = "" if row["kernels"] is None else row["kernels"]
            print(f"| {name} | {row['engine']} | {kernels} | {row['first_result_s']:.2f} | {row['error']:.1e}{mark} "
                  f"| {row['ms']:.3f} | {row['speedup']:.2f}x | {row['kernel_ms']:.3f} ({row['launches']}) |",
                  flush=True)
    print(f"\n{len({r['model'] for r in rows})} models in {time.perf_counter() - started:.0f} s")
    for line in failed:
        print(f"FAILED {line}")
    if skipped:
        print(f"skipped past the {args.budget:.0f} s budget: {', '.join(skipped)}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "failed": failed, "skipped": skipped}, indent=2))
    return 1 if failed or nccl_failed else 0


if __name__ == "__main__":
    sys.exit(main())
