"""Slicing, indexing, arange and views whose bounds are shape symbols: one
capture serves every size, the bounds stay `index` operands in the IR, and a
bound outside its dim is a run-time error."""

import math

import pytest
import torch
import torch.nn.functional as F
from mlir.dialects import arith

import braze

SEQ = torch.export.Dim("seq", min=2, max=32)
# `keys[:, 1:s:2]` has s // 2 rows: torch refuses a range where that may be 1.
WINDOW = torch.export.Dim("seq", min=4, max=32)


def _close(actual, expected):
    actual, expected = torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.shape, e.shape)
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotaryLayer(torch.nn.Module):
    """A LLaMA-style attention layer: rotary tables sliced by the current
    length (`self.cos[:s]`), positions from `arange`, a causal mask."""

    def __init__(self, d=32, heads=2, max_len=64):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.out = torch.nn.Linear(d, d, bias=False)
        self.norm = torch.nn.RMSNorm(d, eps=1e-6)
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(max_len).float(), inv)
        table = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", table.cos())
        self.register_buffer("sin", table.sin())

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        cos, sin = self.cos[:s], self.sin[:s]
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        position = torch.arange(s)
        mask = position[None, :] > position[:, None]
        attention = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
        return x + self.out(attention.transpose(1, 2).reshape(b, s, d))


class CacheWindow(torch.nn.Module):
    """A KV-cache read: the entries before the current position, and the
    newest row (`x[s - 1]`), the last `s` steps (`x[:, -s:]`) and positions
    from the current start (`arange(s, 2 * s)`)."""

    def __init__(self, slots=40, d=8):
        super().__init__()
        self.register_buffer("keys", torch.randn(2, slots, d))

    def forward(self, x, steps):
        s, n = x.shape[1], steps.shape[0]
        window = self.keys[:, :s]
        newest = window[:, s - 1]
        recent = x[:, -n:]
        positions = torch.arange(s, 2 * s)
        strided = self.keys[:, 1:s:2]
        return (x * window + newest[:, None]).sum(-1), recent * 2, positions, strided * 2


def _capture(model, args, dynamic_shapes, compile_):
    capture = braze.compile if compile_ else braze.export
    return capture(model, args, dynamic_shapes=dynamic_shapes)


@pytest.mark.parametrize("compile_", [False, True], ids=["export", "compile"])
def test_rotary_layer_one_capture_three_lengths(compile_):
    torch.manual_seed(0)
    model = RotaryLayer().eval()
    program = _capture(model, (torch.randn(2, 8, 32),), ({1: SEQ},), compile_)
    text = str(program.module if compile_ else program)
    assert "braze.extern" not in text, "every op is captured, none runs through torch"
    for s in (2, 17, 32):  # the minimum, a middle size and the maximum
        x = torch.randn(2, s, 32)
        with torch.no_grad():
            _close(program(x), model(x))


def test_symbolic_bounds_are_index_operands():
    program = braze.export(CacheWindow(), (torch.randn(2, 6, 8), torch.randn(3)),
                           dynamic_shapes=({1: WINDOW}, {0: torch.export.Dim("steps", min=1, max=4)}))
    text = str(program)
    assert "braze.extern" not in text
    # cache[:, :s], window[:, s - 1], x[:, -n:], cache[:, 1:s:2]
    assert "dim 1 [0 : %" in text and "dim 1 [%" in text
    assert "[1 : %" in text and ": 2] " in text
    assert "braze.iota start %" in text


@pytest.mark.parametrize("compile_", [False, True], ids=["export", "compile"])
def test_cache_window_numerics(compile_):
    torch.manual_seed(0)
    model = CacheWindow()
    program = _capture(model, (torch.randn(2, 6, 8), torch.randn(3)),
                       ({1: WINDOW}, {0: torch.export.Dim("steps", min=1, max=4)}), compile_)
    for s, n in [(4, 1), (9, 2), (32, 4)]:
        args = (torch.randn(2, s, 8), torch.randn(n))
        _close(program(*args), model(*args))


class Steps(torch.nn.Module):
    """narrow with a symbolic start, a slice and an arange with a symbolic
    step, an arange with a symbolic start, a row counted from the end, and
    constant negative bounds on a dynamic dim."""

    def forward(self, x, n, k):
        return (x.narrow(1, n.shape[0], 3) * 2, x[:, ::k.shape[0]] + 1, torch.arange(0, x.shape[1], k.shape[0]),
                torch.arange(n.shape[0], x.shape[1] + 5, 2), x[:, -n.shape[0]] * 3, x[:, :-1] * 4, x[:, -3:] * 5)


