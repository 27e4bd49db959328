"""braze.switch and braze.while from IR text through the CPU program and
the reference interpreter: N-way branches, clamping, loops of zero, one and
many iterations, kernels inside regions, and results that never alias."""

import pytest
import torch

import braze
from braze import reference

SWITCH = """
func.func @switch3(%i: tensor<i64>, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = braze.sigmoid %x : tensor<4x8xf32>
  %r = braze.switch %i (%s, %x) : (tensor<i64>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    %n = braze.neg %a : tensor<4x8xf32>
    %m = braze.mul %n, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    braze.yield %m : tensor<4x8xf32>
  }, {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    braze.yield %b : tensor<4x8xf32>
  }, {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    %e = braze.exp %b : tensor<4x8xf32>
    %sum = braze.sum %e dims [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = braze.div %e, %sum : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    braze.yield %d : tensor<4x8xf32>
  }
  %y = braze.add %r, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
"""

LOOP = """
func.func @loop(%zero: tensor<i64>, %x: tensor<?x4xf32>, %n: tensor<i64>) -> (tensor<i64>, tensor<?x4xf32>) {
  %k, %y = braze.while (%zero, %x) extra (%n)
      : (tensor<i64>, tensor<?x4xf32>, tensor<i64>) -> (tensor<i64>, tensor<?x4xf32>) condition {
  ^bb0(%i: tensor<i64>, %a: tensor<?x4xf32>, %l: tensor<i64>):
    %c = braze.lt %i, %l : tensor<i64>, tensor<i64> -> tensor<i1>
    braze.yield %c : tensor<i1>
  } do {
  ^bb0(%i: tensor<i64>, %a: tensor<?x4xf32>, %l: tensor<i64>):
    %one = braze.constant dense<1> : tensor<i64>
    %j = braze.add %i, %one : tensor<i64>, tensor<i64> -> tensor<i64>
    %h = braze.constant dense<0.5> : tensor<f32>
    %t = braze.tanh %a : tensor<?x4xf32>
    %b = braze.add %t, %h : tensor<?x4xf32>, tensor<f32> -> tensor<?x4xf32>
    braze.yield %j, %b : tensor<i64>, tensor<?x4xf32>
  }
  return %k, %y : tensor<i64>, tensor<?x4xf32>
}
"""


def _switch_eager(i, x):
    s = torch.sigmoid(x)
    branch = min(max(i, 0), 2)
    r = [-s * x, x, torch.softmax(x, dim=1)][branch]
    return r + x


def _loop_eager(x, count):
    for _ in range(count):
        x = torch.tanh(x) + 0.5
    return x


@pytest.fixture(scope="module")
def switch_program():
    return braze.compile_mlir(SWITCH)


@pytest.mark.parametrize("index", [-1, 0, 1, 2, 5])
def test_switch_runs_the_selected_branch(switch_program, index):
    x = torch.randn(4, 8)
    expected = _switch_eager(index, x)
    i = torch.tensor(index)
    torch.testing.assert_close(switch_program(i, x)[0], expected)
    torch.testing.assert_close(reference.run(braze.parse(SWITCH), i, x)[0], expected)


def test_switch_kernels_are_compiled_with_the_function(switch_program):
    # sigmoid before, one kernel per computing branch, the add after.
    assert switch_program.stats["kernels"] == 4


def test_identity_branch_result_does_not_alias(switch_program):
    module = braze.parse("""
    func.func @f(%i: tensor<i1>, %x: tensor<3xf32>) -> tensor<3xf32> {
      %r = braze.switch %i (%x) : (tensor<i1>, tensor<3xf32>) -> tensor<3xf32> {
      ^bb0(%a: tensor<3xf32>):
        braze.yield %a : tensor<3xf32>
      }, {
      ^bb0(%a: tensor<3xf32>):
        %n = braze.neg %a : tensor<3xf32>
        braze.yield %n : tensor<3xf32>
      }
      return %r : tensor<3xf32>
    }""")
    program = braze.compile_mlir(module)
    x = torch.arange(3.0)
    out = program(torch.tensor(False), x)[0]
    out += 1
    assert torch.equal(x, torch.arange(3.0))
    torch.testing.assert_close(program(torch.tensor(True), x)[0], -x)


@pytest.mark.parametrize("count", [0, 1, 7])
def test_while_iterations(count):
    program = braze.compile_mlir(LOOP)
    x = torch.randn(5, 4)
    expected = _loop_eager(x, count)
    k, y = program(torch.tensor(0), x, torch.tensor(count))
    assert int(k) == count
    torch.testing.assert_close(y, expected)
    assert y.data_ptr() != x.data_ptr()  # zero iterations: a copy, not the input
    k, y = reference.run(braze.parse(LOOP), torch.tensor(0), x, torch.tensor(count))
    torch.testing.assert_close(y, expected)
