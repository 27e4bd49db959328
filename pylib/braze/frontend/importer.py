"""FX graph (core aten) to a braze module: one `func.func` per graph.

Three layers, as in torch-mlir's FX importer: `import_graph` makes the module
and the function signature, `_NodeImporter` walks the nodes in order and
dispatches on `node.op` then on the call target, and the lowerings in
`braze.frontend.lowerings` emit the ops of one node.
"""

from __future__ import annotations

import operator
import os
import re
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from mlir import ir
from mlir.dialects import func

from braze._native import new_context
from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import Builder
from braze.frontend.complex import ComplexValue, boundary_type, involves_complex, is_complex_meta, join, \
    lower_complex, split
from braze.frontend.control_flow import HIGHER_ORDER
from braze.frontend.extern import emit_extern
from braze.frontend.lowerings import LOWERINGS, target_name
from braze.frontend.symbols import arg_dims_attr, free_symbols, symbols_attr
from braze.frontend.types import element_type, tensor_type
from braze.ir import Module

aten = torch.ops.aten
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep

# Graph nodes that only assert facts torch already checked while tracing.
_ASSERTIONS = {
    aten._assert_tensor_metadata.default, aten._assert_scalar.default,
    aten.sym_constrain_range_for_size.default, aten._assert_async.msg,
}


class UnsupportedOpError(BrazeError):
    """The graph uses an op braze cannot import; `op` names it."""

    def __init__(self, message: str, op: str):
        super().__init__(message)
        self.op = op


@dataclass(frozen=True)
class ExternCall:
    """A node imported as `braze.extern`: its op, why it was not lowered,
    and where it is in the user's source."""

    op: str
    reason: str
    source: str


@dataclass
class ImportedGraph:
    """A graph imported into `module`, with what a caller needs to run it.

    Inputs that were None when the graph was captured (an optional mask
    left out) are no function arguments, and None outputs are no results:
    `arguments` and `outputs` convert between the graph's flat inputs and
    outputs and the function's.
    """

    module: Module
    parameter_names: list[str]
    none_outputs: list[int] = field(default_factory=list)
    externs: list[ExternCall] = field(default_factory=list)
    none_inputs: list[int] = field(default_factory=list)
    op_count: int = 0  # the graph's op nodes (assertions and getitem not counted)
    # Function arguments and results that are complex tensors in the graph
    # and their torch.view_as_real form in the function.
    complex_arguments: list[int] = field(default_factory=list)
    complex_results: list[int] = field(default_factory=list)

    def arguments(self, flat: list) -> list:
        """The function's arguments among the graph's flat inputs."""
        flat = self._without_none(flat)
        if self.complex_arguments:
            flat = list(flat)
            for number in self.complex_arguments:
                if isinstance(flat[number], torch.Tensor) and flat[number].is_complex():
                    flat[number] = torch.view_as_real(flat[number])
        return flat

    def _without_none(self, flat: list) -> list:
        if not self.none_inputs:
            return flat
        for number in self.none_inputs:
            if number < len(flat) and flat[number] is not None:
                raise BrazeError(f"input #{number} was None when the model was captured, so it must stay None "
                                 f"(capture again with a tensor there to pass one)")
        skip = set(self.none_inputs)
        return [value for number, value in enumerate(flat) if number not in skip]

    def outputs(self, results: list) -> list:
        """The graph's flat outputs: the function's results, with its None
        outputs put back and its complex outputs as complex tensors."""
        for number in self.complex_results:
            results[number] = torch.view_as_complex(results[number])
        for number in self.none_outputs:
            results.insert(number, None)
        return results


