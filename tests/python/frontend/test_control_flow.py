"""torch.cond, torch.while_loop and braze.switch: captured as braze.switch
and braze.while, the branch chosen when the compiled program runs, numerics
against eager on the CPU program and the reference interpreter."""

import warnings

import pytest
import torch

import braze


def _close(actual, expected):
    actual, expected = torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


class Cond(torch.nn.Module):
    """torch.cond on a tensor predicate; each branch is a fusible chain."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x, gate):
        def positive(x):
            return torch.softmax(self.linear(x), dim=-1) * 2.0

        def negative(x):
            return torch.tanh(x) - x.mean(dim=-1, keepdim=True)

        return torch.cond(gate.sum() > 0, positive, negative, (x,)) + 1.0


class Loop(torch.nn.Module):
    """torch.while_loop: doubles x and adds y until the counter reaches n."""

    def forward(self, x, y, n):
        def condition(i, acc):
            return i < n

        def body(i, acc):
            return i + 1, torch.relu(acc * 2.0 + y)

        count, result = torch.while_loop(condition, body, (torch.zeros((), dtype=torch.int64), x))
        return result, count


class Switch(torch.nn.Module):
    """braze.switch with four branches, the index a tensor."""

    def forward(self, index, x):
        return braze.switch(index, [lambda x: x + 1.0, lambda x: torch.sigmoid(x) * x,
                                    lambda x: x.exp().sum(dim=0, keepdim=True) - x, lambda x: -x], x)


@pytest.fixture(scope="module")
def cond_program():
    torch.manual_seed(0)
    model = Cond().eval()
    example = (torch.randn(4, 8), torch.ones(3))
    return model, braze.compile(model, example)


def test_cond_is_a_two_way_switch(cond_program):
    _, compiled = cond_program
    text = str(compiled.exported.module)
    assert text.count("braze.switch") == 1 and "braze.extern" not in text
    lowered = str(compiled.module)
    # Fusion works inside each branch: one kernel per branch for its chain.
    assert lowered.count("braze.switch") == 1 and lowered.count("braze.kernel") >= 3


@pytest.mark.parametrize("gate", [1.0, -1.0])
def test_cond_takes_both_branches(cond_program, gate):
    model, compiled = cond_program
    x, g = torch.randn(4, 8), torch.full((3,), gate)
    with torch.no_grad():
        expected = model(x, g)
    _close(compiled(x, g), expected)
    _close(compiled.exported(x, g), expected)  # the reference interpreter


@pytest.mark.parametrize("n", [0, 1, 5])
def test_while_loop_iterations(n):
    model = Loop()
    x, y = torch.randn(3, 4), torch.randn(4)
    compiled = braze.compile(model, (x, y, torch.tensor(2)))
    assert "braze.while" in str(compiled.module)
    expected = model(x, y, torch.tensor(n))
    _close(compiled(x, y, torch.tensor(n)), expected)
    _close(compiled.exported(x, y, torch.tensor(n)), expected)
    assert int(compiled(x, y, torch.tensor(n))[1]) == n


def test_switch_selects_every_branch_and_clamps():
    model = Switch()
    x = torch.randn(3, 5)
    compiled = braze.compile(model, (torch.tensor(0), x))
    for index in [-2, 0, 1, 2, 3, 7]:
        i = torch.tensor(index)
        expected = model(i, x)
        _close(compiled(i, x), expected)
        _close(compiled.exported(i, x), expected)
    # Branch 2 is not branch 3, so clamping really chose.
    assert not torch.allclose(model(torch.tensor(2), x), model(torch.tensor(3), x))
    assert torch.equal(model(torch.tensor(9), x), -x)


def test_switch_with_python_index_and_errors():
    x = torch.randn(3)
    assert torch.equal(braze.switch(5, [lambda x: x, lambda x: -x], x), -x)
    with pytest.raises(braze.BrazeError, match="at least one branch"):
        braze.switch(0, [], x)
    with pytest.raises(braze.BrazeError, match="rank-0 integer tensor"):
        braze.switch(torch.tensor([0, 1]), [lambda x: x, lambda x: -x], x)


def test_torch_compile_runs_control_flow():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Cond().eval()
    compiled = torch.compile(model, backend="braze", fullgraph=True)
    x = torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no fallback to eager
        for gate in (1.0, -1.0):
            g = torch.full((3,), gate)
            with torch.no_grad():
                _close(compiled(x, g), model(x, g))
    loop = torch.compile(Loop(), backend="braze", fullgraph=True)
    x, y = torch.randn(3, 4), torch.randn(4)
    for n in (0, 3):
        _close(loop(x, y, torch.tensor(n)), Loop()(x, y, torch.tensor(n)))
    switch = torch.compile(Switch(), backend="braze", fullgraph=True)
    x = torch.randn(3, 5)
    for index in (0, 1, 2, 3, 4):
        _close(switch(torch.tensor(index), x), Switch()(torch.tensor(index), x))


class Nested(torch.nn.Module):
    """A cond inside a while loop's body: regions inside regions."""

    def forward(self, x, n):
        def condition(i, acc):
            return i < n

        def body(i, acc):
            step = torch.cond(i % 2 == 0, lambda a: a * 2.0, lambda a: a - 1.0, (acc,))
            return i + 1, step

        return torch.while_loop(condition, body, (torch.zeros((), dtype=torch.int64), x))[1]


def test_cond_inside_while_loop():
    x = torch.randn(6)
    compiled = braze.compile(Nested(), (x, torch.tensor(3)))
    assert str(compiled.module).count("braze.switch") == 1
    for n in (0, 1, 4):
        _close(compiled(x, torch.tensor(n)), Nested()(x, torch.tensor(n)))


def test_torch_compile_failure_is_eager_with_one_warning(monkeypatch):
    from braze.runtime import control_flow

    def broken(*args, **kwargs):
        raise braze.BrazeError("control flow broke on purpose")

    monkeypatch.setattr(control_flow.SwitchCall, "__call__", broken)
    torch._dynamo.reset()
    model = Cond().eval()
    compiled = torch.compile(model, backend="braze")
    x, g = torch.randn(4, 8), torch.ones(3)
    with pytest.warns(UserWarning, match="control flow broke on purpose") as record:
        with torch.no_grad():
            _close(compiled(x, g), model(x, g))
            _close(compiled(x, -g), model(x, -g))
    assert sum("braze" in str(w.message) for w in record) == 1


def test_predicate_on_a_dynamic_size_is_refused_by_name():
    def f(x):
        return torch.cond(x.shape[0] > 4, lambda x: x + 1, lambda x: x - 1, (x,))

    with pytest.raises(braze.BrazeError, match="unsupported op operator.gt"):
        braze.export(f, (torch.randn(6),), dynamic_shapes=({0: torch.export.Dim("n", min=2, max=16)},))
