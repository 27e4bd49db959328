"""`braze.dynamic_spec`: ShapeVars declared once (range, divisor), derived
dims, one compile for every allowed size, violations refused at call time
in the ShapeVars' names, bad specs refused when declared or captured."""

import pytest
import torch

import braze
import braze.compiler
from braze import symbolic


class Halves(torch.nn.Module):
    """Uses S, S//2 and 2*S + 1 sized inputs together."""

    def forward(self, x, half, wide):
        s = x.shape[1]
        return x * 2.0, half + x[:, : s // 2].sum(0), wide[1:] - x.repeat(1, 2).sum(0)


S = braze.ShapeVar("S", min=8, max=64, multiple_of=8)
HALVES_SPEC = braze.dynamic_spec(x={1: S}, half={0: S // 2}, wide={0: 2 * S + 1})


def _inputs(s, batch=3):
    return torch.randn(batch, s), torch.randn(s // 2), torch.randn(2 * s + 1)


def _close(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        assert a.shape == e.shape
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def compiled_halves():
    """One compile of Halves, with the number of compiles it took."""
    calls = []
    original = braze.compiler.compile_mlir

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    braze.compiler.compile_mlir = counting
    try:
        compiled = braze.compile(Halves(), _inputs(16), dynamic_spec=HALVES_SPEC)
    finally:
        braze.compiler.compile_mlir = original
    return compiled, calls


def test_the_ir_keeps_the_shapevars_and_their_divisor(compiled_halves):
    """Tests that braze.symbols holds S's range and divisor, and each marked
    dim's braze.dims its expression in S."""
    compiled, _ = compiled_halves
    module = compiled.exported.module.operation
    ranges = symbolic.symbol_ranges_from_attribute(module.attributes[symbolic.SYMBOLS_ATTRIBUTE])
    assert ranges == {"S": symbolic.SymbolRange(8, 64, 8)}
    forward = module.regions[0].blocks[0].operations[0]
    dims = [[str(e) for e in spec] for spec in symbolic.function_dim_specs(forward)]
    assert dims == [["3", "S"], ["S//2"], ["2*S + 1"]]
    assert "tensor<3x?xf32>" in str(compiled.exported.module)


def test_one_compile_serves_every_allowed_size(compiled_halves):
    """Tests that the minimum, the maximum and sizes between run on the one
    compiled program, matching eager."""
    compiled, calls = compiled_halves
    model = Halves()
    for s in (8, 16, 40, 64):
        inputs = _inputs(s)
        _close(compiled(*inputs), model(*inputs))
    assert len(calls) == 1


@pytest.mark.parametrize("inputs, message", [
    ((torch.randn(3, 30), torch.randn(15), torch.randn(61)), "argument #0 dim 1 is 30, but S must be a multiple of 8"),
    ((torch.randn(3, 72), torch.randn(36), torch.randn(145)), "S = 72 is outside its range [8, 64] (argument #0 dim 1)"),
    ((torch.randn(3, 16), torch.randn(9), torch.randn(33)), "argument #1 dim 0 is 9 but S//2 = 8"),
    ((torch.randn(3, 16), torch.randn(8), torch.randn(32)), "argument #2 dim 0 is 32 but 2*S + 1 = 33"),
])
def test_a_violating_input_is_refused_naming_the_constraint(compiled_halves, inputs, message):
    compiled, _ = compiled_halves
    with pytest.raises(braze.BrazeError) as error:
        compiled(*inputs)
    assert message in str(error.value)


def test_the_reference_interpreter_checks_the_spec_too():
    """Tests braze.export with a positional spec: the exported program
    refuses a size that is not a multiple."""
    model = Halves()
    program = braze.export(model, _inputs(16), dynamic_spec=braze.dynamic_spec({1: S}, {0: S // 2}, {0: 2 * S + 1}))
    inputs = _inputs(24)
    _close(program(*inputs), model(*inputs))
    with pytest.raises(braze.BrazeError, match="S must be a multiple of 8"):
        program(torch.randn(3, 20), torch.randn(10), torch.randn(41))


def test_the_decorator_form_attaches_the_spec():
    """Tests that a spec attached to a module class is used by braze.compile
    without being passed."""
    seq = braze.ShapeVar("seq", min=2, max=32)

    @braze.dynamic_spec(x={0: seq}, y={0: seq + 1})
    class Shifted(torch.nn.Module):
        def forward(self, x, y):
            return y[1:] * x

    compiled = braze.compile(Shifted(), (torch.randn(5), torch.randn(6)))
    for s in (2, 17, 32):
        x, y = torch.randn(s), torch.randn(s + 1)
        torch.testing.assert_close(compiled(x, y), y[1:] * x)
    with pytest.raises(braze.BrazeError, match=r"seq = 33 is outside its range \[2, 32\]"):
        compiled(torch.randn(33), torch.randn(34))


def test_the_decorator_form_on_a_function():
    """Tests a decorated plain function, an unbounded ShapeVar, and a
    spec given by argument name."""
    n = braze.ShapeVar("n")

    @braze.dynamic_spec(a={0: n})
    def double(a):
        return a + a

    program = braze.export(double, (torch.randn(4),))
    assert "braze.symbols = {n = [1, -1]}" in str(program)
    a = torch.randn(100)
    torch.testing.assert_close(program(a), a + a)


@pytest.mark.parametrize("declare, message", [
    (lambda: braze.ShapeVar("S", min=9, max=4), "min 9 is greater than max 4"),
    (lambda: braze.ShapeVar("S", min=9, max=15, multiple_of=8), "no multiple of 8 lies in [9, 15]"),
    (lambda: braze.ShapeVar("S", multiple_of=0), "multiple_of is 0"),
    (lambda: braze.ShapeVar("S", min=8, max=15, multiple_of=8), "allows one size only (8)"),
    (lambda: braze.ShapeVar("S", min=4, max=4), "allows one size only (4)"),
    (lambda: braze.ShapeVar("2S"), "must be an identifier"),
    (lambda: braze.ShapeVar("S", max=64) // 2, "(S)//2 is not exact for every allowed S"),
    (lambda: (braze.ShapeVar("S", multiple_of=4) + 1) // 2, "(S + 1)//2 is not exact"),
    (lambda: braze.ShapeVar("S") * braze.ShapeVar("T"), "only integer constants combine"),
    (lambda: braze.dynamic_spec(x={1: braze.ShapeVar("S", max=8)}, y={0: braze.ShapeVar("S", max=16)}),
     "two ShapeVars are named S"),
    (lambda: braze.dynamic_spec(x={1: 16}), "is 16, not a ShapeVar"),
])
def test_a_bad_declaration_is_refused(declare, message):
    with pytest.raises(braze.BrazeError) as error:
        declare()
    assert message in str(error.value)


class Pair(torch.nn.Module):
    def forward(self, x, y):
        return x + y


@pytest.mark.parametrize("spec, inputs, message", [
    (braze.dynamic_spec(z={0: S}), (torch.randn(8), torch.randn(8)), "marks argument 'z', but forward(x, y)"),
    (braze.dynamic_spec(x={1: S}), (torch.randn(8), torch.randn(8)),
     "marks dim 1 of argument 'x', which has rank 1"),
    (braze.dynamic_spec({0: S}, x={0: S}), (torch.randn(8), torch.randn(8)), "marks argument 'x' twice"),
    (braze.dynamic_spec({0: S}, {0: S}, {0: S}), (torch.randn(8), torch.randn(8)), "marks argument #2"),
    (braze.dynamic_spec(x={0: S}, y={0: S}), (torch.randn(8), torch.randn(16)),
     "the example argument 'y' dim 0 is 16, but S = 8 from argument 'x' dim 0"),
    (braze.dynamic_spec(x={0: S}, y={0: S}), (torch.randn(12), torch.randn(12)),
     "the example argument 'x' dim 0 is 12, but S must be a multiple of 8"),
    (braze.dynamic_spec(x={0: 2 * S}, y={0: 2 * S}), (torch.randn(16), torch.randn(16)),
     "uses S only in derived dims"),
    (braze.dynamic_spec(x={0: S}, y={0: S + 8}), (torch.randn(8), torch.randn(8)),
     "the example argument 'y' dim 0 is 8, but S + 8 = 16"),
])
def test_a_spec_that_does_not_fit_the_call_is_refused_at_capture(spec, inputs, message):
    with pytest.raises(braze.BrazeError) as error:
        braze.export(Pair(), inputs, dynamic_spec=spec)
    assert message in str(error.value)


def test_dynamic_shapes_and_a_spec_together_are_refused():
    with pytest.raises(braze.BrazeError, match="dynamic_shapes or dynamic_spec, not both"):
        braze.export(Pair(), (torch.randn(8), torch.randn(8)), dynamic_spec=braze.dynamic_spec(x={0: S}),
                     dynamic_shapes={"x": {0: torch.export.Dim("n")}, "y": None})


def test_a_constraint_torch_disproves_is_its_error():
    """Tests that a spec the model contradicts (x and y added, so equal, but
    declared as different ShapeVars) is torch's refusal, as a BrazeError."""
    t = braze.ShapeVar("T", min=8, max=64, multiple_of=8)
    with pytest.raises(braze.BrazeError, match="torch.export could not capture"):
        braze.export(Pair(), (torch.randn(8), torch.randn(8)), dynamic_spec=braze.dynamic_spec(x={0: S}, y={0: t}))


def test_a_keyword_argument_and_a_dim_counted_from_the_end():
    """Tests a spec on an input passed by keyword, marked as dim -1, with an
    offset below zero (`n - 1`)."""
    n = braze.ShapeVar("n", min=2, max=40)

    class Differences(torch.nn.Module):
        def forward(self, x, steps):
            return x[:, 1:] - x[:, :-1] + steps

    spec = braze.dynamic_spec(x={-1: n}, steps={0: n - 1})
    model = Differences()
    program = braze.export(model, (torch.randn(2, 6),), {"steps": torch.randn(5)}, dynamic_spec=spec)
    assert '{braze.dims = ["n - 1"]}' in str(program)
    for size in (2, 40):
        x, steps = torch.randn(2, size), torch.randn(size - 1)
        torch.testing.assert_close(program(x, steps=steps), model(x, steps=steps))
    with pytest.raises(braze.BrazeError, match="argument #1 dim 0 is 7 but n - 1 = 9"):
        program(torch.randn(2, 10), steps=torch.randn(7))


def test_torch_compile_says_it_takes_no_spec():
    compiled = torch.compile(torch.nn.Linear(4, 4), backend="braze",
                             options={"dynamic_spec": braze.dynamic_spec({0: S})})
    with pytest.raises(Exception, match="torch.compile does not take a dynamic_spec: mark dims with"):
        compiled(torch.randn(8, 4))


def test_one_tensor_passed_as_two_arguments():
    """Tests that marks are placed by argument, not by tensor identity."""
    t = torch.randn(16)
    program = braze.export(Pair(), (t, t), dynamic_spec=braze.dynamic_spec(x={0: S}, y={0: S}))
    assert str(program).count('braze.dims = ["S"]') == 2
    torch.testing.assert_close(program(torch.ones(24), torch.ones(24)), torch.full((24,), 2.0))
