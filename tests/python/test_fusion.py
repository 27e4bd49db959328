"""braze-fuse-pointwise keeps every program's meaning: captured models run on
the reference interpreter before and after the pass give the same results."""

import sys
from pathlib import Path

import pytest
import torch

import braze
from braze import reference

sys.path.insert(0, str(Path(__file__).parent / "frontend"))
from models import GPT2, MLP, PreNormBlock, RMSNormSwiGLU  # noqa: E402


def _groups(module) -> int:
    return str(module).count("braze.group ins(")


CASES = {
    "mlp": (MLP, lambda b: torch.randn(b, 32)),
    "prenorm_block": (PreNormBlock, lambda b: torch.randn(b, 7, 32)),
    "gpt2": (GPT2, lambda b: torch.randint(0, 128, (b, 9))),
    "rmsnorm_swiglu": (RMSNormSwiGLU, lambda b: torch.randn(b, 5, 32)),
}


@pytest.mark.parametrize("recompute", [0, 2])
@pytest.mark.parametrize("name", CASES)
def test_fusion_preserves_results(name, recompute):
    model_class, make = CASES[name]
    torch.manual_seed(0)
    model = model_class().eval()
    program = braze.export(model, (make(2),),
                           dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=16)},))
    module = program.module
    inputs = [make(b) for b in (1, 3, 5)]
    before = [reference.run(module, x, parameters=program.parameters) for x in inputs]
    braze.run_pipeline(module, f"braze-simplify,func.func(braze-fuse-pointwise{{recompute-limit={recompute}}})")
    assert _groups(module) >= 1
    for x, expected in zip(inputs, before):
        actual = reference.run(module, x, parameters=program.parameters)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=1e-6, atol=1e-6)


def test_layernorm_softmax_and_rmsnorm_groups():
    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(64)
            self.rms = torch.nn.RMSNorm(64)

        def forward(self, x):
            return self.ln(x).softmax(-1), self.rms(x)

    program = braze.export(Chain(), (torch.randn(4, 64),))
    braze.run_pipeline(program.module, "braze-simplify,func.func(braze-fuse-pointwise)")
    text = str(program.module)
    # LayerNorm feeds softmax: one kernel. RMSNorm only shares the input:
    # sibling kernels are grouped horizontally by combo-kernel grouping, not
    # by vertical fusion.
    assert _groups(program.module) == 2, text
    first, second = text.split("braze.group ins(")[1:]
    assert first.count("braze.mean") == 2 and "braze.max" in first and "braze.sum" in first
    assert second.count("braze.mean") == 1 and "braze.rsqrt" in second


@pytest.mark.parametrize("shifts,dims", [((-3, -3), (1, 2)), ((3, 5), (1, 2)), (-13, 2), (4, 0)],
                         ids=["swin_shift", "back", "more_than_the_dim", "batch_dim"])
def test_rolls_are_slices_a_kernel_reads(shifts, dims):
    """torch.roll (Swin's shifted windows), which export decomposes into a
    take of fmod(iota + c, n), becomes slices that the kernel reads in place
    (braze-simplify): no gather on the host, one kernel, eager's values."""
    from braze.testing.modules import Apply

    def rolled(x):
        return torch.roll(x, shifts, dims).relu() + 1

    x = torch.randn(5, 10, 12, 4)
    module = braze.parse(str(braze.export(Apply(rolled), (x,)).module))
    braze.run_pipeline(module, "braze-simplify")
    assert "braze.take" not in str(module) and "braze.slice" in str(module)
    compiled = braze.compile(Apply(rolled), (x,))
    assert compiled.stats["kernels"] == 1
    torch.testing.assert_close(compiled(x), rolled(x), rtol=0, atol=0)
