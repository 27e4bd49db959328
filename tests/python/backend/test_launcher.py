"""The CPU launcher (cxx/runtime/launch, braze.runtime.launch): kernel and
combo calls prepared in C++ give exactly what the Python path gives, on
every kind of call (combos, dynamic sizes, strided inputs, fused GEMMs,
arena carving, buffer reuse, failures); what it declines runs in Python and
says what is wrong; a call's Python work does not grow with its tensor
count; nested inputs and outputs go through prepared tree plans."""

from __future__ import annotations

import importlib
import logging
import sys
from collections import namedtuple

import pytest
import torch

import braze
from braze.runtime import launch
from braze.runtime.combo import ComboCall
from braze.runtime.executor import KernelCall

pytestmark = pytest.mark.skipif(launch.native is None, reason="braze was built without torch: no CPU launcher")


def _kernel_steps(program) -> list:
    return [step.run for step in program.steps if isinstance(step.run, (KernelCall, ComboCall))]


def _python_path(program) -> None:
    """Makes `program` run its kernels and argument checks in Python."""
    for call in _kernel_steps(program):
        call.native = False
    program._arguments.native = False


def _count_python_calls(program) -> list:
    """Records each kernel step that ran in Python (declined or forced)."""
    ran = []
    for call in _kernel_steps(program):
        def counting(env, call=call, prepared=call.prepared_call):
            ran.append(call.name)
            prepared(env)
        call.prepared_call = counting
    return ran


