"""One-sided windows and symmetric memory over the C++ runtime."""

from __future__ import annotations

import numpy as np

from braze.comm import _tensors
from braze.comm.errors import CommInvalidArgument
from braze.runtime import _comm


class Window:
    """Exposes `buffer` (numpy array or torch CPU tensor) to every rank.
    Offsets and lengths are in elements of the buffer's dtype."""

    def __init__(self, comm, buffer):
        self._buf = _tensors.as_buffer(buffer, "new_window", writable=True, backend=comm.backend)
        self._itemsize = _tensors.ITEMSIZE[self._buf.dtype]
        self.comm = comm
        self._native = _comm.NativeWindow(comm._native, self._buf.address, self._buf.nbytes, buffer)

    @property
    def buffer(self):
        return self._buf.obj

    def size(self, rank: int) -> int:
        """Elements in `rank`'s window."""
        return self._native.size(rank) // self._itemsize

    def put(self, rank: int, data, offset: int = 0) -> None:
        src = _tensors.as_buffer(data, "window put", backend=self.comm.backend)
        if src.dtype != self._buf.dtype:
            raise CommInvalidArgument(f"window put: data is {src.dtype} but the window is {self._buf.dtype}")
        if offset < 0:
            raise CommInvalidArgument(f"window put: negative offset {offset}")
        self._native.put(rank, src.address, src.nbytes, offset * self._itemsize)

    def get(self, rank: int, offset: int, n: int):
        if offset < 0 or n < 0:
            raise CommInvalidArgument(f"window get: negative offset or count ({offset}, {n})")
        out = _tensors.empty_like_dtype(self._buf.dtype, (n,), self._buf.obj)
        dst = _tensors.as_buffer(out, "window get", backend=self.comm.backend)
        self._native.get(rank, dst.address, dst.nbytes, offset * self._itemsize)
        return out

    def signal(self, rank: int) -> None:
        self._native.signal(rank)

    def wait_signal(self, rank: int, timeout: float | None = None) -> None:
        self._native.wait_signal(rank, float(timeout or 0.0))

    def close(self) -> None:
        self._native.close()


class SymmetricBuffer:
    """Memory every rank of the host reads and writes directly: `local` is
    this rank's part, `peer(r)` rank r's. Keep the object alive while views
    of it are in use; `close()` unmaps everything."""

    def __init__(self, comm, shape, dtype):
        dtype = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
        if dtype not in _tensors.DTYPE_CODES or dtype == "bfloat16":
            raise CommInvalidArgument(f"symmetric_empty: unsupported dtype {dtype}")
        self.shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        self.dtype = np.dtype(dtype)
        nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.comm = comm
        self._native = _comm.NativeSymmetric(comm._native, nbytes)
        self._views = [self._view(r) for r in range(comm.world_size)]

    def _view(self, rank):
        nbytes = self._native.nbytes
        holder = _AddressHolder(self._native.address(rank), nbytes, self)
        count = nbytes // self.dtype.itemsize
        return np.asarray(holder).view(self.dtype)[:count].reshape(self.shape)

    @property
    def local(self):
        return self._views[self.comm.rank]

    def peer(self, rank: int):
        if not 0 <= rank < len(self._views):
            raise CommInvalidArgument(f"symmetric buffer: rank {rank} is out of range [0, {len(self._views)})")
        return self._views[rank]

    def close(self) -> None:
        self._views = []
        self._native.close()


class _AddressHolder:
    """Exposes raw memory through the array interface; holds its owner."""

    def __init__(self, address, nbytes, owner):
        self._owner = owner
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}
