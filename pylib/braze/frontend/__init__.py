"""PyTorch capture: `braze.export` and the `torch.compile` backend.

Parameters and buffers of an exported model become `braze.parameter` ops
named by their state-dict keys, and `ExportedProgram.parameters` holds their
values: the IR stays small, and one copy of the weights can serve several
programs. Under `torch.compile` they stay function arguments instead, because
training updates them in place between calls.
"""

from __future__ import annotations

import functools
import warnings

from pathlib import Path

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from braze.errors import BrazeError
from braze.frontend.control_flow import switch
from braze.frontend.decompositions import decompose_for_export
from braze.frontend.importer import ImportedGraph, UnsupportedOpError, import_graph
from braze.frontend.spec import DynamicSpec, ShapeVar, dynamic_spec, spec_of
from braze.ir import Module

__all__ = ["DynamicSpec", "ExportedProgram", "ShapeVar", "UnsupportedOpError", "dynamic_spec", "export", "switch"]

_WEIGHT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


class ExportedProgram:
    """A model captured by `braze.export`: the IR plus its weights."""

    def __init__(self, imported: ImportedGraph, parameters: dict[str, torch.Tensor], in_spec, out_spec):
        self._imported = imported
        self.parameters = parameters
        self._in_spec = in_spec
        self._out_spec = out_spec

    @property
    def module(self) -> Module:
        return self._imported.module

    def __str__(self) -> str:
        return str(self.module)

    def save(self, path) -> None:
        """Writes the IR, with source locations, as a file braze-opt reads."""
        text = self.module.mlir_module.operation.get_asm(enable_debug_info=True)
        Path(path).write_text(text)

    def __call__(self, *args, **kwargs):
        """Runs the program on the reference interpreter; same inputs and
        output structure as the model."""
        from braze import reference

        flat, spec = pytree.tree_flatten((args, kwargs))
        if self._in_spec is not None and spec != self._in_spec:
            raise BrazeError(f"inputs do not match the exported signature:\n got {spec}\n expected {self._in_spec}")
        with torch.no_grad():
            outputs = reference.run(self.module, *self._imported.arguments(flat), parameters=self.parameters)
        return pytree.tree_unflatten(self._imported.outputs(outputs), self._out_spec)

    @property
    def imported(self) -> ImportedGraph:
        """The imported graph: module, extern calls, op count, None inputs
        and outputs."""
        return self._imported


class _FunctionModule(torch.nn.Module):
    """A plain function as the module torch.export takes; its forward has
    the function's signature, so dynamic dims are named as in the function."""

    def __init__(self, function):
        super().__init__()
        self.forward = functools.wraps(function)(lambda *args, **kwargs: function(*args, **kwargs))


def export(model, args, kwargs=None, dynamic_shapes=None, dynamic_spec: DynamicSpec | None = None) -> ExportedProgram:
    """Captures `model(*args, **kwargs)` (a module or a function) through
    torch.export and the core aten decompositions. `dynamic_shapes` takes what torch.export takes
    (`torch.export.Dim`); each dynamic dim becomes `?`, with its symbol and
    range recorded in the module. `dynamic_spec` (`braze.dynamic_spec`, or
    the one attached to the model by its decorator form) declares them by
    ShapeVar instead, with divisors, in names the runtime's checks use."""
    if not isinstance(args, tuple):
        args = (args,)
    kwargs = kwargs or {}
    if dynamic_spec is None and dynamic_shapes is None:
        dynamic_spec = spec_of(model)
    marked = []
    if dynamic_spec is not None:
        if dynamic_shapes is not None:
            raise BrazeError("pass dynamic_shapes or dynamic_spec, not both")
        marked = dynamic_spec.mark(model, args, kwargs)
        dynamic_shapes = dynamic_spec.translate(model, args, kwargs, marked)
    if not isinstance(model, torch.nn.Module) and callable(model):
        model = _FunctionModule(model)
    try:
        with warnings.catch_warnings():
            # torch.export deep-copies tree specs and trips its own deprecation
            # of LeafSpec (torch 2.13); nothing a caller can act on.
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
            program = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes)
            program = decompose_for_export(program)
    except Exception as error:  # torch raises many types; the user needs the text
        raise BrazeError(f"torch.export could not capture the model: {type(error).__name__}: {error}") from error
    signature = program.graph_signature
    mutations = [s for s in signature.output_specs if s.kind != OutputKind.USER_OUTPUT]
    if mutations:
        names = ", ".join(f"{s.kind.name.lower()} of {s.target}" for s in mutations)
        raise BrazeError(f"the model mutates state ({names}); braze captures pure inference graphs")
    parameters = {s.arg.name: s.target for s in signature.input_specs if s.kind in _WEIGHT_KINDS}
    imported = import_graph(program.graph_module, parameters=parameters,
                            range_constraints=program.range_constraints)
    if dynamic_spec is not None:
        dynamic_spec.annotate(imported.module, imported.none_inputs, marked)
    weights = {**program.state_dict, **program.constants}
    # A complex weight is held in its view_as_real form, as the IR reads it.
    values = {name: _as_real(weights[name].detach()) for name in imported.parameter_names}
    return ExportedProgram(imported, values, program.call_spec.in_spec, program.call_spec.out_spec)


def _as_real(value: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(value) if value.is_complex() else value
