"""Control flow: `braze.switch` for models, and the capture of torch.cond
and torch.while_loop (higher-order ops in the FX graph that torch.export and
torch.compile produce) as the `braze.switch` and `braze.while` ops.

`switch(index, branches, *operands)` is written with torch.cond, so it is
captured wherever torch.cond is (torch.export, torch.compile, eager): an
N-way switch is a chain of N - 1 two-way conds, `index <= 0`, then
`index <= 1`, ..., which clamps the index to the branches as the
`braze.switch` op does. Each cond becomes a 2-way `braze.switch` (branch 0
the false branch, branch 1 the true one).

A branch, a loop condition and a loop body are FX subgraphs; each is
imported into its region by a nested node importer whose placeholders are
the region's block arguments, so each region sees only its own values.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.fx as fx
from mlir import ir

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.complex import ComplexValue, is_complex_meta
from braze.frontend.types import tensor_type

_NO_COMPLEX = "complex tensors cannot cross a control-flow region's boundary yet (docs/control-flow.md)"


def switch(index, branches: Sequence[Callable], *operands):
    """Runs `branches[index](*operands)`, with `index` a Python int or a
    rank-0 integer tensor clamped to `[0, len(branches))` (as jax.lax.switch
    does). Every branch takes the operands (tensors) and returns tensors of
    the same shapes and dtypes (or a tuple of them). Captured as braze.switch
    ops; the branch is chosen when the compiled program runs."""
    branches = list(branches)
    if not branches:
        raise BrazeError("braze.switch needs at least one branch")
    if not all(callable(branch) for branch in branches):
        raise BrazeError("braze.switch: every branch must be callable")
    if isinstance(index, int):
        return branches[min(max(index, 0), len(branches) - 1)](*operands)
    if not isinstance(index, torch.Tensor) or index.dim() != 0 or index.dtype.is_floating_point \
            or index.dtype.is_complex:
        raise BrazeError(f"braze.switch: the index must be an int or a rank-0 integer tensor, got {_describe(index)}")
    return _chain(index, branches, 0, tuple(operands))


def _chain(index: torch.Tensor, branches: list, first: int, operands: tuple):
    """`branches[first:]` chosen by `index` (clamped) as nested torch.cond."""
    if first == len(branches) - 1:
        return branches[first](*operands)
    return torch.cond(index <= first, lambda i, *o: branches[first](*o),
                      lambda i, *o: _chain(i, branches, first + 1, o), (index, *operands))


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {list(value.shape)}"
    return type(value).__name__


def _subgraph(value, what: str, node: fx.Node) -> fx.GraphModule:
    if not isinstance(value, fx.GraphModule):
        raise BrazeError(f"{node.target}: the {what} is not a graph module ({type(value).__name__})")
    return value


def _region_types(values: list, what: str, node: fx.Node, tensors_only: bool = False) -> list[ir.Type]:
    types = []
    for number, value in enumerate(values):
        if isinstance(value, ComplexValue):
            raise BrazeError(f"{node.target}: {what} #{number} is a complex tensor; {_NO_COMPLEX}")
        ok = isinstance(value, ir.Value) and (
            isinstance(value.type, ir.RankedTensorType) or (not tensors_only and isinstance(value.type, ir.IndexType)))
        if not ok:
            kinds = "tensors" if tensors_only else "tensors or sizes"
            raise BrazeError(f"{node.target}: {what} #{number} is {value!r}; braze captures {kinds} there")
        types.append(value.type)
    return types


def _result_types(node: fx.Node) -> list[ir.Type]:
    metas = node.meta["val"]
    metas = list(metas) if isinstance(metas, (list, tuple)) else [metas]
    for number, meta in enumerate(metas):
        if is_complex_meta(meta):
            raise BrazeError(f"{node.target}: result #{number} is a complex tensor; {_NO_COMPLEX}")
        if not isinstance(meta, torch.Tensor):
            raise BrazeError(f"{node.target}: result #{number} is a {type(meta).__name__}; braze captures "
                             f"tensor results of control flow")
    return [tensor_type(meta) for meta in metas]


def _import_region(importer, graph_module: fx.GraphModule, region: ir.Region, types: list[ir.Type]) -> None:
    """Imports `graph_module` into `region` (a new block taking `types`),
    ending it with braze.yield of the graph's outputs."""
    block = region.blocks.append(*types)
    inner = type(importer)(graph_module, {})
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(types):
        raise BrazeError(f"a control-flow subgraph takes {len(placeholders)} input(s) but is given {len(types)}")
    inner.values.update(zip(placeholders, block.arguments))
    output = next(n for n in graph_module.graph.nodes if n.op == "output").args[0]
    results = list(output) if isinstance(output, (list, tuple)) else [output]
    with ir.InsertionPoint(block):
        for node in graph_module.graph.nodes:
            inner.import_node(node)
        values = []
        for number, result in enumerate(results):
            value = inner.values.get(result) if isinstance(result, fx.Node) else None
            if not isinstance(value, ir.Value):
                raise BrazeError(f"a control-flow subgraph returns {result!r} as output #{number}; braze captures "
                                 f"tensors there")
            values.append(value)
        bz.YieldOp(values)
    importer.externs.extend(inner.externs)


def import_cond(importer, node: fx.Node):
    """`torch.ops.higher_order.cond(pred, true_graph, false_graph, operands)`."""
    pred, true_graph, false_graph, operands = fx.node.map_aggregate(node.args[:4], importer._value)
    if not (isinstance(pred, ir.Value) and isinstance(pred.type, ir.RankedTensorType)
            and pred.type.rank == 0):
        raise BrazeError(f"torch.cond: the predicate is {pred!r}; braze captures a predicate computed as a "
                         f"rank-0 tensor (a condition on sizes alone is decided by torch while tracing, or "
                         f"must be written as a tensor)")
    operands = list(operands)
    types = _region_types(operands, "operand", node)
    op = bz.SwitchOp(_result_types(node), pred, operands, 2)
    for region, graph in zip(op.regions, (false_graph, true_graph)):
        _import_region(importer, _subgraph(graph, "branch", node), region, types)
    return tuple(op.results)


def import_while_loop(importer, node: fx.Node):
    """`torch.ops.higher_order.while_loop(cond_graph, body_graph, carried,
    additional_inputs)`."""
    cond_graph, body_graph, carried, extras = fx.node.map_aggregate(node.args[:4], importer._value)
    carried, extras = list(carried), list(extras)
    carried_types = _region_types(carried, "carried value", node, tensors_only=True)
    types = carried_types + _region_types(extras, "additional input", node)
    op = bz.WhileOp(_result_types(node), carried, extras)
    _import_region(importer, _subgraph(cond_graph, "condition", node), op.regions[0], types)
    _import_region(importer, _subgraph(body_graph, "body", node), op.regions[1], types)
    return tuple(op.results)


HIGHER_ORDER = {
    torch.ops.higher_order.cond: import_cond,
    torch.ops.higher_order.while_loop: import_while_loop,
}