def source_of(node: fx.Node) -> tuple[str, int, str] | None:
    """(file, line, code) of the user's line that produced `node`."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)', trace)
    if not frames:
        return None
    # The innermost frame of the user's code: a call into a torch library
    # (torch.distributed's functional collectives) names the user's line.
    users = [frame for frame in frames if not frame[0].startswith(_TORCH_DIR)]
    file, line, code = (users or frames)[-1]
    return file, int(line), code.strip()


def _one_line(error: BrazeError) -> str:
    return "; ".join(line.strip() for line in str(error).splitlines() if line.strip())


def describe_source(node: fx.Node) -> str:
    source = source_of(node)
    return f"{source[0]}:{source[1]}: {source[2]}" if source else f"graph node '{node.name}'"


def _location(node: fx.Node) -> ir.Location:
    source = source_of(node)
    if source:
        return ir.Location.file(source[0], source[1], 0)
    return ir.Location.name(node.name)


def _is_tensor_meta(meta) -> bool:
    return isinstance(meta, torch.Tensor)


def _value_type(meta) -> ir.Type:
    if is_complex_meta(meta):
        return boundary_type(meta)
    if _is_tensor_meta(meta):
        return tensor_type(meta)
    if isinstance(meta, (int, torch.SymInt)):
        return ir.IndexType.get()
    raise BrazeError(f"graph values of type {type(meta).__name__} are not supported")


def import_graph(
    graph_module: fx.GraphModule,
    *,
    parameters: dict[str, str] | None = None,
    range_constraints: dict | None = None,
    func_name: str = "forward",
) -> ImportedGraph:
    """Imports `graph_module` as `func.func @<func_name>`.

    `parameters` maps placeholder names to state-dict names: those
    placeholders become `braze.parameter` ops, every other placeholder a
    function argument. `range_constraints` maps each shape symbol to its
    range (torch.export's `range_constraints`, or a ShapeEnv's var_to_range).
    """
    parameters = parameters or {}
    graph = graph_module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    inputs = [n for n in placeholders if n.name not in parameters]
    none_inputs = [number for number, n in enumerate(inputs) if n.meta.get("val") is None]
    args = [n for n in inputs if n.meta.get("val") is not None]
    outputs = next(n for n in graph.nodes if n.op == "output").args[0]
    results = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    none_outputs = [i for i, r in enumerate(results) if r is None]
    results = [r for r in results if r is not None]

    context = new_context("func", "arith", "tensor", "braze")  # the ops the importer builds
    with context, ir.Location.unknown():
        module = ir.Module.create()
        used = free_symbols([n.meta["val"] for n in args])
        if range_constraints and used:
            module.operation.attributes["braze.symbols"] = symbols_attr(range_constraints, used)
        arg_types = [_value_type(n.meta["val"]) for n in args]
        result_types = []
        for r in results:
            if not isinstance(r, fx.Node):
                raise BrazeError(f"graph output {r!r} is not a value; only tensors and sizes are supported")
            result_types.append(_value_type(r.meta["val"]))
        with ir.InsertionPoint(module.body):
            function = func.FuncOp(func_name, (arg_types, result_types))
        function.arg_attrs = ir.ArrayAttr.get([arg_dims_attr(n.meta["val"]) for n in args])
        block = function.add_entry_block()
        with ir.InsertionPoint(block):
            importer = _NodeImporter(graph_module, parameters)
            importer.values.update(zip(args, block.arguments))
            for node, argument in zip(args, block.arguments):
                if is_complex_meta(node.meta["val"]):
                    importer.values[node] = split(node, argument)
            importer.values.update((inputs[number], None) for number in none_inputs)
            for node in graph.nodes:
                importer.import_node(node)
            values = [importer.values[r] for r in results]
            func.ReturnOp([join(v) if isinstance(v, ComplexValue) else v for v in values])
        try:
            module.operation.verify()
        except ir.MLIRError as error:
            raise BrazeError.from_mlir("the imported module is invalid (a braze bug)", error) from None
    op_count = sum(1 for n in graph.nodes if n.op == "call_function"
                   and n.target not in _ASSERTIONS and n.target is not operator.getitem)
    return ImportedGraph(Module(module), sorted(set(parameters.values())), none_outputs, importer.externs,
                         none_inputs, op_count,
                         [number for number, n in enumerate(args) if is_complex_meta(n.meta["val"])],
                         [number for number, r in enumerate(results) if is_complex_meta(r.meta["val"])])


class _NodeImporter:
    def __init__(self, graph_module: fx.GraphModule, parameters: dict[str, str]):
        self.graph_module = graph_module
        self.parameters = parameters
        self.values: dict[fx.Node, object] = {}
        self.externs: list[ExternCall] = []
        # Where a lowering builds before its ops join the function (a block
        # of its own, so finding them does not walk the function's ops).
        self._staging_module = ir.Module.create()
        self.staging = self._staging_module.body

    def import_node(self, node: fx.Node) -> None:
        if node.op in ("output",) or node in self.values:
            return
        with _location(node):
            handler = getattr(self, f"_import_{node.op}", None)
            if handler is None:
                raise BrazeError(f"FX node kind '{node.op}' is not supported ({describe_source(node)})")
            self.values[node] = handler(node)

    def _import_placeholder(self, node: fx.Node):
        meta = node.meta["val"]
        if is_complex_meta(meta):  # held in its view_as_real form (braze.export)
            return split(node, bz.ParameterOp(boundary_type(meta), self.parameters[node.name]).result)
        return bz.ParameterOp(tensor_type(meta), self.parameters[node.name]).result

    def _import_get_attr(self, node: fx.Node):
        value = getattr(self.graph_module, node.target)
        if isinstance(value, fx.GraphModule):
            return value  # a branch of a higher-order op, which refuses it
        if not isinstance(value, torch.Tensor):
            raise BrazeError(f"graph attribute '{node.target}' is a {type(value).__name__}, not a tensor")
        if value.is_complex():
            return split(node, constant_tensor(torch.view_as_real(value)))
        return constant_tensor(value)

    def _import_call_function(self, node: fx.Node):
        target = node.target
        if target in _ASSERTIONS:
            return None
        if target in HIGHER_ORDER:
            return HIGHER_ORDER[target](self, node)
        name = target_name(target)
        args = fx.node.map_aggregate(node.args, self._value)
        kwargs = fx.node.map_aggregate(node.kwargs, self._value)
        if involves_complex(node, (args, kwargs)):
            try:
                return lower_complex(node, args, kwargs)
            except BrazeError as error:
                raise UnsupportedOpError(f"{error.message} at {describe_source(node)}", name) from None
            except Exception as error:  # a bug in a complex lowering: say so, never crash
                raise UnsupportedOpError(f"internal error lowering complex {name} at {describe_source(node)} "
                                         f"(a braze bug): {type(error).__name__}: {error}", name) from error
        lowering = LOWERINGS.get(target)
        if lowering is None:
            reason = "no lowering"
        else:
            # The lowering builds in the staging block: its ops are checked
            # there and moved into the function, or erased if it refuses.
            body = ir.InsertionPoint.current
            try:
                with ir.InsertionPoint(self.staging):
                    value = lowering(Builder(node), *args, **kwargs)
                staged = list(self.staging.operations)
                for op in staged:
                    op.verify()
            except BrazeError as error:  # before MLIRError, its base class
                reason = _one_line(error)
            except ir.MLIRError as error:
                reason = _one_line(BrazeError.from_mlir("the lowering made invalid IR (a braze bug)", error))
            except Exception as error:  # a lowering bug: the op still runs, through torch
                reason = f"internal error in the lowering (a braze bug): {type(error).__name__}: {error}"
            else:
                for op in staged:
                    body.insert(op.detach_from_parent())
                return value
            for op in reversed(list(self.staging.operations)):
                op.erase()
        try:
            value = emit_extern(target, node.meta.get("val"), args, kwargs)
        except BrazeError as error:
            raise UnsupportedOpError(
                f"unsupported op {name} at {describe_source(node)} ({reason}; {error.message}; "
                f"see docs/ops.md)", name) from None
        self.externs.append(ExternCall(name, reason, describe_source(node)))
        return value

    def _value(self, x):
        return self.values[x] if isinstance(x, fx.Node) else x


def constant_tensor(value: torch.Tensor) -> ir.Value:
    """A tensor literal; bf16 goes through f32 since numpy has no bfloat16."""
    value = value.detach().cpu().contiguous()
    if value.dtype == torch.bfloat16:
        f32 = constant_tensor(value.float())
        result = ir.RankedTensorType.get(list(value.shape), element_type(torch.bfloat16))
        return bz.CastOp(result, f32).result
    array = value.numpy()
    ttype = ir.RankedTensorType.get(list(value.shape), element_type(value.dtype))
    attr = ir.DenseElementsAttr.get(array, signless=True, type=ttype)
    return bz.ConstantOp(attr).result