def test_narrow_steps_and_rows_from_the_end():
    model = Steps()
    dims = ({1: torch.export.Dim("s", min=8, max=32)}, {0: torch.export.Dim("p", min=1, max=4)},
            {0: torch.export.Dim("k", min=1, max=4)})
    program = braze.compile(model, (torch.randn(2, 12, 8), torch.randn(3), torch.randn(2)), dynamic_shapes=dims)
    assert not program.exported.imported.externs
    text = str(program.module)
    assert "braze.iota start 0.000000e+00 step %" in text and "braze.iota start %" in text
    for s, n, k in [(8, 1, 1), (13, 4, 3), (32, 2, 4)]:
        args = (torch.randn(2, s, 8), torch.randn(n), torch.randn(k))
        _close(program(*args), model(*args))


def test_symbolic_bound_of_unknown_sign_is_refused():
    # torch guards a bound's sign while tracing (here it would ask for
    # min=3), so only a range that leaves it open reaches the lowering: which
    # elements the bound selects would be decided per call, and it refuses.
    from mlir import ir

    from braze.frontend.lowerings.layout import _bound

    class Ranges:
        def symbol_range(self, position, name):
            return -2, 5

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            start = arith.ConstantOp(ir.IndexType.get(), 0).result
            with pytest.raises(braze.BrazeError, match=r"symbolic start whose sign is unknown \(range \[-2, 5\]\): "
                                                        r"give the size a range that decides it"):
                _bound(Ranges(), start, 12, 2, "start")


