"""Runs CUDA kernels: one cubin per function (CUDA C++ from codegen/cuda.py,
built by NVRTC for the current device's arch; target/compiled.py), loaded
through the CUDA driver API (PyPI cuda-bindings) into the device's primary
context, which torch uses too, and launched with `cuLaunchKernel` on the
current torch stream.

Tensors stay on the device between steps: kernels read their inputs in
place (strided rows too, as on the CPU) and write results torch allocated
there. Every kernel parameter is a device pointer (codegen/gpu.py: inputs,
results, `sizes`, `failed`), so a launch passes an array of pointers to
pointer-sized values. The grid is one-dimensional: `KernelSpec.blocks`
blocks of `KernelSpec.threads` threads, as the kernel's `braze.schedule`
says; shared memory is static (declared in the kernel).

A kernel that can divide an integer by zero sets `failed[0]`; the call then
reads the flag back (which waits for the stream) and raises like the CPU
target. Kernels that cannot fail run asynchronously. Under the
`cuda_graph` option (runtime/cuda_graph.py) the flags are read after each
replay, and each `sizes` array's device copy is made once, in the warm-up.

Checked without a GPU (tests/python/targets/test_cuda.py): the cubin build
through the cache, grids, parameter packing, and the launch sequence against
a recording driver. Launching on a real device needs a GPU
(benchmarks/gpu_check.py).
"""

from __future__ import annotations

import ctypes

import torch

from braze.codegen.analysis import KernelSpec
from braze.errors import BrazeError
from braze.runtime import cuda_graph
from braze.runtime.combo import GpuComboCall
from braze.runtime.executor import KernelCall, StepFactory

# gridDim.x's limit on every architecture braze compiles for (sm_30 on).
MAX_BLOCKS = 2**31 - 1


def driver_api():
    """cuda-bindings' driver module, or a BrazeError naming the package."""
    try:
        from cuda.bindings import driver
    except ImportError:
        raise BrazeError("the cuda target needs cuda-bindings: pip install 'braze[cuda]'") from None
    return driver


def checked(driver, returned, what: str):
    """The values a driver call returned after its CUresult, which must be
    success (else a BrazeError naming the call and the driver's message)."""
    result, *values = returned
    if result != driver.CUresult.CUDA_SUCCESS:
        _, message = driver.cuGetErrorString(result)
        text = message.decode() if isinstance(message, bytes) else str(message)
        raise BrazeError(f"CUDA driver: {what} failed: {getattr(result, 'name', result)} ({text})")
    return values[0] if len(values) == 1 else tuple(values)


def grid(spec: KernelSpec, extents: list[int]) -> tuple[int, int]:
    """(blocks, threads per block) of one launch over `extents`."""
    return _checked_blocks(f"kernel {spec.name}", spec.blocks(extents), spec.threads), spec.threads


def _checked_blocks(what: str, blocks: int, threads: int) -> int:
    if blocks > MAX_BLOCKS:
        raise BrazeError(f"{what}: {blocks} blocks of {threads} threads exceed CUDA's grid "
                         f"limit of {MAX_BLOCKS} blocks")
    return blocks


class KernelParameters:
    """`cuLaunchKernel`'s `kernelParams` for pointer parameters: an array
    holding each pointer, and the array of their addresses the driver
    reads (both kept alive as long as this object)."""

    def __init__(self, pointers: list[int]):
        count = len(pointers)
        self.values = (ctypes.c_void_p * count)(*pointers)
        base, width = ctypes.addressof(self.values), ctypes.sizeof(ctypes.c_void_p)
        self.addresses = (ctypes.c_void_p * count)(*[base + number * width for number in range(count)])

    @property
    def address(self) -> int:
        """The `void**` to pass as `kernelParams`."""
        return ctypes.addressof(self.addresses)


class _DeviceSizes:
    """Copies a launch's `sizes` array to the device: the static array
    (`static_sizes`, None unless every size is static) once, others per call."""

    static_sizes = None
    static_sizes_on_device = None
    kernels: "CudaKernels"

    def _sizes_on_device(self, sizes) -> torch.Tensor:
        if cuda_graph.capture is not None:  # a CUDA graph's warm-up or capture
            return cuda_graph.capture.device_sizes(sizes, self.kernels.to_device)
        if self.static_sizes is not None and sizes is self.static_sizes:
            if self.static_sizes_on_device is None:
                self.static_sizes_on_device = self.kernels.to_device(sizes)
            return self.static_sizes_on_device
        return self.kernels.to_device(sizes)

    def _failure_flag(self, can_fail: bool, device) -> torch.Tensor:
        return torch.zeros(1, dtype=torch.int32, device=device) if can_fail else self.kernels.never_failed()


