"""The CPU target's step factory: kernels of one loaded C++ library (see
codegen/cpp), called through ctypes with pointers and sizes, no copies."""

from __future__ import annotations

import array
import ctypes
import math

from typing import TYPE_CHECKING

import torch

from braze.errors import BrazeError
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


class _LaunchCall:
    """Several small static kernels started with one call of the library's
    launch function, which spreads them over the threads.

    Their results are carved from one allocation per dtype (they are small:
    see plan_launches), so a launch costs one allocation, not one per result.
    """

    def __init__(self, function, calls: list[KernelCall]):
        self.function = function
        self.name = " + ".join(call.name for call in calls)
        self.inputs = [slot for call in calls for slot in call.inputs]
        self.outputs = [slot for call in calls for slot in call.outputs]
        results = [(tuple(shape), dtype) for call in calls
                   for shape, dtype in zip(call.static_shapes, call.result_dtypes)]
        # Per dtype: total elements, each result's element count, and where
        # each result sits in the output list and in the pointer list.
        self.pools = {}
        for number, (shape, dtype) in enumerate(results):
            pool = self.pools.setdefault(dtype, ([], []))
            pool[0].append(math.prod(shape))
            pool[1].append((number, shape))
        self.result_count = len(results)
        self.sizes = (ctypes.c_int64 * max(1, sum(len(c.static_sizes) for c in calls)))(
            *[size for call in calls for size in call.static_sizes])

    def __call__(self, env: list) -> None:
        inputs = [env[slot] for slot in self.inputs]
        inputs = [t if t.is_contiguous() else t.contiguous() for t in inputs]
        pointers = [t.data_ptr() for t in inputs]
        outputs = [None] * self.result_count
        result_pointers = [0] * self.result_count
        for dtype, (counts, places) in self.pools.items():
            pool = torch.empty(sum(counts), dtype=dtype)
            address, itemsize = pool.data_ptr(), pool.element_size()
            for piece, count, (number, shape) in zip(pool.split(counts), counts, places):
                # view() costs a microsecond: skip it where split's piece fits.
                outputs[number] = piece if len(shape) == 1 else piece.view(shape)
                result_pointers[number] = address
                address += count * itemsize
        buffers = array.array("q", pointers + result_pointers)
        if self.function(buffers.buffer_info()[0], self.sizes):
            raise BrazeError(f"kernels {self.name}: integer division by zero")
        for slot, tensor in zip(self.outputs, outputs):
            env[slot] = tensor


class CpuKernels(StepFactory):
    """The CPU target's step factory: one loaded library of C functions."""

    def __init__(self, library):
        self.library = library

    def function(self, name: str):
        """The library's kernel or launch function `name`, ready to call."""
        function = getattr(self.library, name)
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        return function

    def kernel_call(self, spec: KernelSpec, op, slots: dict) -> KernelCall:
        return _NativeKernelCall(self.function(spec.name), spec, op, slots)

    def launch_call(self, name: str, calls: list[KernelCall]):
        return _LaunchCall(self.function(name), calls)
