"""braze: an MLIR-based compiler and runtime for PyTorch models."""

from braze.errors import BrazeError
from braze.ir import Module, parse
from braze.passes import register_pass, run_pipeline

__all__ = ["BrazeError", "Module", "parse", "register_pass", "run_pipeline"]
