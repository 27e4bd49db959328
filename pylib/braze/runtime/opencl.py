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


class _OpenCLKernelCall(KernelCall):
    views_in_place = False  # inputs are copied to the device whole: make them contiguous first

    def __init__(self, kernel, spec: KernelSpec, op, slots: dict):
        super().__init__(spec, op, slots)
        self.kernel = kernel
        self.spec = spec

    def launch(self, inputs, outputs, extents, sizes) -> int:
        import pyopencl as cl

        ctx, queue = context()
        flags = cl.mem_flags
        blocks, threads = self.spec.blocks(extents), self.spec.threads
        if blocks == 0:
            return 0  # no point to compute; results are empty
        buffers = [cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=_bytes(t))
                   if t.numel() else cl.Buffer(ctx, flags.READ_ONLY, 1) for t in inputs]
        results = [cl.Buffer(ctx, flags.WRITE_ONLY, max(t.numel() * t.element_size(), 1)) for t in outputs]
        size_array = np.ctypeslib.as_array(sizes).astype(np.int64)
        failed = np.zeros(1, np.int32)
        extra = [cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=size_array),
                 cl.Buffer(ctx, flags.READ_WRITE | flags.COPY_HOST_PTR, hostbuf=failed)]
        self.kernel(queue, (blocks * threads,), (threads,), *buffers, *results, *extra)
        for tensor, buffer in zip(outputs, results):
            if tensor.numel():
                cl.enqueue_copy(queue, _bytes(tensor), buffer)
        if self.spec.can_fail:
            cl.enqueue_copy(queue, failed, extra[1])
        queue.finish()
        return int(failed[0])


class OpenCLKernels(StepFactory):
    """The OpenCL target's step factory over one built program."""

    def __init__(self, program):
        self.program = program
        self.kernels = {kernel.function_name: kernel for kernel in program.all_kernels()}

    def kernel_call(self, spec: KernelSpec, op, slots: dict) -> KernelCall:
        return _OpenCLKernelCall(self.kernels[spec.name], spec, op, slots)
