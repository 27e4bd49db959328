"""`python -m braze`: the main job on an embedded default model.

Captures a small MLP block with a dynamic batch, runs braze's pipeline
(simplification, then pointwise fusion), prints the resulting IR, runs it at
two batch sizes and compares with eager PyTorch. Until the CPU backend
exists, programs run on the reference interpreter.
"""

import argparse
import sys

import torch

import braze
from braze import reference

PIPELINE = "braze-simplify,func.func(braze-fuse-pointwise),cse"


class Block(torch.nn.Module):
    """Linear, GELU, Linear, residual, LayerNorm: a transformer MLP block."""

    def __init__(self, d=64, hidden=256):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, hidden)
        self.fc2 = torch.nn.Linear(hidden, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m braze", description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="do not print the IR")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = Block().eval()
    batch = torch.export.Dim("batch", min=1, max=1024)
    program = braze.export(model, (torch.randn(8, 64),), dynamic_shapes=({0: batch},))
    braze.run_pipeline(program.module, PIPELINE)
    if not args.quiet:
        print(f"// braze IR after {PIPELINE}")
        print(program)
    worst = 0.0
    for rows in (3, 100):
        x = torch.randn(rows, 64)
        with torch.no_grad():
            expected = model(x)
        (actual,) = reference.run(program.module, x, parameters=program.parameters)
        worst = max(worst, (actual - expected).abs().max().item())
        print(f"batch {rows:4}: output {tuple(actual.shape)}, max |braze - eager| = "
              f"{(actual - expected).abs().max().item():.2e}")
    ok = worst < 1e-4
    print("matches eager PyTorch" if ok else "MISMATCH with eager PyTorch")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
