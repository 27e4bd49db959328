"""The model zoo (torchvision and transformers architectures from their
configs, random weights, small sizes) through `braze.compile` and
`torch.compile(backend="braze")`, against eager PyTorch.

Every model must compile with no whole-graph fallback, match eager to 1e-4
(relative to the output's largest magnitude), run fewer than 5% of its ops
as extern calls, and take a new sequence length without a crash: text models
compile with a dynamic sequence length under `braze.compile` and are called
at a second length under `torch.compile` (Dynamo recompiles with a symbolic
length). No op may run through torch because of a braze bug. The causal
language models also generate under `torch.compile` with transformers' own
KV cache.
"""

import os
import warnings

import pytest
import torch

import braze
from braze.frontend import dynamo
from braze.testing.zoo import DECODERS, SMALL, ZOO, causal_forward, decode, import_libraries

try:
    import_libraries()
except ImportError as error:
    if os.environ.get("BRAZE_REQUIRE_TOOLCHAINS"):
        raise
    pytest.skip(f"the model zoo needs torchvision and transformers ({error})", allow_module_level=True)

SEQUENCES = (SMALL.sequence, 17)


def _first_tensor(output) -> torch.Tensor:
    """The output to compare: a tensor, a tuple's first, a ModelOutput's
    last_hidden_state."""
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "last_hidden_state"):
        return output.last_hidden_state
    return _first_tensor(output[0])


def _assert_matches(actual, expected):
    actual, expected = _first_tensor(actual), _first_tensor(expected)
    assert actual.shape == expected.shape
    scale = expected.abs().max().item()
    assert scale > 0, "the reference output is all zeros: the check would prove nothing"
    error = (actual - expected).abs().max().item() / scale
    assert error < 1e-4, f"max error {error:.2e} relative to {scale:.3g}"


def _shortened(kwargs, length):
    return {name: value[:, :length] for name, value in kwargs.items()}


@pytest.mark.parametrize("entry", ZOO, ids=lambda entry: entry.name)
def test_braze_compile(entry):
    model, args, kwargs = entry.make(SMALL)
    dynamic = None
    if entry.family == "text":
        sequence = torch.export.Dim("sequence", min=2, max=512)
        dynamic = {name: {1: sequence} for name in kwargs}
    compiled = braze.compile(model, args, kwargs=kwargs, dynamic_shapes=dynamic)
    stats = compiled.stats
    bugs = [e for e in compiled.exported.imported.externs if "braze bug" in e.reason]
    assert not bugs, bugs
    assert stats["externs"] < 0.05 * stats["captured_ops"], stats["extern_ops"]
    # Indexing (transformers' masks, BERT's token types) and ResNet's max pool
    # are captured, not run through torch.
    captured = {"aten.index.Tensor", "aten.gather.default", "aten.max_pool2d_with_indices.default"}
    assert not captured & set(stats["extern_ops"]), stats["extern_ops"]
    for length in SEQUENCES if entry.family == "text" else (None,):
        inputs = _shortened(kwargs, length) if length else kwargs
        with torch.no_grad():
            _assert_matches(compiled(*args, **inputs), model(*args, **inputs))


@pytest.mark.parametrize("entry", ZOO, ids=lambda entry: entry.name)
def test_torch_compile(entry, imported_graphs):
    dynamo._warned.clear()
    model, args, kwargs = entry.make(SMALL)
    compiled = torch.compile(model, backend="braze")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for length in SEQUENCES if entry.family == "text" else (None,):
            inputs = _shortened(kwargs, length) if length else kwargs
            with torch.no_grad():
                _assert_matches(compiled(*args, **inputs), model(*args, **inputs))
    fallbacks = [str(w.message) for w in caught if "braze:" in str(w.message)]
    assert not fallbacks, fallbacks
    bugs = [e for graph in imported_graphs for e in graph.externs if "braze bug" in e.reason]
    assert not bugs, bugs


@pytest.mark.parametrize("decoder", DECODERS, ids=lambda decoder: decoder.name)
def test_torch_compile_decode(decoder, imported_graphs):
    """Generation with transformers' DynamicCache under torch.compile: the
    prompt, a step, then steps at growing past lengths (Dynamo recompiles
    once with the past length symbolic). Every step matches eager, nothing
    falls back, and no op runs through torch: the cache's concat, grouped
    heads' attention and the positions after the past all compile."""
    dynamo._warned.clear()
    model, prompt = decoder.make(SMALL)
    tokens = torch.randint(1, 100, (prompt.shape[0], 4))
    expected = decode(causal_forward(model), prompt, tokens)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = decode(torch.compile(causal_forward(model), backend="braze"), prompt, tokens)
    fallbacks = [str(w.message) for w in caught if "braze:" in str(w.message)]
    assert not fallbacks, fallbacks
    for step, (actual, reference) in enumerate(zip(got, expected)):
        error = (actual - reference).abs().max().item() / reference.abs().max().item()
        assert error < 1e-4, f"step {step}: max error {error:.2e}"
    assert len(imported_graphs) == 3, "the prompt, the first step, and one graph for every later length"
    assert [e for graph in imported_graphs for e in graph.externs] == []
