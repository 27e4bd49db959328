"""Combo kernels on the Triton target, run by Triton's interpreter
(TRITON_INTERPRET=1, tests/conftest.py): one launch per combo, every
dispatch mode, against the reference interpreter."""

from __future__ import annotations

import pytest
import torch

import braze
from braze import reference
from braze.ir import parse
from braze.passes import kernel_form_pipeline, run_pipeline
from ir_samples import COMBO_INDEPENDENT

pytest.importorskip("triton")


@pytest.mark.parametrize("dispatch", ["sequential", "flattened"])
def test_a_combo_is_one_launch_matching_the_reference(dispatch):
    module = parse(COMBO_INDEPENDENT)
    run_pipeline(module, kernel_form_pipeline()
                 + f",func.func(braze-combo-kernels{{dispatch={dispatch} pointwise-block=16}})")
    program = braze.compile_mlir(module, target="triton")
    assert (program.stats["launches"], program.stats["kernels"]) == (1, 5)
    source = program.stats["source"].read_text()
    assert source.count("tl.program_id(0)") == 1  # only the combo's launch function reads it
    for n in (0, 3, 40):  # empty, a partial block, several blocks per sub-kernel
        args = (torch.randn(n, 16), torch.randn(n * 5, dtype=torch.float64), torch.randn(7, 300),
                torch.randint(-9, 9, (n, 9)))
        want = reference.run(parse(COMBO_INDEPENDENT), *args)
        for got, expected in zip(program(*args), want):
            torch.testing.assert_close(got, expected)


def test_round_robin_and_the_target_pipeline_group_equal_kernels():
    text = """
    func.func @f(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>, %s: tensor<f32>)
        -> (tensor<64x32xf32>, tensor<64x32xf32>) {
      %a = braze.tanh %x : tensor<64x32xf32>
      %b = braze.mul %y, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
      return %a, %b : tensor<64x32xf32>, tensor<64x32xf32>
    }"""
    program = braze.compile_mlir(text, target="triton")
    assert (program.stats["launches"], program.stats["kernels"]) == (1, 2)
    assert "program % 2" in program.stats["source"].read_text()  # round robin
    x, y, s = torch.randn(64, 32), torch.randn(64, 32), torch.tensor(3.0)
    a, b = program(x, y, s)
    torch.testing.assert_close(a, x.tanh())
    torch.testing.assert_close(b, y * s)
