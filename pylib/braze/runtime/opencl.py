"""Runs OpenCL kernels through pyopencl (PyPI), on whatever OpenCL device the
first platform offers (PoCL on this machine's CPU; an Intel GPU with
Intel's driver).

Tensors stay torch CPU tensors between steps (host ops, GEMMs and views run
through the same torch handlers as on the CPU target); each kernel call
copies its inputs to device buffers, launches, and copies its results back.
That is correct on any device and cheap on PoCL (host memory); a
device-resident runtime is later work.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from braze.codegen.analysis import KernelSpec
from braze.errors import BrazeError
from braze.runtime.combo import GpuComboCall
from braze.runtime.executor import KernelCall, StepFactory


@functools.lru_cache(maxsize=None)
def context():
    """The process's OpenCL context and queue (first platform, first device)."""
    import pyopencl as cl

    platforms = cl.get_platforms()
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise BrazeError("no OpenCL device: install an OpenCL driver (Debian: pocl-opencl-icd)")
    ctx = cl.Context([devices[0]])
    return ctx, cl.CommandQueue(ctx)


def device_identity() -> str:
    """What a program binary depends on: platform, device, driver."""
    ctx, _ = context()
    device = ctx.devices[0]
    return f"{device.platform.name} {device.platform.version} / {device.name} / {device.driver_version}"


def _bytes(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's memory as a numpy byte array (shared, not copied)."""
    return tensor.reshape(-1).view(torch.uint8).numpy()


def _enqueue(kernel, tensors: list, written: list[bool], sizes, blocks: int, threads: int, can_fail: bool) -> int:
    """One launch of `kernel` over `tensors` (its buffer parameters; those
    `written` are results, copied back), `sizes` (int64 values) and a
    fresh failure flag, which it returns."""
    import pyopencl as cl

    ctx, queue = context()
    flags = cl.mem_flags
    buffers = [cl.Buffer(ctx, flags.WRITE_ONLY, max(t.numel() * t.element_size(), 1)) if out
               else cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=_bytes(t)) if t.numel()
               else cl.Buffer(ctx, flags.READ_ONLY, 1) for t, out in zip(tensors, written)]
    failed = np.zeros(1, np.int32)
    extra = [cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=np.asarray(sizes, np.int64)),
             cl.Buffer(ctx, flags.READ_WRITE | flags.COPY_HOST_PTR, hostbuf=failed)]
    kernel(queue, (blocks * threads,), (threads,), *buffers, *extra)
    for tensor, buffer, out in zip(tensors, buffers, written):
        if out and tensor.numel():
            cl.enqueue_copy(queue, _bytes(tensor), buffer)
    if can_fail:
        cl.enqueue_copy(queue, failed, extra[1])
    queue.finish()
    return int(failed[0])


class _OpenCLKernelCall(KernelCall):
    views_in_place = False  # inputs are copied to the device whole: make them contiguous first

    def __init__(self, kernel, spec: KernelSpec, op, slots: dict):
        super().__init__(spec, op, slots)
        self.kernel = kernel
        self.spec = spec
        self.written = [False] * len(spec.input_types) + [True] * len(spec.result_types)

    def launch(self, inputs, outputs, extents, sizes) -> int:
        blocks = self.spec.blocks(extents)
        if blocks == 0:
            return 0  # no point to compute; results are empty
        return _enqueue(self.kernel, inputs + outputs, self.written, np.ctypeslib.as_array(sizes), blocks,
                        self.spec.threads, self.spec.can_fail)


class _OpenCLComboCall(GpuComboCall):
    """A combo's launch function (codegen/gpu_combo.py) as one NDRange."""

    def __init__(self, kernel, name: str, calls: list, op, buffers: list):
        super().__init__(name, calls, op, buffers)
        self.kernel = kernel
        for call in calls:
            call.views_in_place = False  # as _OpenCLKernelCall: inputs are copied whole
        ctx, _ = context()
        needed, allowed = 8 * (len(buffers) + 2), ctx.devices[0].max_parameter_size
        if needed > allowed:
            raise BrazeError(f"combo {name}: its {len(buffers) + 2} parameters need {needed} bytes, more than "
                             f"the OpenCL device's CL_DEVICE_MAX_PARAMETER_SIZE ({allowed}); compile with "
                             "options={'combo_kernels': False}")

    def run(self, tensors, sizes, blocks) -> int:
        return _enqueue(self.kernel, tensors, self.written, sizes, blocks, self.threads, self.can_fail)


class OpenCLKernels(StepFactory):
    """The OpenCL target's step factory over one built program;
    `launch_buffers`: its combos' buffer parameters (`Unit.launch_buffers`)."""

    def __init__(self, program, launch_buffers: dict | None = None):
        self.program = program
        self.kernels = {kernel.function_name: kernel for kernel in program.all_kernels()}
        self.launch_buffers = launch_buffers or {}

    def kernel_call(self, spec: KernelSpec, op, slots: dict) -> KernelCall:
        return _OpenCLKernelCall(self.kernels[spec.name], spec, op, slots)

    def combo_call(self, name: str, calls: list[KernelCall], op):
        return _OpenCLComboCall(self.kernels[name], name, calls, op, self.launch_buffers[name])
