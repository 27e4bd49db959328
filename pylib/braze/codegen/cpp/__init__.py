"""The C++ code generator: `braze.kernel` ops to one OpenMP translation unit."""

from braze.codegen.cpp.emitter import CppUnit, KernelSpec, emit

__all__ = ["CppUnit", "KernelSpec", "emit"]
