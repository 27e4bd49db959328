"""The CPU target's step factory: kernels of one loaded C++ library (see
codegen/cpp), called through ctypes with pointers and sizes, no copies."""

from __future__ import annotations

import array
import ctypes
from typing import TYPE_CHECKING

from braze.runtime.combo import ComboCall
from braze.runtime.executor import KernelCall, StepFactory

if TYPE_CHECKING:
    from braze.codegen.analysis import KernelSpec


class _NativeKernelCall(KernelCall):
    """A kernel of a loaded C++ library, called through ctypes."""

    def __init__(self, function, spec: KernelSpec, op, slots: dict):
        super().__init__(spec, op, slots)
        self.function = function
        self.buffer_type = ctypes.c_void_p * (len(self.inputs) + len(self.outputs))

    def launch(self, inputs, outputs, extents, sizes) -> int:
        pointers = [t.data_ptr() for t in inputs] + [t.data_ptr() for t in outputs]
        return self.function(self.buffer_type(*pointers), sizes)


class _NativeComboCall(ComboCall):
    """A combo's launch function (codegen/cpp/combo.py): every sub-kernel's
    buffers, then sizes, one after the other, in one ctypes call. A
    sub-kernel's sizes are exactly its `size_count` entries: a kernel
    without sizes still holds one placeholder entry for its own call,
    which must not shift the next sub-kernel's sizes."""

    def __init__(self, function, name: str, calls: list[KernelCall]):
        super().__init__(name, calls)
        self.function = function
        self.size_counts = [call.spec.size_count for call in calls]
        # Static, contiguous sub-kernels pass the same sizes on every call.
        self.static_sizes = None
        if all(call.static for call in calls):
            self.static_sizes = self._concatenated([call.static_sizes for call in calls])

    def _concatenated(self, kernel_sizes: list) -> array.array:
        return array.array("q", [size for sizes, count in zip(kernel_sizes, self.size_counts)
                                 for size in sizes[:count]])

    def launch(self, prepared: list[tuple]) -> int:
        pointers = array.array("q", [t.data_ptr() for inputs, outputs, _, _ in prepared for t in inputs + outputs])
        if self.static_sizes is not None and all(
                sizes is call.static_sizes for call, (_, _, _, sizes) in zip(self.calls, prepared)):
            sizes = self.static_sizes
        else:
            sizes = self._concatenated([kernel_sizes for _, _, _, kernel_sizes in prepared])
        return self.function(pointers.buffer_info()[0], sizes.buffer_info()[0] if sizes else None)


class CpuKernels(StepFactory):
    """The CPU target's step factory: one loaded library of C functions."""

    def __init__(self, library):
        self.library = library
        if hasattr(library, "braze_set_blas"):  # it holds a fused GEMM
            from braze.runtime import blas

            library.braze_set_blas(blas.functions())

    def function(self, name: str):
        """The library's kernel or launch function `name`, ready to call."""
        function = getattr(self.library, name)
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        return function

    def kernel_call(self, spec: KernelSpec, op, slots: dict) -> KernelCall:
        return _NativeKernelCall(self.function(spec.name), spec, op, slots)

    def combo_call(self, name: str, calls: list[KernelCall], op):
        return _NativeComboCall(self.function(name), name, calls)
