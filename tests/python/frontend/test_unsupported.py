"""Input braze cannot take: a clear error naming the op and the source line,
or (under torch.compile) eager execution with one warning."""

import re
import warnings

import pytest
import torch

import braze


class UsesMap(torch.nn.Module):
    def forward(self, x):
        from torch._higher_order_ops.map import map as higher_order_map

        y = x.relu()
        return higher_order_map(lambda v: v * 2 + 1, y)  # no extern: not an aten op


def test_export_names_the_op_and_the_source_line():
    with pytest.raises(braze.BrazeError) as info:
        braze.export(UsesMap(), (torch.randn(4, 3),))
    message = str(info.value)
    assert "unsupported op" in message and "map_impl" in message
    assert "is not an aten overload, so it cannot run as an extern call" in message
    assert re.search(r"unsupported op torch\.ops\.higher_order\.map_impl at \S+:\d+: ", message)  # where it is
    assert info.value.op == "torch.ops.higher_order.map_impl"


def test_an_op_without_a_lowering_runs_as_an_extern_call():
    class UsesCumsum(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x.relu(), dim=0) * 2

    program = braze.export(UsesCumsum(), (torch.randn(4, 3),))
    assert [(e.op, e.reason) for e in program.imported.externs] == [("aten.cumsum.default", "no lowering")]
    assert 'braze.extern "aten.cumsum.default"' in str(program)
    x = torch.randn(4, 3)
    torch.testing.assert_close(program(x), UsesCumsum()(x))


def test_a_refused_form_of_a_lowered_op_runs_as_an_extern_call():
    # An output_padding on a plain convolution is refused by the lowering;
    # torch's convolution takes it (and ignores it), so it runs there.
    class OddConvolution(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(3, 2, 3, 3))

        def forward(self, x):
            return torch.ops.aten.convolution.default(x, self.weight, None, [1, 1], [0, 0], [1, 1],
                                                      False, [1, 1], 1).relu()

    model = OddConvolution()
    program = braze.export(model, (torch.randn(1, 2, 6, 6),))
    (extern,) = program.imported.externs
    assert extern.op == "aten.convolution.default"
    assert "output_padding is only for a transposed convolution" in extern.reason
    x = torch.randn(1, 2, 6, 6)
    with torch.no_grad():
        torch.testing.assert_close(program(x), model(x))


def test_torch_compile_runs_an_unlowered_op_as_an_extern_call():
    torch._dynamo.reset()
    from braze.frontend import dynamo

    dynamo._warned.clear()

    class Sorting(torch.nn.Module):
        def forward(self, x):  # sort has no lowering; it returns (values, indices)
            return torch.ops.aten.sort.default(x.relu())[0] + 1

    model = Sorting()
    compiled = torch.compile(model, backend="braze")
    x = torch.randn(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = compiled(x)
        second = compiled(x + 1)
    braze_warnings = [w for w in caught if "braze:" in str(w.message)]
    assert not braze_warnings  # sort runs as an extern call: nothing falls back
    torch.testing.assert_close(first, model(x))
    torch.testing.assert_close(second, model(x + 1))


def test_torch_compile_compiles_a_tensor_made_in_forward():
    """A tensor literal made in forward (Falcon's and DeBERTa's scales,
    Swin's mask fill value) is a real constant of the graph AOTAutograd
    hands over while its fake mode is still active: braze compiles it, with
    no fallback to eager."""
    torch._dynamo.reset()
    from braze.frontend import dynamo

    dynamo._warned.clear()

    class ScaledByLiteral(torch.nn.Module):
        def forward(self, x):
            return x * torch.sqrt(torch.tensor(16.0)) + torch.tensor([1.0, 2.0, 3.0])

    model = ScaledByLiteral()
    x = torch.randn(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            out = torch.compile(model, backend="braze")(x)
    assert not [w for w in caught if "braze:" in str(w.message)]
    torch.testing.assert_close(out, model(x))


@pytest.mark.parametrize("stage", ["compile", "call"])
def test_torch_compile_never_raises_for_a_braze_failure(monkeypatch, stage):
    """Any failure inside braze, when a graph compiles or when it runs,
    makes that graph run in eager with one warning naming the cause."""
    from braze.frontend import dynamo
    from braze.runtime.executor import Program

    def broken(*args, **kwargs):
        raise RuntimeError("injected failure")

    if stage == "compile":
        monkeypatch.setattr(braze.compiler, "compile_mlir", broken)
    else:
        monkeypatch.setattr(Program, "__call__", broken)
    torch._dynamo.reset()
    dynamo._warned.clear()
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU())
    compiled = torch.compile(model, backend="braze")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            outputs = [compiled(torch.full((2, 4), float(k))) for k in range(3)]
    messages = [str(w.message) for w in caught if "braze:" in str(w.message)]
    assert len(messages) == 1, messages
    assert "internal error RuntimeError: injected failure" in messages[0]
    assert "this graph runs in eager PyTorch" in messages[0]
    with torch.no_grad():
        for k, out in enumerate(outputs):
            torch.testing.assert_close(out, model(torch.full((2, 4), float(k))))


def test_state_mutation_is_refused():
    model = torch.nn.BatchNorm1d(4).train()
    with pytest.raises(braze.BrazeError, match="mutates state"):
        braze.export(model, (torch.randn(8, 4),))


def test_untraceable_model_is_a_braze_error():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    with pytest.raises(braze.BrazeError, match="torch.export could not capture the model"):
        braze.export(DataDependent(), (torch.randn(3),))


def test_wrong_inputs_to_an_exported_program():
    program = braze.export(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
    with pytest.raises(braze.BrazeError, match="argument #0 dim 1 is 5 but the function expects 4"):
        program(torch.randn(3, 5))
    with pytest.raises(braze.BrazeError, match="do not match the exported signature"):
        program(torch.randn(3, 4), torch.randn(3, 4))
    with pytest.raises(braze.BrazeError, match="float64|f64|dtype|element type"):
        program(torch.randn(3, 4, dtype=torch.float64))
