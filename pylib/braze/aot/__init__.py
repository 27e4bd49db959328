"""AOT packages: a model compiled once, saved with its kernels' binaries,
its program, signature and metadata, and its weights in a separate
safetensors file; loaded later, in a process that needs no compiler and no
MLIR (docs/aot.md).

* `package(model_or_exported, args, path, target="cpu", ...)` compiles and
  writes a package (braze.aot.writer: needs the compiler);
* `load(path, weights=None)` returns a callable running the package
  (braze.aot.loader: needs torch and braze's runtime only);
* `WeightStore`: one copy of a model's weights that several loaded
  packages share, swappable while they run (braze.aot.weights).
"""

from __future__ import annotations

from braze.aot.loader import LoadedPackage, load
from braze.aot.weights import WeightStore

__all__ = ["LoadedPackage", "WeightStore", "load", "package"]


def __getattr__(name):
    # Writing a package compiles; loading one must not import the compiler.
    if name == "package":
        from braze.aot.writer import package

        return package
    raise AttributeError(f"module 'braze.aot' has no attribute {name!r}")
