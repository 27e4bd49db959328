"""braze: an MLIR-based compiler and runtime for PyTorch models."""

from braze.errors import BrazeError
from braze.ir import Module, parse
from braze.passes import register_pass, run_pipeline

__all__ = ["BrazeError", "ExportedProgram", "Module", "export", "parse", "register_pass", "run_pipeline"]

_TORCH_API = {"export", "ExportedProgram"}


def __getattr__(name):
    # The PyTorch frontend loads torch; keep `import braze` light without it.
    if name in _TORCH_API:
        from braze import frontend

        return getattr(frontend, name)
    raise AttributeError(f"module 'braze' has no attribute {name!r}")
