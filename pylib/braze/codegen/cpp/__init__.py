"""The C++ code generator: `braze.kernel` ops to one OpenMP translation unit."""

from braze.codegen.analysis import KernelSpec
from braze.codegen.cpp.emitter import CppUnit, emit

__all__ = ["CppUnit", "KernelSpec", "emit"]
