"""braze: an MLIR-based compiler and runtime for PyTorch models."""

from braze.errors import BrazeError
from braze.ir import Module, parse
from braze.logs import _from_environment, set_logs
from braze.passes import register_pass, run_pipeline

__all__ = ["BrazeError", "ExportedProgram", "Module", "ShapeVar", "compile", "compile_mlir", "dynamic_spec", "export",
           "parse", "register_communicator", "register_pass", "run_pipeline", "set_logs", "targets",
           "unregister_communicator"]

_from_environment()

_TORCH_API = {"export", "ExportedProgram", "ShapeVar", "dynamic_spec"}
_COMPILER_API = {"compile", "compile_mlir"}
_DISTRIBUTED_API = {"register_communicator", "unregister_communicator"}


def __getattr__(name):
    # The PyTorch frontend and the runtime load torch; keep `import braze`
    # light without it.
    if name in _TORCH_API:
        from braze import frontend

        return getattr(frontend, name)
    if name in _COMPILER_API:
        from braze import compiler

        return getattr(compiler, name)
    if name in _DISTRIBUTED_API:
        from braze.runtime import collectives

        return getattr(collectives, name)
    if name == "targets":
        from braze.target import targets

        return targets
    raise AttributeError(f"module 'braze' has no attribute {name!r}")
