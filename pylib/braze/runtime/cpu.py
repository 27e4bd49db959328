"""The CPU target's step factory: kernels of one loaded C++ library (see
codegen/cpp), called with pointers and sizes, no copies: through the
launcher (braze.runtime.launch: the call prepared and made in C++) where it
is built, else through ctypes after `KernelCall.prepare`."""

from __future__ import annotations

import array
import ctypes
from typing import TYPE_CHECKING

from braze.errors import BrazeError
from braze.runtime import launch
from braze.runtime.combo import ComboCall
from braze.runtime.executor import KernelCall, StepFactory

if TYPE_CHECKING:
    from braze.codegen.analysis import KernelSpec


def _launch_description(call: KernelCall) -> tuple:
    """What the launcher needs of one kernel call (cxx/runtime/launch:
    `parseKernel`), read once, after `Program` set its reuse and carving."""
    shapes = [[size if isinstance(size, int) else -1 - size[1] for size in shape] for shape in call.result_shapes]
    domain = [-1 if size is None else size for size in call.domain]
    return (call.inputs, call.dynamic, call.outputs, domain, list(call.extent_inputs),
            [list(check) for check in call.checks], shapes, call.result_dtypes,
            [call.reuse.get(result, -1) for result in range(len(call.outputs))],
            [call.carve.get(result) for result in range(len(call.outputs))], list(call.blas_inputs),
            list(call.static_sizes)[: call.size_count] if call.static else None, call.size_count,
            call.views_in_place, [None if s is None else list(s) for s in call.declared_strides])


class _NativeStep:
    """Runs a kernel or combo call through the launcher when it is built:
    it prepares the call in C++ or declines (nothing done), and then
    `prepared_call` runs it in Python, which also says what is wrong. The
    launcher is made on the first call, after `Program` decided reuse and
    carving (and after braze.aot loaded the step)."""

    native = None  # the launcher (not written by braze.aot: made again)

    def __call__(self, env: list) -> None:
        if self.native is None:
            self.native = launch.native.NativeLaunch(
                ctypes.cast(self.function, ctypes.c_void_p).value, self.descriptions()) \
                if launch.native is not None else False
        if self.native:
            status = self.native(env)
            if status == launch.native.DONE:
                return
            if status == launch.native.FAILED:
                raise BrazeError(f"{self.failure()}: integer division by zero")
        self.prepared_call(env)


class _NativeKernelCall(_NativeStep, KernelCall):
    """A kernel of a loaded C++ library."""

    def __init__(self, function, spec: KernelSpec, op, slots: dict):
        super().__init__(spec, op, slots)
        self.function = function
        self.buffer_type = ctypes.c_void_p * (len(self.inputs) + len(self.outputs))

    def descriptions(self) -> list:
        return [_launch_description(self)]

    def failure(self) -> str:
        return f"kernel {self.name} at {self.location}"

    def launch(self, inputs, outputs, extents, sizes) -> int:
        pointers = [t.data_ptr() for t in inputs] + [t.data_ptr() for t in outputs]
        return self.function(self.buffer_type(*pointers), sizes)

    prepared_call = KernelCall.__call__


class _NativeComboCall(_NativeStep, ComboCall):
    """A combo's launch function (codegen/cpp/combo.py): every sub-kernel's
    buffers, then sizes (`ComboCall.kernel_sizes`), in one call."""

    def __init__(self, function, name: str, calls: list[KernelCall]):
        super().__init__(name, calls)
        self.function = function
        # Static, contiguous sub-kernels pass the same sizes on every call.
        static = self.static_kernel_sizes()
        self.static_sizes = None if static is None else array.array("q", static)

    def descriptions(self) -> list:
        return [_launch_description(call) for call in self.calls]

    def failure(self) -> str:
        return f"combo {self.name} ({', '.join(c.name for c in self.calls)})"

    def launch(self, prepared: list[tuple]) -> int:
        pointers = array.array("q", [t.data_ptr() for inputs, outputs, _, _ in prepared for t in inputs + outputs])
        if self.static_sizes is not None and self.passes_static_sizes(prepared):
            sizes = self.static_sizes
        else:
            sizes = array.array("q", self.kernel_sizes([kernel_sizes for _, _, _, kernel_sizes in prepared]))
        return self.function(pointers.buffer_info()[0], sizes.buffer_info()[0] if sizes else None)

    prepared_call = ComboCall.__call__


class CpuKernels(StepFactory):
    """The CPU target's step factory: one loaded library of C functions."""

    # A static kernel's launch (KernelCall.prepare, or the launcher's
    # `allocate`) passes a contiguous input's pointer and the strides of its
    # own types: the tensor's shape is never read.
    static_kernels_read_by_pointer = True

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
