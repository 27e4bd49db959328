"""braze's caching allocator from Python (cxx/runtime/memory through the
Cython module `braze.runtime._memory`); `braze.memory` is its public name.

An `Allocator` hands out torch tensors whose storage is one allocator block:
the tensor owns the block (a DLPack capsule whose deleter frees it), so
torch's reference counting returns it to the allocator's cache, never to
the system. Every block is aligned to `ALIGNMENT` (64) bytes.

    >>> allocator = braze.memory.Allocator("cpu")
    >>> x = allocator.empty((4, 256), torch.float32)
    >>> allocator.stats()["allocated_bytes"]
    4096
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

import torch

from braze.errors import BrazeError
from braze.runtime._memory import ALIGNMENT, DeviceUnavailable, NativeAllocator, OutOfMemory

__all__ = ["ALIGNMENT", "Allocator", "DeviceUnavailable", "OutOfMemory", "RawAllocator", "default_allocator",
           "empty", "empty_cache", "snapshot", "stats"]


@dataclass(frozen=True)
class RawAllocator:
    """A caller's raw allocator: the addresses of two C functions,
    `void *allocate(size_t size, void *context)` (memory aligned to
    `ALIGNMENT`, or NULL) and `void release(void *address, size_t size,
    void *context)`, e.g. from ctypes. `name` is what stats and snapshots
    call the device; its memory is host memory."""

    allocate: int
    release: int
    context: int = 0
    name: str = "custom"


class Allocator:
    """One caching allocator over host memory (`"cpu"`), CUDA device memory
    (`"cuda"`, `"cuda:1"`: through the CUDA driver, which must be present)
    or a `RawAllocator`."""

    def __init__(self, device: str | torch.device = "cpu", *, raw: RawAllocator | None = None):
        if raw is not None:
            self.device = torch.device("cpu")
            self._native = NativeAllocator.custom(raw.allocate, raw.release, raw.context, raw.name)
            return
        self.device = torch.device(device)
        if self.device.type == "cpu":
            self._native = NativeAllocator.host()
        elif self.device.type == "cuda":
            self._native = NativeAllocator.cuda(self.device.index or 0)
            self.device = torch.device("cuda", self.device.index or 0)
        else:
            raise BrazeError(f"braze's allocator has host and CUDA memory, not {self.device.type!r}")

    def bytes(self, size: int) -> torch.Tensor:
        """A 1-D uint8 tensor of `size` bytes, its storage one block."""
        if size < 0:
            raise BrazeError(f"cannot allocate {size} bytes")
        return self._native.bytes_tensor(size)

    def empty(self, shape, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """An uninitialised contiguous tensor, its storage one block."""
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise BrazeError(f"negative size in shape {shape}")
        itemsize = torch.empty((), dtype=dtype).element_size()
        return self.bytes(math.prod(shape) * itemsize).view(dtype).view(shape)

    def allocate(self, size: int) -> tuple[int, int]:
        """(block, address): a raw block of at least `size` bytes, to give
        back with `free(block)` (for callers that manage memory themselves)."""
        return self._native.allocate(size)

    def free(self, block: int) -> None:
        self._native.free(block)

    def stats(self) -> dict:
        """allocated/requested/reserved bytes (now and peak), bytes held
        free in the pools and thread caches, counts of allocations, frees,
        live blocks, thread-cache hits and segments, and `fragmentation`
        (1 - largest free block / free bytes in the pools)."""
        return self._native.stats()

    def reset_peak_stats(self) -> None:
        self._native.reset_peak()

    def empty_cache(self) -> None:
        """Gives every segment with no live block back to the raw allocator."""
        self._native.empty_cache()

    def snapshot(self) -> dict:
        """Every segment and its blocks (address, size, requested bytes,
        state: allocated, free or thread_cached), with the stats."""
        return json.loads(self._native.snapshot_json())

    def dump_snapshot(self, path: str | Path) -> None:
        Path(path).write_text(self._native.snapshot_json())


_DEFAULTS: dict[torch.device, Allocator] = {}
_DEFAULTS_LOCK = threading.Lock()


def default_allocator(device: str | torch.device = "cpu") -> Allocator:
    """The process's allocator for `device` (made on first use)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    allocator = _DEFAULTS.get(device)
    if allocator is None:
        with _DEFAULTS_LOCK:
            allocator = _DEFAULTS.get(device) or Allocator(device)
            _DEFAULTS[device] = allocator
    return allocator


def empty(shape, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> torch.Tensor:
    return default_allocator(device).empty(shape, dtype)


# A library op's result (a GEMM's) of at least this many bytes comes from the caching allocator: glibc serves a
# block above its mmap threshold (128 KiB at first) with fresh pages, and gives freed memory at the top of its heap
# back to the system, so such results were written into page-faulting memory call after call (Swin-T in bf16, 2
# threads: the bias copy of addmm [6272, 96] x [96, 384] took 1.57 ms a call against 0.39 ms in Inductor's).
CACHED_RESULT_BYTES = 128 * 1024


def result_allocator(device: str | torch.device) -> Callable[[tuple, torch.dtype], torch.Tensor] | None:
    """`empty(shape, dtype)` for the results library ops write on `device`
    (`HostContext.empty`): large ones from the caching allocator on the CPU;
    None elsewhere (torch's CUDA allocator caches already)."""
    device = torch.device(device)
    if device.type != "cpu":
        return None
    allocator = default_allocator(device)

    def result(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        if math.prod(shape) * dtype.itemsize >= CACHED_RESULT_BYTES:
            return allocator.empty(shape, dtype)
        return torch.empty(shape, dtype=dtype)

    return result


def stats(device: str | torch.device = "cpu") -> dict:
    return default_allocator(device).stats()


def snapshot(device: str | torch.device = "cpu") -> dict:
    return default_allocator(device).snapshot()


def empty_cache(device: str | torch.device = "cpu") -> None:
    default_allocator(device).empty_cache()