class _CudaKernelCall(_DeviceSizes, KernelCall):
    def __init__(self, kernels: "CudaKernels", spec: KernelSpec, op, slots: dict):
        super().__init__(spec, op, slots, kernels.device)
        self.kernels = kernels
        self.spec = spec
        self.function = None  # loaded at the first launch

    def launch(self, inputs, outputs, extents, sizes) -> int:
        blocks, threads = grid(self.spec, extents)
        if blocks == 0:
            return 0  # no point to compute; results are empty
        if self.function is None:
            self.function = self.kernels.function(self.name)
        failed = self._failure_flag(self.spec.can_fail, self.device)
        parameters = KernelParameters([t.data_ptr() for t in inputs] + [t.data_ptr() for t in outputs]
                                      + [self._sizes_on_device(sizes).data_ptr(), failed.data_ptr()])
        self.kernels.launch(self.function, blocks, threads, parameters)
        # Reading the flag waits for the kernel; kernels that cannot fail do not wait.
        return cuda_graph.failure_flag(failed, self.culprit) if self.spec.can_fail else 0


class _CudaComboCall(_DeviceSizes, GpuComboCall):
    """A combo's launch function (codegen/gpu_combo.py): one `cuLaunchKernel`
    of the most threads of its sub-kernels, every buffer parameter a device
    pointer, then `sizes` (each sub-kernel's blocks, then its sizes) and one
    failure flag for the whole combo."""

    def __init__(self, kernels: "CudaKernels", name: str, calls: list, op, buffers: list):
        super().__init__(name, calls, op, buffers)
        self.kernels = kernels
        self.function = None  # loaded at the first launch

    def run(self, tensors, sizes, blocks) -> int:
        _checked_blocks(f"combo {self.name}", blocks, self.threads)
        if self.function is None:
            self.function = self.kernels.function(self.name)
        device = self.kernels.device
        failed = self._failure_flag(self.can_fail, device)
        parameters = KernelParameters([t.data_ptr() for t in tensors]
                                      + [self._sizes_on_device(sizes).data_ptr(), failed.data_ptr()])
        self.kernels.launch(self.function, blocks, self.threads, parameters)
        return cuda_graph.failure_flag(failed, self.culprit) if self.can_fail else 0


class CudaKernels(StepFactory):
    """The CUDA target's step factory over one cubin, for one device.

    `driver` is cuda-bindings' `cuda.bindings.driver` (the default) or an
    object with the same calls (tests use a recording one);
    `launch_buffers`: the combos' buffer parameters (`Unit.launch_buffers`)."""

    def __init__(self, cubin: bytes, device: torch.device, driver=None, launch_buffers: dict | None = None):
        self.module = None  # first: __del__ reads it even when __init__ fails
        self.cubin = cubin
        self.device = torch.device(device)
        self.driver = driver or driver_api()
        self.context = None
        self.unused_flag = None
        self.launch_buffers = launch_buffers or {}

    def kernel_call(self, spec: KernelSpec, op, slots: dict) -> KernelCall:
        return _CudaKernelCall(self, spec, op, slots)

    def combo_call(self, name: str, calls: list[KernelCall], op):
        return _CudaComboCall(self, name, calls, op, self.launch_buffers[name])

    def __del__(self):
        # Programs come and go (torch.compile recompiles): unload the module
        # with the last one using it. The process's end unloads it anyway.
        if self.module is not None:
            self.driver.cuModuleUnload(self.module)

    def to_device(self, sizes) -> torch.Tensor:
        """A ctypes int64 array as a tensor on the device."""
        return torch.frombuffer(sizes, dtype=torch.int64).to(self.device)

    def never_failed(self) -> torch.Tensor:
        """The `failed` buffer of kernels that never write it."""
        if self.unused_flag is None:
            self.unused_flag = torch.zeros(1, dtype=torch.int32, device=self.device)
        return self.unused_flag

    def _make_current(self) -> None:
        """Makes the device's primary context (torch's) current on this thread."""
        driver = self.driver
        if self.context is None:
            checked(driver, driver.cuInit(0), "cuInit")
            device = checked(driver, driver.cuDeviceGet(self.device.index), f"cuDeviceGet({self.device.index})")
            self.context = checked(driver, driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        if int(checked(driver, driver.cuCtxGetCurrent(), "cuCtxGetCurrent")) != int(self.context):
            checked(driver, driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def function(self, name: str):
        """The kernel `name` of the cubin (the module loads once)."""
        self._make_current()
        if self.module is None:
            self.module = checked(self.driver, self.driver.cuModuleLoadData(self.cubin), "cuModuleLoadData")
        return checked(self.driver, self.driver.cuModuleGetFunction(self.module, name.encode()),
                       f"cuModuleGetFunction({name})")

    def launch(self, function, blocks: int, threads: int, parameters: KernelParameters) -> None:
        """One launch on the current torch stream of the device."""
        self._make_current()
        stream = torch.cuda.current_stream(self.device).cuda_stream
        checked(self.driver, self.driver.cuLaunchKernel(
            function, blocks, 1, 1, threads, 1, 1, 0, self.driver.CUstream(stream), parameters.address, 0),
            "cuLaunchKernel")
