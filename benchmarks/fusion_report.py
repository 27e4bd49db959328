#!/usr/bin/env python3
"""How many kernels braze-fuse-pointwise leaves per model: fusion groups,
ops left outside them (GEMMs, layout changes, lone pointwise ops), and how
many ops the groups absorbed. Counts, not timings: the CPU code generator
that turns groups into kernels comes next.

    .venv/bin/python benchmarks/fusion_report.py
"""

import sys
import warnings
from pathlib import Path

import torch

import braze

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python" / "frontend"))
from models import GPT2, MLP, PreNormBlock, RMSNormSwiGLU  # noqa: E402


class SoftmaxLayerNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(1024)

    def forward(self, x):
        return self.norm(x.softmax(-1))


MODELS = {
    "MLP + GELU + residual + LayerNorm": (MLP(), (torch.randn(8, 32),)),
    "pre-norm transformer block": (PreNormBlock(), (torch.randn(2, 8, 32),)),
    "GPT-2 (2 layers)": (GPT2(), (torch.randint(0, 128, (2, 16)),)),
    "RMSNorm + SwiGLU": (RMSNormSwiGLU(), (torch.randn(2, 5, 32),)),
    "softmax + LayerNorm": (SoftmaxLayerNorm(), (torch.randn(8, 1024),)),
}

SKIP = ("func.", "braze.parameter", "braze.constant", "braze.yield", "arith.", "tensor.dim")


def top_level_ops(module):
    func = module.mlir_module.body.operations[0]
    return [op.operation.name for op in func.regions[0].blocks[0].operations
            if not op.operation.name.startswith(SKIP)]


def main() -> None:
    warnings.filterwarnings("ignore")
    print("| model | ops before | ops after | groups | ops fused | left outside |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, (model, args) in MODELS.items():
        program = braze.export(model.eval(), args)
        module = program.module
        braze.run_pipeline(module, "braze-simplify")
        before = top_level_ops(module)
        braze.run_pipeline(module, "func.func(braze-fuse-pointwise)")
        after = top_level_ops(module)
        groups = after.count("braze.group")
        outside = sorted({op.removeprefix("braze.") for op in after if op != "braze.group"})
        fused = len(before) - (len(after) - groups)
        print(f"| {name} | {len(before)} | {len(after)} | {groups} | {fused} | {', '.join(outside)} |")


if __name__ == "__main__":
    main()