class _Mixed(torch.nn.Module):
    """Small independent chains (one combo), mixed dtypes, a row reduction,
    a GEMM with an epilogue, and an intermediate the arena holds."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 48)

    def forward(self, a, b, c, d, x):
        h = torch.nn.functional.gelu(self.linear(x))
        s = (h * h).softmax(-1)
        return (torch.sigmoid(a * 2) + 1, torch.tanh(b) * b, (c - 1).relu().to(torch.float64),
                d * 3 + 1, s.sum(0), s * 2)


class _Chain(torch.nn.Module):
    """Kernels between reductions, one after the other: intermediates in
    the arena, some overwritten in place."""

    def forward(self, x):
        a = torch.softmax(x * 1.5, dim=-1)
        b = torch.nn.functional.layer_norm(a.exp() + x, (x.shape[-1],))
        c = torch.softmax(b - b.mean(dim=0, keepdim=True), dim=0)
        return (c.tanh() * 2).sum(dim=0), a.sum(dim=-1)


def _mixed_args(rows: int = 8, strided: bool = False):
    b = torch.randn(16, rows).t() if strided else torch.randn(rows, 16)
    return (torch.randn(64), b, torch.randn(3, 5), torch.randint(-50, 50, (rows, 4)), torch.randn(rows * 4, 32))


@pytest.fixture(scope="module")
def compiled():
    """name -> (model, compiled model, arguments for (rows, strided))."""
    mixed, chain = _Mixed(), _Chain()
    rows = torch.export.Dim("rows", min=2, max=4096)
    return {
        "static": (mixed, braze.compile(mixed, _mixed_args()), _mixed_args),
        "dynamic": (mixed, braze.compile(mixed, _mixed_args(5), dynamic_shapes=(
            None, {0: rows}, None, {0: rows}, {0: 4 * rows})), _mixed_args),
        "chain": (chain, braze.compile(chain, (torch.randn(64, 128),)), _chain_args),
        # Dynamic buffers are not in the arena: dead inputs are overwritten.
        "chain-dynamic": (chain, braze.compile(chain, (torch.randn(64, 128),), dynamic_shapes=({0: rows},)),
                          _chain_args),
        "reshaped": (_Reshaped(), braze.compile(_Reshaped(), _reshaped_args(6, False)), _reshaped_args),
        "unfused": (_Unfused(), braze.compile(_Unfused(), (torch.randn(64, 32), torch.randn(32, 16)),
                                              dynamic_shapes=({0: rows}, None), options={"epilogue_fusion": False}),
                    lambda rows, strided: (torch.randn(rows, 32), torch.randn(16, 32).t() if strided
                                           else torch.randn(32, 16))),
    }


class _Unfused(torch.nn.Module):
    """A GEMM's result (fresh, then dead) overwritten by the pointwise
    kernel after it (compiled without epilogue fusion)."""

    def forward(self, x, w):
        return torch.relu(x @ w) * 2


class _Reshaped(torch.nn.Module):
    """A kernel's result reshaped for the next kernel, which also reads an
    argument that may be strided: the reshape has no step (that kernel takes
    the result's tensor as it is, with the strides of its own types); the
    reshape returned keeps its step."""

    def forward(self, x, y):
        a = torch.softmax(x * 1.5, dim=-1)
        return (a.reshape(y.shape).exp() * y).sum(-1), a.reshape(-1, 64)


def _reshaped_args(rows: int, strided: bool):
    y = torch.randn(8, 4, rows).permute(2, 1, 0) if strided else torch.randn(rows, 4, 8)
    return torch.randn(rows, 32), y


def _chain_args(rows: int, strided: bool):
    return (torch.randn(128, rows).t() if strided else torch.randn(rows, 128),)


@pytest.mark.parametrize("kind,rows,strided", [
    ("static", 8, False), ("static", 8, True), ("dynamic", 2, False), ("dynamic", 37, True),
    ("dynamic", 3000, False), ("chain", 64, False), ("chain", 64, True), ("chain-dynamic", 5, True),
    ("chain-dynamic", 700, False), ("unfused", 3, True), ("unfused", 100, False), ("reshaped", 6, False),
    ("reshaped", 6, True),
])
def test_native_and_python_paths_agree_exactly(compiled, kind, rows, strided):
    model, compiled_model, arguments = compiled[kind]
    args = arguments(rows, strided)
    program = compiled_model.compiled.program
    ran_in_python = _count_python_calls(program)
    native = compiled_model(*args)
    assert ran_in_python == [], "the launcher declined a call it should take"
    assert all(isinstance(call.native, launch.native.NativeLaunch) for call in _kernel_steps(program))
    saved = {id(call): call.native for call in _kernel_steps(program)}, program._arguments.native
    _python_path(program)
    try:
        python = compiled_model(*args)
    finally:
        for call in _kernel_steps(program):
            call.native = saved[0][id(call)]
        program._arguments.native = saved[1]
    assert len(ran_in_python) == len(_kernel_steps(program))
    for got, want, eager in zip(native, python, model(*args)):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
        torch.testing.assert_close(got, eager.to(got.dtype), rtol=1e-4, atol=1e-4)


def test_the_samples_cover_the_launchers_cases(compiled):
    steps = [step for _, compiled_model, _ in compiled.values() for step in _kernel_steps(compiled_model.compiled.program)]
    calls = [c for step in steps for c in (step.calls if isinstance(step, ComboCall) else [step])]
    assert any(isinstance(step, ComboCall) for step in steps), "no combo"
    assert any(c.carve for c in calls), "no result carved from the arena"
    assert any(c.reuse for c in calls), "no result reusing an input's buffer"
    assert any(c.extent_inputs for c in calls), "no fused GEMM"
    assert any(c.dynamic for c in calls) and any(c.static for c in calls)


def test_a_reshape_only_static_kernels_read_has_no_step(compiled):
    from braze.runtime.executor import _ViewCall

    _, compiled_model, _ = compiled["reshaped"]
    assert str(compiled_model.compiled.module).count("braze.reshape") == 2
    views = [step.run for step in compiled_model.compiled.program.steps if isinstance(step.run, _ViewCall)]
    assert [view.name for view in views] == ["braze.reshape"], "only the returned reshape runs"


def test_a_dim_that_disagrees_is_declined_and_reported_by_the_python_path():
    program = braze.compile_mlir("""
    func.func @f(%x: tensor<?x4xf32>, %y: tensor<?x4xf32>) -> tensor<?x4xf32> {
      %s = braze.add %x, %y : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
      return %s : tensor<?x4xf32>
    }""").program
    ran_in_python = _count_python_calls(program)
    x = torch.randn(3, 4)
    torch.testing.assert_close(program(x, x)[0], x + x)
    assert ran_in_python == []
    with pytest.raises(braze.BrazeError, match=r"input #1 dim 0 is 20 but the kernel's domain has 12"):
        program(x, torch.randn(5, 4))
    assert len(ran_in_python) == 1


def test_integer_division_by_zero_fails_through_the_launcher():
    program = braze.compile_mlir("""
    func.func @f(%x: tensor<8xi64>, %y: tensor<8xi64>) -> tensor<8xi64> {
      %q = braze.div %x, %y : tensor<8xi64>, tensor<8xi64> -> tensor<8xi64>
      return %q : tensor<8xi64>
    }""").program
    ran_in_python = _count_python_calls(program)
    with pytest.raises(braze.BrazeError, match="integer division by zero"):
        program(torch.arange(8), torch.zeros(8, dtype=torch.int64))
    assert ran_in_python == []


def test_wrong_arguments_get_the_full_checks_message():
    program = braze.compile_mlir("""
    func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
      %e = braze.exp %x : tensor<4xf32>
      return %e : tensor<4xf32>
    }""").program
    with pytest.raises(braze.BrazeError, match="argument #0"):
        program(torch.randn(5))
    with pytest.raises(braze.BrazeError, match="argument #0"):
        program(torch.randn(4, dtype=torch.float64))
    torch.testing.assert_close(program(torch.ones(4))[0], torch.ones(4).exp())


class _Updates(torch.nn.Module):
    def forward(self, tensors: list):
        return [t * 2 + 1 for t in tensors]


def _python_calls_per_call(count: int) -> int:
    tensors = [torch.randn(16) for _ in range(count)]
    compiled = braze.compile(_Updates(), (tensors,))
    compiled(tensors)
    calls = []

    def profile(frame, event, argument):
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        compiled(tensors)
    finally:
        sys.setprofile(None)
    return len(calls)


def test_a_calls_python_work_does_not_grow_with_its_tensors():
    # Kernels group 8 per combo: the steps (and the Python frames they
    # open) grow by one per 8 tensors, never by one per tensor.
    few, many = _python_calls_per_call(8), _python_calls_per_call(64)
    assert many - few <= 64 // 8 - 1, (few, many)


Pair = namedtuple("Pair", "left right")


class _Nested(torch.nn.Module):
    def forward(self, batch: dict, extra: tuple, scale=None):
        out = {"sum": batch["a"] + batch["b"], "parts": [batch["a"] * 2, (extra[0].exp(), extra[1][0])]}
        return out, extra[1][1] - 1


def _nested_args():
    return ({"a": torch.randn(4), "b": torch.randn(4)}, (torch.randn(3), [torch.randn(2), torch.randn(5)]))


def test_nested_inputs_and_outputs_keep_their_structure():
    model = _Nested()
    compiled = braze.compile(model, _nested_args())
    assert compiled._inputs is not None and compiled._outputs is not None
    args = _nested_args()
    got, want = compiled(*args), model(*args)
    assert type(got) is tuple and type(got[0]) is dict and list(got[0]) == ["sum", "parts"]
    assert type(got[0]["parts"]) is list and type(got[0]["parts"][1]) is tuple
    torch.testing.assert_close(got, want)
    # Dict keys in another order are the same structure.
    batch, extra = args
    torch.testing.assert_close(compiled({"b": batch["b"], "a": batch["a"]}, extra), want)


@pytest.mark.parametrize("bad,message", [
    (lambda a: ({"a": a[0]["a"]}, a[1]), "do not match the compiled signature"),
    (lambda a: ({"a": a[0]["a"], "c": a[0]["b"]}, a[1]), "do not match the compiled signature"),
    (lambda a: (a[0], list(a[1])), "do not match the compiled signature"),
    (lambda a: (a[0], (a[1][0], a[1][1] + [a[1][0]])), "do not match the compiled signature"),
    (lambda a: (a[0], (a[1][0], [a[1][1][0], "text"])), "argument"),
])
def test_inputs_of_another_structure_are_refused(bad, message):
    compiled = braze.compile(_Nested(), _nested_args())
    with pytest.raises(braze.BrazeError, match=message):
        compiled(*bad(_nested_args()))


def test_a_namedtuple_goes_through_pytree():
    class Model(torch.nn.Module):
        def forward(self, pair: Pair):
            return Pair(pair.left + 1, pair.right * 2)

    args = (Pair(torch.randn(3), torch.randn(3)),)
    compiled = braze.compile(Model(), args)
    assert compiled._inputs is None and compiled._outputs is None
    got = compiled(*args)
    assert isinstance(got, Pair)
    torch.testing.assert_close(got.left, args[0].left + 1)


def test_a_launcher_for_another_torch_is_not_used(monkeypatch, caplog):
    monkeypatch.setattr(launch.native, "TORCH_VERSION", "0.0.0")
    with caplog.at_level(logging.WARNING, logger="braze.runtime"):
        reloaded = importlib.reload(launch)
    try:
        assert reloaded.native is None
        assert "built for torch 0.0.0" in caplog.text
        program = braze.compile_mlir("""
        func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
          %e = braze.exp %x : tensor<4xf32>
          return %e : tensor<4xf32>
        }""").program
        torch.testing.assert_close(program(torch.ones(4))[0], torch.ones(4).exp())
        assert all(call.native is False for call in _kernel_steps(program))
    finally:
        monkeypatch.undo()
        importlib.reload(launch)
    assert launch.native is not None


def _copy(name: str, source: str, shape: str) -> str:
    """A braze.kernel copying `source` (a 2-d tensor of `shape`)."""
    return f"""
    {name} = braze.kernel ins({source} : tensor<{shape}xf32>) domain [{shape.replace('x', ', ')}] reduce [] : tensor<{shape}xf32> {{
    ^bb0(%i: index, %j: index, %n: index, %m: index, %t: tensor<{shape}xf32>):
      %v = tensor.extract %t[%i, %j] : tensor<{shape}xf32>
      braze.store %v, 0 [%i, %j] : f32
    }}"""


HANDED_OVER = f"""
func.func @f(%x: tensor<4x8xf32>, %s: index) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<2x16xf32>, tensor<4x8xf32>) {{
  {_copy("%k", "%x", "4x8")}
  %chain = braze.reshape %k : tensor<4x8xf32> -> tensor<32xf32>
  %chained = braze.reshape %chain : tensor<32xf32> -> tensor<2x16xf32>
  {_copy("%a", "%chained", "2x16")}
  %ramp = braze.iota start %s step 1.0 : tensor<32xf32>
  %iota = braze.reshape %ramp : tensor<32xf32> -> tensor<8x4xf32>
  {_copy("%b", "%iota", "8x4")}
  %argument = braze.reshape %x : tensor<4x8xf32> -> tensor<8x4xf32>
  {_copy("%c", "%argument", "8x4")}
  %permuted = braze.reshape %k : tensor<4x8xf32> -> tensor<8x4xf32>
  %p = braze.permute %permuted [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  {_copy("%d", "%p", "4x8")}
  return %b, %c, %a, %d : tensor<8x4xf32>, tensor<8x4xf32>, tensor<2x16xf32>, tensor<4x8xf32>
}}"""


def test_which_reshapes_are_handed_over():
    """A reshape of a kernel's result or an iota (contiguous), read by
    static kernels or by a reshape that is, has no step; one of an
    argument (which may be strided) or one a permute reads keeps it."""
    from braze.runtime.executor import _pointer_reshapes

    module = braze.parse(HANDED_OVER)
    block = module.mlir_module.body.operations[0].regions[0].blocks[0]
    reshapes = [op.operation.results[0] for op in block.operations if op.operation.name == "braze.reshape"]
    skipped = _pointer_reshapes(block)
    # %chain, %chained, %iota, %argument, %permuted
    assert [value in skipped for value in reshapes] == [True, True, True, False, False]
    program = braze.compile_mlir(HANDED_OVER)
    x = torch.randn(8, 4).t()  # strided: its reshape copies
    b, c, a, d = program(x, 3)
    torch.testing.assert_close(b, torch.arange(3.0, 35.0).reshape(8, 4))
    torch.testing.assert_close(c, x.reshape(8, 4))
    torch.testing.assert_close(a, x.reshape(2, 16))
    torch.testing.assert_close(d, x.reshape(8, 4).t())
