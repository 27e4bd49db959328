"""Combo kernels on graphs of many small independent kernels: an
optimizer-style step over many small parameters (SGD with weight decay and
momentum, Adam), a multi-head model with many small norms and heads, and
the per-call overhead as a function of the tensor count (pairs of 4-element
tensors multiplied: 10, 50, 80 and 200 inputs, half as many outputs).

Engines: eager, braze with and without braze-combo-kernels, braze with
combos but its kernel calls prepared in Python instead of the C++ launcher
(braze.runtime.launch), Inductor with its combo kernels off and on
(`torch._inductor.config.combo_kernels`).
Measured on one thread (OMP_NUM_THREADS=1, torch.set_num_threads(1)) as
thread CPU time per call (`time.thread_time()`), best of several rounds,
all engines in one run: the machine is shared, so only ratios measured
together mean anything. braze's launches per call are its compiled kernel
and combo steps (each one native call with at most one parallel region).

    python benchmarks/cpu/combo.py [--params 40 200] [--overhead 10 50 80 200] [--json out.json]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

import braze  # noqa: E402
from braze.runtime import launch  # noqa: E402


def _shapes(count: int) -> list[tuple[int, ...]]:
    """Small parameter shapes of different sizes (weights, biases, norms)."""
    cycle = [(64, 32), (32,), (128,), (16, 48), (256,), (8, 8, 4), (96, 24), (1000,)]
    return [cycle[k % len(cycle)] for k in range(count)]


class SgdStep(torch.nn.Module):
    """SGD with weight decay and momentum over (param, grad, buffer) triples."""

    def __init__(self, lr=0.01, momentum=0.9, weight_decay=1e-4):
        super().__init__()
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay

    def forward(self, tensors: list):
        out = []
        for p, g, buf in zip(tensors[0::3], tensors[1::3], tensors[2::3]):
            d = g + self.weight_decay * p
            b = self.momentum * buf + d
            out += [p - self.lr * b, b]
        return out


class AdamStep(torch.nn.Module):
    """Adam (bias-corrected, step 10) over (param, grad, m, v) quadruples."""

    def __init__(self, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, step=10):
        super().__init__()
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.c1, self.c2 = 1 - beta1 ** step, 1 - beta2 ** step

    def forward(self, tensors: list):
        out = []
        for p, g, m, v in zip(*(tensors[k::4] for k in range(4))):
            m2 = self.beta1 * m + (1 - self.beta1) * g
            v2 = self.beta2 * v + (1 - self.beta2) * g * g
            update = (m2 / self.c1) / (torch.sqrt(v2 / self.c2) + self.eps)
            out += [p - self.lr * update, m2, v2]
        return out


class MultiHead(torch.nn.Module):
    """A shared trunk feeding many small heads, each a LayerNorm, a linear
    layer and an activation, plus a small norm per head output."""

    def __init__(self, heads=24, width=64, out=16):
        super().__init__()
        self.trunk = torch.nn.Linear(width, width)
        self.heads = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.LayerNorm(width), torch.nn.Linear(width, out), torch.nn.GELU(),
                                torch.nn.LayerNorm(out))
            for _ in range(heads))

    def forward(self, x):
        h = self.trunk(x)
        return [head(h) for head in self.heads]


class Products(torch.nn.Module):
    """Pairs of tiny tensors multiplied: the per-call overhead per tensor."""

    def forward(self, tensors: list):
        return [a * b + 1 for a, b in zip(tensors[0::2], tensors[1::2])]


def _per_call(fn, args, budget=0.3, rounds=5) -> float:
    """Best thread CPU seconds per call over `rounds` rounds."""
    for _ in range(3):
        fn(*args)
    started, calls = time.thread_time(), 0
    while time.thread_time() - started < budget / rounds:
        fn(*args)
        calls += 1
    calls = max(calls, 3)
    best = float("inf")
    for _ in range(rounds):
        started = time.thread_time()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.thread_time() - started) / calls)
    return best


def _check(got, want) -> None:
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def _inductor(model, args, combo: bool):
    import torch._dynamo
    import torch._inductor.config as config

    torch._dynamo.reset()
    with config.patch(combo_kernels=combo):
        compiled = torch.compile(model, backend="inductor")
        compiled(*args)  # compile under the setting
    return compiled


def _braze(model, args, combo: bool, launcher: bool):
    """braze.compile's model, its kernel calls through the C++ launcher or
    (`launcher` False) prepared in Python: each step binds its launcher on
    its first call."""
    saved = launch.native
    if not launcher:
        launch.native = None
    try:
        compiled = braze.compile(model, args, options={"combo_kernels": combo})
        compiled(*args)
    finally:
        launch.native = saved
    return compiled


def run_case(name: str, model, args) -> dict:
    with torch.no_grad():
        want = model(*args)
        row = {"case": name, "tensors": sum(len(a) if isinstance(a, list) else 1 for a in args)}
        times = {"eager": _per_call(model, args)}
        for key, combo, launcher in (("braze", False, True), ("braze_combo", True, True),
                                     ("braze_combo_python_launch", True, False)):
            compiled = _braze(model, args, combo, launcher)
            _check(compiled(*args), want)
            times[key] = _per_call(compiled, args)
            row[f"{key}_kernels"] = compiled.stats["kernels"]
            row[f"{key}_launches"] = compiled.stats["launches"]
        for combo in (False, True):
            compiled = _inductor(model, args, combo)
            _check(compiled(*args), want)
            times["inductor_combo" if combo else "inductor"] = _per_call(compiled, args)
        row["us"] = {k: round(v * 1e6, 1) for k, v in times.items()}
    return row


def cases(counts: list[int], overheads: list[int]):
    for count in overheads:
        yield f"overhead_{count}", Products(), ([torch.randn(4) for _ in range(count)],)
    for count in counts:
        shapes = _shapes(count)
        sgd = [torch.randn(s) for s in shapes for _ in range(3)]
        yield f"sgd_{count}", SgdStep(), (sgd,)
        adam = [t for s in shapes for t in (torch.randn(s), torch.randn(s), torch.randn(s), torch.rand(s))]
        yield f"adam_{count}", AdamStep(), (adam,)
    yield "multi_head_24", MultiHead().eval(), (torch.randn(8, 64),)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, nargs="+", default=[40, 200])
    parser.add_argument("--overhead", type=int, nargs="+", default=[10, 50, 80, 200],
                        help="input counts of the per-call overhead cases")
    parser.add_argument("--json", default=None)
    options = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-combo-"))
    rows = []
    print("| case | inputs | eager µs | braze µs (launches) | braze+combo µs (launches) "
          "| braze+combo, Python launch µs | Inductor µs | Inductor+combo µs | braze+combo vs best Inductor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, model, args in cases(options.params, options.overhead):
        row = run_case(name, model, args)
        rows.append(row)
        us = row["us"]
        best_inductor = min(us["inductor"], us["inductor_combo"])
        print(f"| {name} | {row['tensors']} | {us['eager']} | {us['braze']} ({row['braze_launches']}) "
              f"| {us['braze_combo']} ({row['braze_combo_launches']}) | {us['braze_combo_python_launch']} "
              f"| {us['inductor']} | {us['inductor_combo']} | {best_inductor / us['braze_combo']:.2f}x |", flush=True)
    if options.json:
        with open(options.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
