"""braze: an MLIR-based compiler and runtime for PyTorch models."""

from braze.errors import BrazeError
from braze.logs import _from_environment, set_logs

try:
    from braze.ir import Module, parse
    from braze.passes import register_pass, run_pipeline
except ModuleNotFoundError as error:
    # A process that only loads AOT packages (braze.aot) may have no MLIR;
    # then these names fail when used (see __getattr__), not on import.
    if error.name != "mlir" and not str(error.name).startswith("mlir."):
        raise

__all__ = ["BrazeError", "ExportedProgram", "Module", "ShapeVar", "compile", "compile_mlir", "dynamic_spec", "export",
           "parse", "profile", "register_communicator", "register_pass", "run_pipeline", "set_logs", "switch",
           "targets", "unregister_communicator"]

_from_environment()

_TORCH_API = {"export", "ExportedProgram", "ShapeVar", "dynamic_spec", "switch"}
_COMPILER_API = {"compile", "compile_mlir"}
_IR_API = {"Module": "braze.ir", "parse": "braze.ir", "register_pass": "braze.passes", "run_pipeline": "braze.passes"}
_DISTRIBUTED_API = {"register_communicator", "unregister_communicator"}


def __getattr__(name):
    # The PyTorch frontend and the runtime load torch; keep `import braze`
    # light without it.
    if name in _IR_API:  # only reached without MLIR: the import fails with its reason
        import importlib

        return getattr(importlib.import_module(_IR_API[name]), name)
    if name in _TORCH_API:
        from braze import frontend

        return getattr(frontend, name)
    if name in _COMPILER_API:
        from braze import compiler

        return getattr(compiler, name)
    if name == "profile":
        from braze.runtime.trace import profile

        return profile
    if name in _DISTRIBUTED_API:
        from braze.runtime import collectives

        return getattr(collectives, name)
    if name == "targets":
        from braze.target import targets

        return targets
    raise AttributeError(f"module 'braze' has no attribute {name!r}")
