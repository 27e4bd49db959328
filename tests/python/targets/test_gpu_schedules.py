"""The GPU schedules beyond one block per row, run on OpenCL (PoCL) and
Metal (the C++ shim) against eager torch: split reductions
(braze-split-reductions: partial sums over chunks, then their combination)
of many points to one value and to a few rows, NaN inputs and argmax ties
across chunks."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import need

import braze
from braze import target as targets

# The Metal shim runs a std::thread per Metal thread: fewer threads per
# block there, and fewer points (the smallest a split takes).
OPTIONS = {"opencl": {}, "metal": {"threads": 64}}
POINTS = {"opencl": 1 << 22, "metal": 1 << 17}


@pytest.fixture(params=sorted(OPTIONS))
def target(request):
    need(f"the {request.param} target", targets.get(request.param).compiler_missing())
    return request.param


def _program(text: str, target: str):
    return braze.compile_mlir(text, target=target, options=OPTIONS[target])


def _kernels(program) -> int:
    """Kernels in the program's source, standalone or in a combo."""
    return len(re.findall(r"void braze_kernel_\d+\(", program.stats["source"].read_text()))


def _reductions_to_one(points: int) -> str:
    return f"""
    func.func @f(%x: tensor<{points}xf32>) -> (tensor<f32>, tensor<f32>, tensor<i64>) {{
      %s = braze.sum %x dims [0] : tensor<{points}xf32> -> tensor<f32>
      %m = braze.max %x dims [0] : tensor<{points}xf32> -> tensor<f32>
      %a = braze.argmax %x dims [0] : tensor<{points}xf32> -> tensor<i64>
      return %s, %m, %a : tensor<f32>, tensor<f32>, tensor<i64>
    }}"""


def test_a_long_sum_max_and_argmax_to_one_value_split_in_two_kernels(target):
    points = POINTS[target]
    program = _program(_reductions_to_one(points), target)
    assert _kernels(program) == 6  # three reductions, each a partial and a combining kernel
    x = torch.randn(points)
    x[points // 3] = 10.0  # the first maximum, in a middle chunk
    x[points - 1] = 10.0  # a tie in the last chunk
    s, m, a = program(x)
    torch.testing.assert_close(s, x.sum(), rtol=1e-4, atol=1e-2)
    assert m.item() == 10.0 and a.item() == points // 3
    x[points // 2] = float("nan")
    x[points - 5] = float("nan")
    s, m, a = program(x)
    assert s.isnan() and m.isnan() and a.item() == points // 2


def test_rows_of_a_prime_length_mask_the_last_chunk(target):
    rows, length = 3, POINTS[target] // 2 + 3  # odd: the last chunk is short
    text = f"""
    func.func @f(%x: tensor<{rows}x{length}xf32>) -> (tensor<{rows}xf32>, tensor<{rows}xf32>, tensor<{rows}xi64>) {{
      %s = braze.sum %x dims [1] : tensor<{rows}x{length}xf32> -> tensor<{rows}xf32>
      %m = braze.min %x dims [1] : tensor<{rows}x{length}xf32> -> tensor<{rows}xf32>
      %a = braze.argmax %x dims [1] : tensor<{rows}x{length}xf32> -> tensor<{rows}xi64>
      return %s, %m, %a : tensor<{rows}xf32>, tensor<{rows}xf32>, tensor<{rows}xi64>
    }}"""
    program = _program(text, target)
    assert _kernels(program) == 6
    x = torch.randn(rows, length) - 5.0  # every value below 0: a masked point must not win
    x[1, length - 1] = float("nan")  # the very last point
    x[2] = -1.0  # all tied: the first index
    s, m, a = program(x)
    torch.testing.assert_close(s, x.sum(1), rtol=1e-4, atol=1e-2, equal_nan=True)
    torch.testing.assert_close(m, x.amin(1), equal_nan=True)
    assert a.tolist() == torch.argmax(x, 1).tolist() == [torch.argmax(x[0]).item(), length - 1, 0]


def test_a_softmax_and_a_dynamic_extent_stay_one_kernel(target):
    points = POINTS[target]
    text = """
    func.func @f(%x: tensor<2x65536xf32>, %y: tensor<?xf32>) -> (tensor<2x65536xf32>, tensor<f32>) {
      %m = braze.max %x dims [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
      %d = braze.sub %x, %m : tensor<2x65536xf32>, tensor<2x1xf32> -> tensor<2x65536xf32>
      %e = braze.exp %d : tensor<2x65536xf32>
      %z = braze.sum %e dims [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
      %p = braze.div %e, %z : tensor<2x65536xf32>, tensor<2x1xf32> -> tensor<2x65536xf32>
      %s = braze.sum %y dims [0] : tensor<?xf32> -> tensor<f32>
      return %p, %s : tensor<2x65536xf32>, tensor<f32>
    }"""
    program = _program(text, target)
    x, y = torch.randn(2, 65536), torch.randn(points)
    p, s = program(x, y)
    torch.testing.assert_close(p, torch.softmax(x, 1))
    torch.testing.assert_close(s, y.sum(), rtol=1e-4, atol=1e-2)
