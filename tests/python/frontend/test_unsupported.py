"""Input braze cannot take: a clear error naming the op and the source line,
or (under torch.compile) eager execution with one warning."""

import re
import warnings

import pytest
import torch

import braze


class UsesCumsum(torch.nn.Module):
    def forward(self, x):
        y = x.relu()
        return torch.cumsum(y, dim=0)  # no braze lowering


def test_export_names_the_op_and_the_source_line():
    with pytest.raises(braze.BrazeError) as info:
        braze.export(UsesCumsum(), (torch.randn(4, 3),))
    message = str(info.value)
    assert "unsupported op aten.cumsum.default" in message
    assert re.search(r"test_unsupported\.py:\d+: return torch\.cumsum\(y, dim=0\)", message)
    assert info.value.op == "aten.cumsum.default"


def test_torch_compile_falls_back_to_eager_with_one_warning():
    torch._dynamo.reset()
    from braze.frontend import dynamo

    dynamo._warned_ops.discard("aten.cumsum.default")
    model = UsesCumsum()
    compiled = torch.compile(model, backend="braze")
    x = torch.randn(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = compiled(x)
        second = compiled(x + 1)
    braze_warnings = [w for w in caught if "braze:" in str(w.message)]
    assert len(braze_warnings) == 1
    assert "aten.cumsum.default is not supported; this graph runs in eager PyTorch" in str(braze_warnings[0].message)
    torch.testing.assert_close(first, model(x))
    torch.testing.assert_close(second, model(x + 1))


def test_training_dropout_is_refused():
    class Dropping(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.dropout(x, 0.5, training=True)

    with pytest.raises(braze.BrazeError, match="dropout|native_dropout|bernoulli|rand"):
        braze.export(Dropping(), (torch.randn(4, 4),))


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
