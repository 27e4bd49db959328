"""braze modules: parsing, printing, verification."""

from __future__ import annotations

from mlir import ir

from braze import _braze, _native  # noqa: F401  (registers dialect and passes)
from braze.errors import BrazeError, Diagnostic


class Module:
    """A braze program: one `builtin.module` and the MLIR context that owns it.

    `str(module)` prints the IR; `operation` is the upstream `ir.Operation`
    that Python passes receive.
    """

    def __init__(self, mlir_module: ir.Module):
        self._module = mlir_module

    @property
    def mlir_module(self) -> ir.Module:
        return self._module

    @property
    def operation(self) -> ir.Operation:
        return self._module.operation

    @property
    def context(self) -> ir.Context:
        return self._module.context

    def verify(self) -> None:
        """Raises BrazeError with the verifier's diagnostics if the IR is invalid."""
        try:
            self.operation.verify()
        except ir.MLIRError as error:
            raise BrazeError.from_mlir("the module is invalid", error) from None

    def __str__(self) -> str:
        return str(self._module)

    def __repr__(self) -> str:
        return f"<braze.Module with {len(self._module.body.operations)} top-level op(s)>"


def parse(text: str, source_name: str = "<string>") -> Module:
    """Parses and verifies MLIR text in a fresh context.

    Top-level ops without a `module { }` around them are wrapped in one, as
    braze-opt does. Locations in the IR and in errors name `source_name`.
    """
    if not isinstance(text, str):
        raise TypeError(f"braze.parse expects the IR as str, got {type(text).__name__}")
    module, diagnostics = _braze.parse_module(_native.new_context(), text, source_name)
    if module is None:
        raise BrazeError(f"cannot parse {source_name}", map(Diagnostic.from_tuple, diagnostics))
    return Module(module)
