"""Combo kernels on the CPU (braze-combo-kernels, codegen/cpp/combo.py,
runtime/combo.py): one parallel region per combo, numerics against eager
PyTorch and the reference interpreter, every dispatch mode."""

from __future__ import annotations

import re

import pytest
import torch

import braze
from braze import reference
from braze.ir import parse
from braze.passes import kernel_form_pipeline, run_pipeline
from ir_samples import COMBO_INDEPENDENT


class _Chains(torch.nn.Module):
    """Independent small chains of mixed dtypes, with a row reduction."""

    def forward(self, a, b, c, d, e):
        return (torch.sigmoid(a * 2) + 1, torch.tanh(b) * b, (c - 1).relu().to(torch.float64),
                d * 3 + 1, e.float().softmax(-1))


def _chains_args(rows: int = 8):
    return (torch.randn(64), torch.randn(rows, 16), torch.randn(3, 5),
            torch.randint(-50, 50, (rows, 4)), torch.randn(rows, 32).to(torch.bfloat16))


def _launches_per_call(program, arguments) -> int:
    """Kernel launches one call makes: steps that call a compiled kernel or
    combo (each a single native call: one parallel region at most)."""
    from braze.runtime.combo import ComboCall
    from braze.runtime.executor import KernelCall

    counted = []
    for step in program.steps:
        if isinstance(step.run, (KernelCall, ComboCall)):
            original = step.run

            def counting(env, original=original):
                counted.append(original.name)
                original(env)

            step.run = counting
    try:
        program(*arguments)
    finally:
        pass
    return len(counted)


def _parallel_regions(source: str) -> dict[str, int]:
    """`#pragma omp parallel` regions per exported function of a C++ unit."""
    regions = {}
    for part in re.split(r'\nextern "C" ', source)[1:]:
        name = re.match(r"(?:BZ_WIDE_VECTORS )?int (\w+)\(", part).group(1)
        body = part.split("\n}\n")[0]
        regions[name] = len(re.findall(r"#pragma omp parallel\b", body))
    return regions


def test_independent_kernels_run_in_one_parallel_region():
    model, args = _Chains(), _chains_args()
    compiled = braze.compile(model, args)
    stats = compiled.stats
    assert stats["kernels"] == 5 and stats["launches"] == 1
    source = stats["source"].read_text()
    # One exported function, the combo, with one parallel region; its
    # sub-kernels are static functions without one.
    assert _parallel_regions(source) == {"braze_kernel_combo_0": 1}
    assert _launches_per_call(compiled.compiled.program, args) == 1
    for got, want in zip(compiled(*args), model(*args)):
        torch.testing.assert_close(got, want)


