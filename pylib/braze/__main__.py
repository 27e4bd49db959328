"""`python -m braze`: the main job on an embedded default model.

Compiles a small MLP block with a dynamic batch for the CPU (capture,
simplification, fusion, lowering to the kernel form, C++ generation and
compilation), prints the kernel-form IR and a generated kernel, runs it at
three batch sizes and compares with eager PyTorch and with the reference
interpreter.
"""

import argparse
import sys
import time

import torch

import braze
from braze import reference


class Block(torch.nn.Module):
    """Linear, GELU, Linear, residual, LayerNorm: a transformer MLP block."""

    def __init__(self, d=64, hidden=256):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, hidden)
        self.fc2 = torch.nn.Linear(hidden, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))


def _kernel_text(source: str, name: str) -> str:
    start = source.index(f'extern "C" int {name}(')
    return source[start:source.index("\n}\n", start) + 2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m braze", description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="do not print the IR and the kernel")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = Block().eval()
    batch = torch.export.Dim("batch", min=1, max=1024)
    started = time.perf_counter()
    compiled = braze.compile(model, (torch.randn(8, 64),), dynamic_shapes=({0: batch},))
    seconds = time.perf_counter() - started
    stats = compiled.stats
    if not args.quiet:
        print(f"// braze IR in the kernel form ({braze.compiler.pipeline({})})")
        print(compiled.module)
        source = stats["source"].read_text()
        print(f"// the LayerNorm kernel, from {stats['source']}")
        print(_kernel_text(source, f"braze_kernel_{stats['kernels'] - 1}"))
    print(f"compiled in {seconds:.2f} s ({'cache hit' if stats['cache_hit'] else 'C++ compiled'}): "
          f"{stats['kernels']} kernels ({stats['fused_gemms']} GEMMs with their epilogue), {stats['gemms']} other "
          "BLAS calls")
    worst = 0.0
    for rows in (3, 100, 1000):
        x = torch.randn(rows, 64)
        with torch.no_grad():
            expected = model(x)
        actual = compiled(x)
        (oracle,) = reference.run(compiled.exported.module, x, parameters=compiled.exported.parameters)
        error = max((actual - expected).abs().max().item(), (actual - oracle).abs().max().item())
        worst = max(worst, error)
        print(f"batch {rows:4}: output {tuple(actual.shape)}, max |braze - eager|, |braze - reference| "
              f"= {error:.2e}")
    ok = worst < 1e-4
    print("matches eager PyTorch" if ok else "MISMATCH with eager PyTorch")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
