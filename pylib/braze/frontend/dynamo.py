"""The `torch.compile(model, backend="braze")` backend.

Graphs go through AOTAutograd with the core aten decompositions, so inference
graphs and both halves of training graphs arrive as core aten. Each is
imported into braze and handed to a function that prepares it to run:
`braze.compiler.dynamo_backend` (registered as "braze") compiles it for the
CPU, `reference_backend` runs it on the reference interpreter. An op braze
has no lowering for becomes a `braze.extern` call; any failure of braze
itself (a graph it cannot import or compile, an internal error, a failure
when the compiled graph runs) makes that graph run in eager PyTorch instead,
with one warning naming the cause: never an exception.
"""

from __future__ import annotations

import warnings
from typing import Callable

import torch
from torch._dynamo.exc import RestartAnalysis
from torch._functorch.aot_autograd import make_boxed_func
from torch._subclasses.fake_tensor import unset_fake_temporarily

from braze.errors import BrazeError, CollectiveError
from braze.frontend.decompositions import without_attention
from braze.frontend.importer import ImportedGraph, UnsupportedOpError, import_graph

# Causes already warned about: each is said once per process.
_warned: set[str] = set()


def _warn_eager(cause: str) -> None:
    if cause not in _warned:
        _warned.add(cause)
        warnings.warn(f"braze: {cause}; this graph runs in eager PyTorch", stacklevel=3)


def _cause(error: Exception) -> str:
    """A one-line description of why braze gave up on a graph."""
    if isinstance(error, UnsupportedOpError):
        return f"{error.op} is not supported ({error.message})"
    if isinstance(error, BrazeError):
        return error.message.splitlines()[0]
    return f"internal error {type(error).__name__}: {error} (a braze bug)"


class BoxedFunction:
    """Runs an imported graph with AOTAutograd's flat arguments.

    It takes them boxed (one list it may clear, so inputs can be freed early).
    The flag is an instance attribute: torch._dynamo.disable wraps the
    backward with functools.wraps, which copies only the instance __dict__.
    If braze fails on a call, that call and every later one run `eager`
    (the graph in PyTorch) instead, after one warning.
    """

    def __init__(self, imported: ImportedGraph, run: Callable[..., list], eager: Callable[..., object]):
        self.imported = imported
        self.run = run
        self.eager = eager
        self._boxed_call = True

    def __call__(self, args: list):
        inputs = list(args)
        args.clear()
        if self.run is not None:
            try:
                with torch.no_grad():
                    outputs = self.run(*self.imported.arguments(inputs))
            except CollectiveError:
                raise  # the ranks diverged: running the graph again would make it worse
            except Exception as error:  # never an exception from braze: eager instead
                _warn_eager(f"the compiled graph failed ({_cause(error)})")
                self.run = None
            else:
                return tuple(self.imported.outputs(outputs))
        return tuple(self.eager(*inputs))


def _shape_ranges(example_inputs) -> dict:
    fake_mode = torch._guards.detect_fake_mode(example_inputs)
    if fake_mode is None or fake_mode.shape_env is None:
        return {}
    return dict(fake_mode.shape_env.var_to_range)


def _graph_compiler(prepare: Callable[[ImportedGraph], Callable[..., list]]):
    def compile_graph(graph_module: torch.fx.GraphModule, example_inputs):
        try:
            # AOTAutograd may call its compilers with its fake mode still
            # active; braze reads the graph's real constants (a
            # `torch.tensor(...)` made in forward) and runs real tensors
            # while it prepares the program.
            with unset_fake_temporarily():
                imported = import_graph(graph_module, range_constraints=_shape_ranges(example_inputs))
                run = prepare(imported)
        except RestartAnalysis:
            raise  # Dynamo's own signal to trace again, not a failure
        except Exception as error:  # any braze failure: this graph runs in eager
            _warn_eager(_cause(error))
            return make_boxed_func(graph_module.forward)
        return BoxedFunction(imported, run, graph_module.forward)

    return compile_graph


def _attention_as_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                       scale=None, enable_gqa=False):
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # SDPA turns a boolean mask into an additive one before picking a
        # kernel; the math kernel itself only adds.
        attn_mask = torch.where(attn_mask, 0.0, float("-inf")).to(query.dtype)
    return torch.ops.aten._scaled_dot_product_attention_math.default(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)[0]


def _attention_in_math_form(graph_module: torch.fx.GraphModule) -> None:
    """Points SDPA calls at its math formula before AOTAutograd traces them.

    Otherwise SDPA becomes the fused CPU kernel, whose backward is one opaque
    op, and whose forward's decomposition saves values that kernel's backward
    does not expect.
    """
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is torch._C._nn.scaled_dot_product_attention:
            node.target = _attention_as_math
    graph_module.recompile()


def make_backend(prepare: Callable[[ImportedGraph], Callable[..., list]]):
    """A torch.compile backend: each graph AOTAutograd produces (forward and
    backward) is imported, and `prepare(imported)` returns the function that
    runs it on flat inputs."""

    def backend(graph_module: torch.fx.GraphModule, example_inputs, **kwargs):
        from torch._decomp import core_aten_decompositions
        from torch._dynamo.backends.common import aot_autograd

        compile_graph = _graph_compiler(prepare)
        decompositions = core_aten_decompositions()
        training = torch.is_grad_enabled() and any(
            isinstance(value, torch.Tensor) and value.requires_grad for value in example_inputs)
        if training:
            _attention_in_math_form(graph_module)
        else:  # attention stays one op, braze.attention
            decompositions = without_attention(decompositions)
        aot = aot_autograd(fw_compiler=compile_graph, bw_compiler=compile_graph, decompositions=decompositions)
        try:
            return aot(graph_module, example_inputs, **kwargs)
        except RestartAnalysis:
            raise  # Dynamo's own signal to trace again, not a failure
        except Exception as error:  # tracing for braze failed: eager (SDPA as math)
            _warn_eager(_cause(error))
            return graph_module.forward

    return backend


def _on_reference(imported: ImportedGraph) -> Callable[..., list]:
    from braze import reference

    return lambda *inputs: reference.run(imported.module, *inputs)


# Runs every graph on the reference interpreter: the oracle for the backends.
reference_backend = make_backend(_on_reference)
