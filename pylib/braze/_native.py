"""Loads the native extension and registers braze with the upstream bindings.

Every `mlir.ir.Context` created afterwards knows the braze dialect, and MLIR's
global pass registry knows every braze pass.
"""

from mlir._mlir_libs import get_dialect_registry

from braze import _braze

_braze.register_dialect(get_dialect_registry())
_braze.register_passes()
