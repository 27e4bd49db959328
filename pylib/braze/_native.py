"""Loads the native extension and registers braze with the upstream bindings.

Afterwards every new `mlir.ir.Context` knows the braze dialect, MLIR's global
pass registry knows every braze pass, and the bindings find braze's op classes
(`braze.dialects.braze`) when they hand an operation to Python.
"""

from mlir import ir
from mlir._mlir_libs import _mlir, get_dialect_registry

from braze import _braze

_braze.register_dialect(get_dialect_registry())
_braze.register_passes()
if "braze.dialects" not in _mlir.globals.dialect_search_modules:
    _mlir.globals.append_dialect_search_prefix("braze.dialects")


def new_context(*dialects: str) -> ir.Context:
    """A context that loads `dialects` now and every other registered dialect
    when the parser or a pass pipeline first needs it. `ir.Context()` loads
    all of them (about 40 upstream ones): 5 ms, more than parsing a small
    kernel's module."""
    return ir.Context(load_on_create_dialects=list(dialects))
