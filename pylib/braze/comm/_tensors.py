"""numpy arrays and torch CPU tensors as (address, element count, dtype),
without copying. Everything is checked here, before native code sees a pointer.
The nccl backend's CUDA tensors are checked here too (`as_cuda_tensor`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from braze.comm.errors import CommDeviceMismatch, CommInvalidArgument

DTYPES = ("float32", "float16", "bfloat16", "int32", "int64")
DTYPE_CODES = {name: code for code, name in enumerate(DTYPES)}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8}


@dataclass(slots=True)
class Buffer:
    obj: object  # kept alive while an op uses it
    address: int
    numel: int
    dtype: str

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE[self.dtype]


def _is_torch(obj) -> bool:
    return type(obj).__module__.startswith("torch")


# numpy's dtype.num per supported dtype (int64 has two spellings on Linux).
_NP_BY_NUM = {np.dtype(code).num: name for code, name in
              (("float32", "float32"), ("float16", "float16"), ("int32", "int32"), ("int64", "int64"),
               ("q", "int64"), ("l", "int64"), ("i", "int32"))}


# Where a tensor of a device type should go instead.
_BACKENDS_FOR = {"cuda": "CUDA tensors go through the nccl backend",
                 "cpu": "CPU tensors and numpy arrays go through shm, tcp, gloo or mpi"}


def wrong_device(what: str, backend: str, device: str, wanted: str) -> CommDeviceMismatch:
    """The error for a tensor on a device `backend` does not serve: CUDA
    tensors given to a CPU backend (shm, tcp, gloo, mpi) or host ones given
    to nccl. Never copied across: that would hide a host round trip."""
    hint = _BACKENDS_FOR.get(device.split(":")[0])
    return CommDeviceMismatch(f"{what}: the {backend} backend takes {wanted} tensors, but this one is on {device}"
                               f"{f' ({hint})' if hint else ''}; braze.comm never copies between devices")


def as_buffer(obj, what: str, writable: bool = False, *, backend: str) -> Buffer:
    """Describes `obj` for a CPU backend; raises CommInvalidArgument for
    anything unsupported (naming `backend` for a tensor on another device)."""
    if type(obj) is np.ndarray:  # the fast path small ops live on
        dtype = _NP_BY_NUM.get(obj.dtype.num)
        flags = obj.flags
        if dtype is not None and flags.c_contiguous and (flags.writeable or not writable) and obj.dtype.isnative:
            return Buffer(obj, obj.ctypes.data, obj.size, dtype)
    if isinstance(obj, np.ndarray):
        if not obj.dtype.isnative:
            raise CommInvalidArgument(f"{what}: non-native byte order ({obj.dtype.str}); convert with "
                                      f".astype(np.{obj.dtype.name})")
        dtype = obj.dtype.name
        if dtype not in DTYPE_CODES:
            raise CommInvalidArgument(f"{what}: unsupported dtype {dtype} (supported: {', '.join(DTYPES)})")
        if not obj.flags.c_contiguous:
            raise CommInvalidArgument(f"{what}: the array must be C-contiguous")
        if writable and not obj.flags.writeable:
            raise CommInvalidArgument(f"{what}: the array is read-only")
        return Buffer(obj, obj.__array_interface__["data"][0], obj.size, dtype)
    if _is_torch(obj):
        import torch

        if not isinstance(obj, torch.Tensor):
            raise CommInvalidArgument(f"{what}: expected a tensor, got {type(obj).__name__}")
        if obj.device.type != "cpu":
            raise wrong_device(what, backend, str(obj.device), "CPU")
        dtype = _checked_tensor(obj, what)
        return Buffer(obj, obj.data_ptr(), obj.numel(), dtype)
    raise CommInvalidArgument(f"{what}: expected a numpy array or a torch CPU tensor, got {type(obj).__name__}")


def _checked_tensor(obj, what: str) -> str:
    """The dtype name of a torch tensor the runtime can take, on any device."""
    dtype = str(obj.dtype).removeprefix("torch.")
    if dtype not in DTYPE_CODES:
        raise CommInvalidArgument(f"{what}: unsupported dtype {dtype} (supported: {', '.join(DTYPES)})")
    if not obj.is_contiguous():
        raise CommInvalidArgument(f"{what}: the tensor must be contiguous")
    return dtype


def as_cuda_tensor(obj, what: str, *, backend: str) -> Buffer:
    """Describes a CUDA tensor for a backend that runs on the GPU (nccl); a
    numpy array or a CPU tensor is refused, naming its device."""
    import torch

    if isinstance(obj, np.ndarray):
        raise wrong_device(what, backend, "cpu (a numpy array)", "CUDA")
    if not isinstance(obj, torch.Tensor):
        raise CommInvalidArgument(f"{what}: expected a torch CUDA tensor, got {type(obj).__name__}")
    if obj.device.type != "cuda":
        raise wrong_device(what, backend, str(obj.device), "CUDA")
    return Buffer(obj, obj.data_ptr(), obj.numel(), _checked_tensor(obj, what))


def same_dtype(op: str, *buffers: Buffer) -> None:
    dtypes = {b.dtype for b in buffers}
    if len(dtypes) > 1:
        raise CommInvalidArgument(f"{op}: input and output dtypes differ ({', '.join(sorted(dtypes))})")


def empty_like_dtype(dtype: str, shape, like):
    """A new array or tensor of `dtype`, of the same kind as `like`."""
    if _is_torch(like):
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype))
    return np.empty(shape, dtype=dtype)
