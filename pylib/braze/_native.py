"""Loads the native extension and registers braze with the upstream bindings.

Afterwards every new `mlir.ir.Context` knows the braze dialect, MLIR's global
pass registry knows every braze pass, and the bindings find braze's op classes
(`braze.dialects.braze`) when they hand an operation to Python.
"""

from mlir._mlir_libs import _mlir, get_dialect_registry

from braze import _braze

_braze.register_dialect(get_dialect_registry())
_braze.register_passes()
if "braze.dialects" not in _mlir.globals.dialect_search_modules:
    _mlir.globals.append_dialect_search_prefix("braze.dialects")