class SplitHeads(torch.nn.Module):
    def forward(self, x):
        b, s, d = x.shape
        heads = x.view(b, s, 4, d // 4).transpose(1, 2)
        merged = heads.transpose(1, 2).reshape(b * s, d)
        return merged + 1, heads.reshape(-1, d // 4).sum(0), x.reshape(b, s * d).sum(-1)


def test_reshape_with_symbolic_products():
    model = SplitHeads()
    program = braze.compile(model, (torch.randn(2, 5, 16),),
                            dynamic_shapes=({0: torch.export.Dim("b", min=2, max=8), 1: SEQ},))
    assert "braze.extern" not in str(program.module)
    for b, s in [(2, 2), (3, 11), (8, 32)]:
        x = torch.randn(b, s, 16)
        _close(program(x), model(x))


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_dynamic_dim_that_broadcasts_is_refused_with_how_to_mark_it():
    dims = ({0: torch.export.Dim("s", min=1, max=8)}, {0: torch.export.Dim("t", min=1, max=8)})
    with pytest.raises(braze.BrazeError, match=r"(?s)specialized it to be a constant \(1\).*Suggested fixes"):
        braze.export(Add(), (torch.randn(4, 8), torch.randn(1, 8)), dynamic_shapes=dims)


def test_torch_compile_gives_a_size_one_dim_its_own_graph(imported_graphs):
    compiled = torch.compile(Add(), backend="braze", dynamic=True)
    for rows in (4, 6, 9):
        x, y = torch.randn(rows, 8), torch.randn(rows, 8)
        _close(compiled(x, y), x + y)
    assert len(imported_graphs) == 1
    # A dim of size 1 broadcasts: torch specialises sizes 0 and 1, so this
    # call gets a second graph (with the dim static) instead of a wrong answer.
    x, y = torch.randn(4, 8), torch.randn(1, 8)
    _close(compiled(x, y), x + y)
    assert len(imported_graphs) == 2


def test_torch_compile_dynamic_one_graph_serves_every_length(imported_graphs):
    torch.manual_seed(0)
    model = RotaryLayer().eval()
    compiled = torch.compile(model, backend="braze", dynamic=True)
    for s in (3, 17, 40, 64):
        x = torch.randn(2, s, 32)
        with torch.no_grad():
            _close(compiled(x), model(x))
    assert len(imported_graphs) == 1, "one compile serves every length: nothing is specialised"
    assert not imported_graphs[0].externs, imported_graphs[0].externs
    assert "braze.slice" in str(imported_graphs[0].module)


class CacheStep(CacheWindow):
    """CacheWindow for torch.compile: the newest row as a one-row slice
    (Dynamo specialises a symbolic index into a static dim, `keys[:, s - 1]`:
    every length would be a new graph)."""

    def forward(self, x, steps):
        s, n = x.shape[1], steps.shape[0]
        window = self.keys[:, :s]
        newest = window[:, s - 1 : s]
        return ((x * window + newest).sum(-1), x[:, -n:] * 2, torch.arange(s, 2 * s),
                self.keys[:, 1:s:2] * 2)


def test_torch_compile_dynamic_cache_window_one_graph(imported_graphs):
    model = CacheStep()
    compiled = torch.compile(model, backend="braze", dynamic=True)
    # (Steps other than the batch of 2: Dynamo's duck sizing would tie them.)
    for s, n in [(6, 3), (13, 4), (32, 5)]:
        args = (torch.randn(2, s, 8), torch.randn(n))
        _close(compiled(*args), model(*args))
    assert len(imported_graphs) == 1, "one compile serves every length and position"
    assert not imported_graphs[0].externs, imported_graphs[0].externs


class LastSteps(torch.nn.Module):
    def forward(self, x, steps):
        return x[:, -steps.shape[0]:] * 2


def test_out_of_range_symbolic_bound_is_a_run_time_error():
    # Nothing in the ranges says `steps <= seq`: torch's trace assumes it, and
    # an input that breaks it must fail, never read before the tensor.
    model = LastSteps()
    program = braze.compile(model, (torch.randn(2, 6, 8), torch.randn(3)),
                            dynamic_shapes=({1: WINDOW}, {0: torch.export.Dim("steps", min=1, max=8)}))
    assert "braze.extern" not in str(program.module)
    for s, n in [(4, 1), (5, 5), (32, 8)]:
        args = (torch.randn(2, s, 8), torch.randn(n))
        _close(program(*args), model(*args))
    out_of_range = r"braze.slice.*bounds \[-2 : \d+\] are out of range for dim 1 of size 5"
    with pytest.raises(braze.BrazeError, match=out_of_range):
        program(torch.randn(2, 5, 8), torch.randn(7))


def test_kernels_read_symbolic_slices_in_place(monkeypatch):
    from braze.runtime import cpu, launch

    # The Python path's launch shows the tensors a kernel gets (the C++
    # launcher makes the same decisions: tests/python/backend/test_launcher.py).
    monkeypatch.setattr(launch, "native", None)
    launched = []
    real = cpu._NativeKernelCall.launch
    monkeypatch.setattr(cpu._NativeKernelCall, "launch",
                        lambda self, inputs, *rest: launched.append(list(inputs)) or real(self, inputs, *rest))
    real_combo = cpu._NativeComboCall.launch  # kernels grouped by braze-combo-kernels
    monkeypatch.setattr(cpu._NativeComboCall, "launch",
                        lambda self, prepared: launched.extend(list(p[0]) for p in prepared) or real_combo(self, prepared))
    model = CacheWindow()
    program = braze.compile(model, (torch.randn(2, 6, 8), torch.randn(3)),
                            dynamic_shapes=({1: WINDOW}, {0: torch.export.Dim("steps", min=1, max=4)}))
    x, steps = torch.randn(2, 9, 8), torch.randn(2)
    _close(program(x, steps), model(x, steps))
    # The window `keys[:, :s]` reaches its kernel as a view of the whole
    # cache (an offset and strides), not as a copy of 9 rows.
    cache_bytes = model.keys.numel() * model.keys.element_size()
    of_cache = [t for inputs in launched for t in inputs if t.untyped_storage().nbytes() == cache_bytes]
    windows = [t for t in of_cache if t.shape == (2, 9, 8)]
    assert windows and not windows[0].is_contiguous()
    # `keys[:, 1:s:2]` too: braze-collapse-dims does not merge its rows
    # (a reshape there would copy them), the kernel steps over them.
    assert [t for t in of_cache if t.shape == (2, 4, 8) and t.stride(1) == 16]


class PastPositions(torch.nn.Module):
    """A decode step's positions: `arange(new) + past`, the past length a
    SymInt added to a tensor (transformers' `position_ids`), and a float
    tensor scaled by it."""

    def forward(self, x, past):
        past_length = past.shape[1]
        positions = torch.arange(x.shape[1]) + past_length
        return positions, x * past_length - past_length


def test_torch_compile_symint_operand_of_a_tensor_op(imported_graphs):
    model = PastPositions()
    compiled = torch.compile(model, backend="braze", dynamic=True)
    for new, past in [(3, 5), (4, 11), (6, 40)]:
        args = (torch.randn(2, new), torch.randn(2, past, 8))
        got, expected = compiled(*args), model(*args)
        assert got[0].dtype == expected[0].dtype == torch.int64
        _close(got, expected)
    assert len(imported_graphs) == 1, "one compile serves every length"
    assert not imported_graphs[0].externs, imported_graphs[0].externs
