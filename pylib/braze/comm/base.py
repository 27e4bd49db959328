"""The backend-independent face of a communicator: `Comm`, `Work`, hook
handles. Native backends (shm, tcp) and adapters (gloo, nccl, mpi) subclass `Comm`."""

from __future__ import annotations

import abc

REDUCE_OPS = ("sum", "prod", "min", "max", "avg")


class HookHandle:
    """Returned by `register_*_hook`; `remove()` unregisters the hook."""

    def __init__(self, remove):
        self._remove = remove

    def remove(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None


class Work(abc.ABC):
    """An op in flight (returned when `async_op=True`)."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until done; raises the op's CommError. With `timeout`
        (seconds) raises CommTimeout if the op is still running then."""

    @abc.abstractmethod
    def is_completed(self) -> bool: ...

    @abc.abstractmethod
    def exception(self):
        """The op's CommError if it failed, else None."""


class Comm(abc.ABC):
    """A process group. Collectives take numpy arrays or torch CPU tensors
    (float32, float16, bfloat16, int32, int64) and work on them in place;
    the nccl backend takes CUDA tensors of its device instead."""

    rank: int
    world_size: int
    backend: str
    # Where the tensors of its collectives live, as torch spells a device.
    device = "cpu"

    @abc.abstractmethod
    def all_reduce(self, t, op: str = "sum", async_op: bool = False): ...

    @abc.abstractmethod
    def all_gather(self, out, t, async_op: bool = False): ...

    @abc.abstractmethod
    def reduce_scatter(self, out, t, op: str = "sum", async_op: bool = False): ...

    @abc.abstractmethod
    def broadcast(self, t, root: int, async_op: bool = False): ...

    @abc.abstractmethod
    def all_to_all_single(self, out, t, out_splits=None, in_splits=None, async_op: bool = False): ...

    @abc.abstractmethod
    def send(self, t, dst: int, async_op: bool = False): ...

    @abc.abstractmethod
    def recv(self, t, src: int, async_op: bool = False): ...

    @abc.abstractmethod
    def barrier(self, async_op: bool = False): ...

    @abc.abstractmethod
    def register_pre_hook(self, fn) -> HookHandle: ...

    @abc.abstractmethod
    def register_post_hook(self, fn) -> HookHandle: ...

    @abc.abstractmethod
    def register_abort_hook(self, fn) -> HookHandle: ...

    @abc.abstractmethod
    def abort(self, reason: str = "") -> None: ...

    @abc.abstractmethod
    def is_aborted(self) -> bool: ...

    @abc.abstractmethod
    def reconfigure(self, uuid: str, members) -> None: ...

    @abc.abstractmethod
    def flight_recorder_dump(self, path: str | None = None) -> str: ...

    def new_window(self, buffer):
        raise NotImplementedError(f"the {self.backend} backend has no one-sided windows")

    def close(self) -> None:
        """Releases the group's resources (also done at garbage collection)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
