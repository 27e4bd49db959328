"""Allocator throughput on an alloc/free trace recorded from models: braze's
caching allocator against malloc (natively) and against torch's CPU
allocator (both from Python, one tensor per allocation).

    OMP_NUM_THREADS=1 python benchmarks/memory/allocator.py [--models mlp,block] [--json out.json]

The trace: one eager call of each model under torch.profiler with
profile_memory, whose allocation events give each allocation's size in
order; a free (-n bytes) is matched to the most recent live allocation of
n bytes (the profiler gives no addresses, so this pairing is an
approximation that keeps every size and the order of events). The native
replay (replay.cc, compiled here with -O2) times malloc/free and
CachingAllocator::allocate/free on the trace 20 times after one warm pass,
with the thread's CPU clock. The Python replay times `torch.empty(n,
dtype=torch.uint8)` against `braze.memory.Allocator().bytes(n)` with
`time.thread_time()`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "cpu"))


def record_trace(names: list[str]) -> list[tuple]:
    from models import build

    trace, live, next_id = [], {}, 0
    for name in names:
        model, args = build(name)
        with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                     profile_memory=True) as prof:
            model(*args)
        events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                        key=lambda e: e.start_ns())
        for event in events:
            size = event.nbytes()
            if size > 0:
                trace.append(("a", next_id, size))
                live.setdefault(size, []).append(next_id)
                next_id += 1
            elif live.get(-size):
                trace.append(("f", live[-size].pop()))
    for ids in live.values():  # what the calls returned, freed at the end
        trace.extend(("f", i) for i in ids)
    return trace


def native_replay(trace: list[tuple]) -> dict:
    compiler = shutil.which("g++") or shutil.which("c++")
    memory = ROOT / "cxx" / "runtime" / "memory"
    with tempfile.TemporaryDirectory() as directory:
        binary = Path(directory) / "replay"
        subprocess.run([compiler, "-std=c++17", "-O2", f"-I{memory}", str(memory / "caching_allocator.cc"),
                        str(memory / "raw_allocator.cc"), str(Path(__file__).with_name("replay.cc")),
                        "-o", str(binary), "-pthread"], check=True)
        path = Path(directory) / "trace.txt"
        path.write_text("\n".join(" ".join(map(str, event)) for event in trace))
        return json.loads(subprocess.run([str(binary), str(path), "20"], check=True, capture_output=True,
                                         text=True).stdout)


def python_replay(trace: list[tuple], rounds: int = 5) -> dict:
    import braze.memory

    allocator = braze.memory.Allocator()
    engines = {"torch_empty": lambda n: torch.empty(n, dtype=torch.uint8), "braze_bytes": allocator.bytes}
    result = {}
    for name, allocate in engines.items():
        for timed in (False, True):  # a warm pass, then the timed one
            live = {}
            started = time.thread_time()
            for _ in range(rounds if timed else 1):
                for event in trace:
                    if event[0] == "a":
                        live[event[1]] = allocate(event[2])
                    else:
                        del live[event[1]]
            seconds = time.thread_time() - started
        result[f"{name}_ns_per_op"] = seconds / (rounds * len(trace)) * 1e9
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mlp,block,softmax_layernorm,handwritten_decoder,small_chains")
    parser.add_argument("--json", help="write the result here")
    options = parser.parse_args()
    torch.set_num_threads(1)
    trace = record_trace(options.models.split(","))
    row = {"models": options.models, **native_replay(trace), **python_replay(trace)}
    print(json.dumps(row, indent=1))
    if options.json:
        Path(options.json).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
