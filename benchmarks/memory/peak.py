"""Peak memory of one call of each benchmark model: braze (planned and
measured) against eager and Inductor, on the CPU.

    python benchmarks/memory/peak.py [--zoo] [--models mlp,block] [--json out.json]

How it is measured: a call runs under torch.profiler with profile_memory;
the profiler records every allocation and free of torch's CPU allocator
in order, so the peak of their running sum is the most bytes the call held
at once beyond what existed before it (inputs and weights are not counted,
the results are). braze's arena comes from braze's own allocator, which
the profiler does not see: braze's measured peak is the profiler's peak plus
the arena (an upper bound: the arena is held for the whole call). braze's
planned peak is braze-plan-memory's `braze.planned_peak_bytes` (the arena
plus the kernel and library-call buffers outside it live at once).
Shapes are static (the zoo at its SMALL and BENCH sizes, no dynamic dims).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "cpu"))


def profiled_peak(function, *args, **kwargs) -> int:
    """Bytes of torch CPU allocations held at once during one call."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        function(*args, **kwargs)
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    held = peak = 0
    for event in events:
        held += event.nbytes()
        peak = max(peak, held)
    return peak


def measure(name: str, model, args, kwargs) -> dict:
    import braze
    import braze.memory

    with torch.no_grad():
        eager = profiled_peak(model, *args, **kwargs)
        inductor_model = torch.compile(model, backend="inductor")
        inductor_model(*args, **kwargs)
        inductor = profiled_peak(inductor_model, *args, **kwargs)
        compiled = braze.compile(model, args, kwargs=kwargs)
        compiled(*args, **kwargs)
        allocator = braze.memory.default_allocator()
        allocator.reset_peak_stats()
        before = allocator.stats()["allocated_bytes"]
        torch_side = profiled_peak(compiled, *args, **kwargs)
        stats = allocator.stats()
        unplanned = braze.compile(model, args, kwargs=kwargs, options={"plan_memory": False})
        unplanned(*args, **kwargs)
        unplanned_peak = profiled_peak(unplanned, *args, **kwargs)
    arena_peak = stats["peak_allocated_bytes"] - before
    return {"model": name, "eager": eager, "inductor": inductor,
            "braze_planned": compiled.stats["planned_peak_bytes"], "braze_arena": compiled.stats["arena_bytes"],
            "braze_measured": torch_side + arena_peak, "braze_unplanned": unplanned_peak,
            "allocator_peak_in_call": arena_peak, "allocator_reserved": stats["reserved_bytes"],
            "allocator_fragmentation": stats["fragmentation"]}


def models(zoo: bool, chosen: list[str] | None):
    if zoo:
        from braze.testing.zoo import BENCH, SMALL, ZOO, import_libraries

        import_libraries()
        for entry in ZOO:
            for label, size in (("small", SMALL), ("bench", BENCH)):
                name = f"{entry.name}/{label}"
                if chosen and entry.name not in chosen and name not in chosen:
                    continue
                model, args, kwargs = entry.make(size)
                yield name, model, args, kwargs
        return
    from models import MODELS, build

    for name in MODELS:
        if chosen and name not in chosen:
            continue
        model, args = build(name)
        yield name, model, args, {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zoo", action="store_true", help="the model zoo instead of benchmarks/cpu/models.py")
    parser.add_argument("--models", help="comma-separated names")
    parser.add_argument("--json", help="write the rows here")
    options = parser.parse_args()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(tempfile.gettempdir()) / "braze-inductor-cache"))
    torch.manual_seed(0)
    rows = []
    mib = 1 << 20
    print("| model | eager MiB | Inductor MiB | braze planned MiB | braze measured MiB | braze unplanned MiB "
          "| planned / Inductor | measured / Inductor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, model, args, kwargs in models(options.zoo, options.models.split(",") if options.models else None):
        try:
            row = measure(name, model, args, kwargs)
        except Exception as error:  # noqa: BLE001 - one model's failure is reported, the rest still run
            print(f"| {name} | failed: {type(error).__name__}: {str(error)[:120]} |")
            continue
        rows.append(row)
        planned, measured = (row[key] / row["inductor"] if row["inductor"] else float("nan")
                             for key in ("braze_planned", "braze_measured"))
        print(f"| {name} | {row['eager'] / mib:.2f} | {row['inductor'] / mib:.2f} | {row['braze_planned'] / mib:.2f} "
              f"| {row['braze_measured'] / mib:.2f} | {row['braze_unplanned'] / mib:.2f} | {planned:.2f} "
              f"| {measured:.2f} |", flush=True)
    if options.json:
        Path(options.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