def test_without_combo_kernels_every_kernel_is_its_own_launch():
    model, args = _Chains(), _chains_args()
    compiled = braze.compile(model, args, options={"combo_kernels": False})
    assert compiled.stats["launches"] == compiled.stats["kernels"] == 5
    assert "_combo_" not in compiled.stats["source"].read_text()
    assert _launches_per_call(compiled.compiled.program, args) == 5
    for got, want in zip(compiled(*args), model(*args)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("rows", [2, 37, 3000])
def test_grouped_kernels_with_dynamic_sizes_match_eager(rows):
    model = _Chains()
    dim = torch.export.Dim("rows", min=2, max=4096)
    compiled = braze.compile(model, _chains_args(5),
                             dynamic_shapes=(None, {0: dim}, None, {0: dim}, {0: dim}))
    assert compiled.stats["launches"] < compiled.stats["kernels"]
    args = _chains_args(rows)
    for got, want in zip(compiled(*args), model(*args)):
        torch.testing.assert_close(got, want)


def _combo_module(dispatch: str):
    module = parse(COMBO_INDEPENDENT)
    run_pipeline(module, kernel_form_pipeline()
                 + f",func.func(braze-combo-kernels{{dispatch={dispatch} pointwise-block=16}})")
    assert str(module).count("braze.combo dispatch") == 1
    return module


@pytest.mark.parametrize("dispatch", ["sequential", "flattened"])
@pytest.mark.parametrize("n", [0, 3, 2000])
def test_every_dispatch_matches_the_reference_interpreter(dispatch, n):
    module = _combo_module(dispatch)
    program = braze.compile_mlir(module)
    assert program.stats["launches"] == 1
    args = (torch.randn(n, 16), torch.randn(n * 5, dtype=torch.float64), torch.randn(7, 300),
            torch.randint(-9, 9, (n, 9)))
    want = reference.run(parse(COMBO_INDEPENDENT), *args)
    for got, expected in zip(program(*args), want):
        torch.testing.assert_close(got, expected)


def test_round_robin_interleaves_equal_sub_kernels():
    module = parse("""
    func.func @f(%x: tensor<64x32xf32>, %y: tensor<64x32xf16>, %z: tensor<2048xf32>)
        -> (tensor<64x32xf32>, tensor<64x32xf16>, tensor<2048xf32>) {
      %a = braze.tanh %x : tensor<64x32xf32>
      %b = braze.sigmoid %y : tensor<64x32xf16>
      %c = braze.relu %z : tensor<2048xf32>
      return %a, %b, %c : tensor<64x32xf32>, tensor<64x32xf16>, tensor<2048xf32>
    }""")
    run_pipeline(module, kernel_form_pipeline() + ",func.func(braze-combo-kernels{pointwise-block=32})")
    assert 'dispatch "round_robin"' in str(module)
    program = braze.compile_mlir(module)
    x, y, z = torch.randn(64, 32), torch.randn(64, 32).half(), torch.randn(2048)
    a, b, c = program(x, y, z)
    torch.testing.assert_close(a, x.tanh())
    torch.testing.assert_close(b, y.sigmoid())
    torch.testing.assert_close(c, z.relu())


def test_a_sub_kernel_dividing_by_zero_fails_the_whole_combo():
    program = braze.compile_mlir("""
    func.func @f(%x: tensor<8xi64>, %y: tensor<8xi64>, %z: tensor<4xf32>) -> (tensor<8xi64>, tensor<4xf32>) {
      %q = braze.div %x, %y : tensor<8xi64>, tensor<8xi64> -> tensor<8xi64>
      %e = braze.exp %z : tensor<4xf32>
      return %q, %e : tensor<8xi64>, tensor<4xf32>
    }""")
    assert program.stats["launches"] == 1
    x = torch.arange(8)
    with pytest.raises(braze.BrazeError, match="integer division by zero"):
        program(x, torch.zeros(8, dtype=torch.int64), torch.randn(4))


def test_dependent_chains_are_not_grouped_and_stay_correct():
    # A -> B -> C: A and C independent otherwise; D independent of all.
    class Chain(torch.nn.Module):
        def forward(self, x, w, y):
            a = torch.exp(x)
            b = a @ w
            return torch.tanh(b), torch.sigmoid(y)

    model, args = Chain(), (torch.randn(4, 4), torch.randn(4, 4), torch.randn(16))
    compiled = braze.compile(model, args)
    assert compiled.stats["kernels"] == 3 and compiled.stats["launches"] == 2
    for got, want in zip(compiled(*args), model(*args)):
        torch.testing.assert_close(got, want)


def test_a_sub_kernel_without_sizes_does_not_shift_the_next_ones_sizes():
    # A rank-0 sub-kernel has no sizes at all (its own call passes one
    # placeholder entry); the 4-D sub-kernels after it must still find
    # their strides. Found as NaN weights from a compiled AdamW step.
    text = """
    func.func @f(%s: tensor<f32>, %x: tensor<16x3x3x3xf32>, %y: tensor<8x16x1x1xf32>)
        -> (tensor<f32>, tensor<16x3x3x3xf32>, tensor<8x16x1x1xf32>) {
      %a = braze.mul %s, %s : tensor<f32>, tensor<f32> -> tensor<f32>
      %b = braze.mul %x, %x : tensor<16x3x3x3xf32>, tensor<16x3x3x3xf32> -> tensor<16x3x3x3xf32>
      %c = braze.neg %y : tensor<8x16x1x1xf32>
      return %a, %b, %c : tensor<f32>, tensor<16x3x3x3xf32>, tensor<8x16x1x1xf32>
    }"""
    program = braze.compile_mlir(text)
    assert program.stats["kernels"] == 3 and program.stats["launches"] == 1
    args = (torch.tensor(3.0), torch.randn(16, 3, 3, 3), torch.randn(8, 16, 1, 1))
    for got, want in zip(program(*args), reference.run(parse(text), *args)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("optimizer", [
    lambda params: torch.optim.AdamW(params, lr=1e-2),
    lambda params: torch.optim.SGD(params, lr=1e-2, momentum=0.9, weight_decay=1e-4, nesterov=True),
], ids=["adamw", "sgd_nesterov"])
def test_a_compiled_optimizer_step_matches_eager(optimizer):
    # Parameters of every rank a model has (convolution weights, biases,
    # linear weights), as torch.optim's own step updates them in place.
    shapes = [(16, 3, 3, 3), (16,), (8, 16, 1, 1), (10, 16), ()]
    eager = [torch.nn.Parameter(torch.randn(s, generator=torch.Generator().manual_seed(k)))
             for k, s in enumerate(shapes)]
    compiled = [torch.nn.Parameter(p.detach().clone()) for p in eager]
    eager_step, compiled_optimizer = optimizer(eager), optimizer(compiled)
    torch._dynamo.reset()
    compiled_step = torch.compile(compiled_optimizer.step, backend="braze")
    for step in range(3):
        for p, q in zip(eager, compiled):
            p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(100 + step))
            q.grad = p.grad.clone()
        eager_step.step()
        compiled_step()
        for p, q in zip(eager, compiled):
            torch.testing.assert_close(q, p)


_MASK_FROM_EXTERN = """
func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
  %p = braze.parameter "p" : tensor<8x40xf32>
  %c = braze.extern "aten.cumsum.default" PURE(%p) args [0 : index, 1] : (tensor<8x40xf32>) -> tensor<8x40xf32>
  %q = braze.sum %c dims [1] : tensor<8x40xf32> -> tensor<8xf32>
  %s = braze.sum %q dims [0] keepdim : tensor<8xf32> -> tensor<1xf32>
  %a = braze.exp %x : tensor<16xf32>
  %b = braze.sum %a dims [0] keepdim : tensor<16xf32> -> tensor<1xf32>
  %t = braze.add %s, %b : tensor<1xf32>, tensor<1xf32> -> tensor<1xf32>
  %y = braze.mul %a, %t : tensor<16xf32>, tensor<1xf32> -> tensor<16xf32>
  return %y : tensor<16xf32>
}
"""


@pytest.mark.parametrize("pure", [True, False], ids=["pure", "opaque"])
def test_a_pure_extern_on_parameters_is_computed_once(pure):
    """A kernel reading only a pure extern of parameters (Swin's shifted-
    window mask, built by slice_scatter) runs once, when the program is
    built, as the extern does: braze-combo-kernels keeps it out of the
    per-call groups. Without `pure` the extern may have effects: the
    kernel reading it joins a combo with a kernel on the argument, and
    runs on every call."""
    p = torch.randn(8, 40)
    program = braze.compile_mlir(_MASK_FROM_EXTERN.replace("PURE", "pure" if pure else ""), parameters={"p": p})
    # Per call: exp and its sum, the two sums added, the product; opaque:
    # the row sums of the cumsum too (in a combo with the first).
    assert program.stats["kernels"] == (3 if pure else 4), program.stats
    x = torch.randn(16)
    want = x.exp() * (torch.cumsum(p, 1).sum() + x.exp().sum())
    (got,) = program(x)
    torch.testing.assert_close(got, want)


def test_the_frontend_marks_extern_overloads_that_mutate_nothing_and_draw_nothing_pure():
    from braze.frontend.extern import _is_pure

    assert _is_pure(torch.ops.aten.slice_scatter.default) and _is_pure(torch.ops.aten.cumsum.default)
    assert not _is_pure(torch.ops.aten.index_put_.default)  # writes its argument
    assert not _is_pure(torch.ops.aten.bernoulli.default)  # random
