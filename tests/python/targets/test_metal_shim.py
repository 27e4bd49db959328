"""The Metal target's kernels run in the C++ shim on the CPU (threadgroups
emulated by threads meeting at real barriers) against eager: a check of the
MSL's logic, not of Apple's compiler (docs/targets.md)."""

import pytest
import torch
from conftest import need
from test_models import MODELS, _inputs, _model, assert_close

import braze
from braze import target as targets


@pytest.fixture(autouse=True)
def shim():
    need("the metal target's C++ shim", targets.get("metal").compiler_missing())


@pytest.mark.parametrize("name", MODELS)
def test_models_match_eager(name):
    model, args = _model(name), _inputs(name)
    compiled = braze.compile(model, args, target="metal", options={"threads": 32})
    assert compiled.stats["source"].name == "source.metal"
    with torch.no_grad():
        assert_close(compiled(*args), model(*args))


def test_dynamic_rows_and_division_by_zero():
    program = braze.compile_mlir("""
    func.func @f(%a: tensor<?x40xi64>, %b: tensor<?x40xi64>) -> tensor<?xi64> {
      %q = braze.div %a, %b : tensor<?x40xi64>, tensor<?x40xi64> -> tensor<?x40xi64>
      %s = braze.sum %q dims [1] : tensor<?x40xi64> -> tensor<?xi64>
      return %s : tensor<?xi64>
    }""", target="metal", options={"threads": 16})
    for rows in (1, 3):
        a, b = torch.randint(-50, 50, (rows, 40)), torch.randint(1, 5, (rows, 40))
        torch.testing.assert_close(program(a, b)[0], torch.div(a, b, rounding_mode="trunc").sum(1))
    b[0, 7] = 0
    with pytest.raises(braze.BrazeError, match="integer division by zero"):
        program(a, b)
