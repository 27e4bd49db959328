"""Whole models through braze.export and torch.compile, against eager PyTorch."""

import re

import pytest
import torch
from models import GPT2, MLP, Heads, MaskedAttention, PreNormBlock, RMSNormSwiGLU

import braze
from braze.tools.opt import binary_path


def _inputs(name):
    g = torch.Generator().manual_seed(1)
    return {
        "mlp": (torch.randn(4, 32, generator=g),),
        "prenorm_block": (torch.randn(2, 8, 32, generator=g),),
        "masked_attention": (torch.randn(2, 8, 32, generator=g), torch.rand(2, 8, 8, generator=g) > 0.3),
        "gpt2": (torch.randint(0, 128, (2, 16), generator=g),),
        "rmsnorm_swiglu": (torch.randn(3, 5, 32, generator=g),),
        "heads": (torch.randn(6, 16, generator=g), torch.randint(0, 10, (6,), generator=g)),
    }[name]


MODELS = {
    "mlp": MLP, "prenorm_block": PreNormBlock, "masked_attention": MaskedAttention,
    "gpt2": GPT2, "rmsnorm_swiglu": RMSNormSwiGLU, "heads": Heads,
}


def _model(name):
    torch.manual_seed(0)
    return MODELS[name]().eval()


def assert_close(actual, expected):
    actual, expected = torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_export_matches_eager(name):
    model, args = _model(name), _inputs(name)
    program = braze.export(model, args)
    with torch.no_grad():
        assert_close(program(*args), model(*args))
    text = str(program)
    assert "braze.parameter" in text and "func.func @forward" in text


@pytest.mark.parametrize("name", MODELS)
def test_torch_compile_matches_eager(name):
    torch._dynamo.reset()
    model, args = _model(name), _inputs(name)
    compiled = torch.compile(model, backend="braze")
    with torch.no_grad():
        assert_close(compiled(*args), model(*args))


def test_torch_compile_imports_inference_graphs(monkeypatch):
    from braze.frontend import dynamo

    imported = []
    real = dynamo.import_graph
    monkeypatch.setattr(dynamo, "import_graph", lambda gm, **kw: imported.append(gm) or real(gm, **kw))
    torch._dynamo.reset()
    model, args = _model("prenorm_block"), _inputs("prenorm_block")
    with torch.no_grad():
        torch.compile(model, backend="braze")(*args)
    assert len(imported) == 1


@pytest.mark.parametrize("name", ["mlp", "prenorm_block", "rmsnorm_swiglu"])
def test_training_graphs_forward_and_backward(name, monkeypatch):
    from braze.frontend import dynamo

    imported = []
    real = dynamo.import_graph
    monkeypatch.setattr(dynamo, "import_graph", lambda gm, **kw: imported.append(gm) or real(gm, **kw))
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = MODELS[name]().train()
    model.apply(lambda m: setattr(m, "p", 0.0) if isinstance(m, torch.nn.Dropout) else None)
    x = _inputs(name)[0].clone().requires_grad_()

    torch.compile(model, backend="braze")(x).square().sum().backward()
    compiled_grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    model(x).square().sum().backward()
    eager_grads = [p.grad for p in model.parameters()] + [x.grad]

    assert len(imported) == 2, "expected a forward and a backward graph"
    for c, e in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["prenorm_block", "gpt2"])
def test_torch_compile_dynamic_serves_three_sizes(name, imported_graphs):
    model = _model(name)
    compiled = torch.compile(model, backend="braze", dynamic=True)
    for b, t in [(2, 8), (3, 17), (5, 31)]:
        x = torch.randint(0, 128, (b, t)) if name == "gpt2" else torch.randn(b, t, 32)
        with torch.no_grad():
            assert_close(compiled(x), model(x))
    assert len(imported_graphs) == 1
    header = str(imported_graphs[0].module).splitlines()[0]
    assert re.fullmatch(r"module attributes \{braze.symbols = \{s\d+ = \[2, -1\], s\d+ = \[2, -1\]\}\} \{", header)


@pytest.mark.parametrize("name", ["prenorm_block", "gpt2", "rmsnorm_swiglu"])
def test_one_capture_serves_three_sizes(name):
    model = _model(name)
    batch = torch.export.Dim("batch", min=1, max=8)
    seq = torch.export.Dim("seq", min=2, max=32)
    args = _inputs(name)
    program = braze.export(model, args, dynamic_shapes=({0: batch, 1: seq},))
    text = str(program)
    assert "braze.symbols" in text and "tensor<?x?x" in text
    for b, t in [(1, 2), (3, 17), (8, 32)]:
        if name == "gpt2":
            x = torch.randint(0, 128, (b, t))
        else:
            x = torch.randn(b, t, args[0].shape[-1])
        with torch.no_grad():
            assert_close(program(x), model(x))


def test_dynamic_dims_record_symbols_ranges_and_equalities():
    model = _model("masked_attention")
    batch = torch.export.Dim("batch", min=1, max=8)
    seq = torch.export.Dim("seq", min=2, max=32)
    program = braze.export(model, _inputs("masked_attention"),
                           dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq, 2: seq}))
    text = str(program)
    ranges = dict(re.findall(r"(s\d+) = (\[\d+, \d+\])", text.splitlines()[0]))
    by_range = {r: sym for sym, r in ranges.items()}
    b, t = by_range["[1, 8]"], by_range["[2, 32]"]
    # Both inputs name the same symbols: the equalities between them are kept.
    assert f'{{braze.dims = ["{b}", "{t}", 32]}}' in text
    assert f'{{braze.dims = ["{b}", "{t}", "{t}"]}}' in text


def test_inputs_outside_the_range_are_rejected():
    program = braze.export(_model("mlp"), _inputs("mlp"),
                           dynamic_shapes=({0: torch.export.Dim("rows", min=2, max=16)},))
    with pytest.raises(braze.BrazeError, match=r"= 17 is outside its range \[2, 16\] \(argument #0 dim 0\)"):
        program(torch.randn(17, 32))
    with pytest.raises(braze.BrazeError, match="argument #0 dim 1 is 31 but the function expects 32"):
        program(torch.randn(4, 31))


def test_saved_file_is_read_by_braze_opt(tmp_path):
    import subprocess

    program = braze.export(_model("prenorm_block"), _inputs("prenorm_block"),
                           dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=8)},))
    path = tmp_path / "block.mlir"
    program.save(path)
    assert "models.py" in path.read_text(), "source locations are kept"
    run = subprocess.run([str(binary_path()), "--braze-simplify", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "braze.addmm" in run.stdout and "braze.symbols" in run.stdout
