"""braze.comm: fault-tolerant collectives for braze (see docs/comm.md).

    import braze.comm
    store = braze.comm.TCPStore("127.0.0.1", 29500, is_server=(rank == 0))
    comm = braze.comm.new_comm("shm", rank, world_size, store, timeout=30.0)
    comm.all_reduce(t)

Backends are found through the entry-point group `braze.comm_backends`
(built in: shm, tcp, gloo, nccl, mpi).
"""

from __future__ import annotations

from importlib.metadata import entry_points

from braze import logs
from braze.comm.base import Comm, HookHandle, Work
from braze.comm.errors import (
    CommAborted,
    CommDeviceMismatch,
    CommError,
    CommInvalidArgument,
    CommMismatch,
    CommRankFailed,
    CommTimeout,
)
from braze.comm.stores import FileStore, Store, TCPStore, rejected_connections
from braze.comm.window import SymmetricBuffer, Window

ENTRY_POINT_GROUP = "braze.comm_backends"


def available_backends() -> list[str]:
    """Names registered under the `braze.comm_backends` entry-point group."""
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def _factory(backend: str):
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == backend:
            return ep.load()
    raise CommInvalidArgument(
        f"unknown comm backend {backend!r}; registered: {', '.join(available_backends()) or 'none'} "
        f"(entry-point group {ENTRY_POINT_GROUP!r}; reinstall braze if this list is empty)")


def new_comm(backend: str, rank: int, world_size: int, store: Store, timeout: float = 30.0, **options) -> Comm:
    """Creates a communicator; every rank of the group calls it.

    Options (native backends): `group` (store namespace), `flight_recorder_size`,
    `dump_dir` (flight-recorder dumps on timeout/abort; default $BRAZE_FR_DIR),
    `record_stack` (Python stack in every flight-recorder entry).
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise CommInvalidArgument(f"new_comm: world_size must be a positive int, got {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise CommInvalidArgument(f"new_comm: rank {rank!r} is out of range [0, {world_size})")
    log = logs.logger("comm")
    try:
        comm = _factory(backend)(rank, world_size, store, float(timeout), **options)
    except CommError as error:
        log.warning("rank %d of %d: creating a %s communicator failed: %s", rank, world_size, backend, error)
        raise
    log.info("rank %d of %d: %s communicator ready (timeout %.1f s)", rank, world_size, backend, timeout)
    return comm


def join_comm(backend: str, rank: int, world_size: int, store: Store, uuid: str, timeout: float = 30.0,
              group: str = "braze", **options) -> Comm:
    """A replacement process joins survivors that call `reconfigure(uuid, members)`
    with `None` at position `rank` of `members`."""
    return new_comm(backend, rank, world_size, store, timeout, group=f"{group}/{uuid}", **options)


def symmetric_empty(comm: Comm, shape, dtype) -> SymmetricBuffer:
    """Collective: a buffer every rank of this host can read and write through
    `.peer(rank)` (and `.local`). All ranks must be on one host."""
    if not hasattr(comm, "_native"):
        raise CommInvalidArgument(f"symmetric_empty needs a native (shm/tcp) communicator, not {comm.backend}")
    return SymmetricBuffer(comm, shape, dtype)


__all__ = [
    "Comm", "CommAborted", "CommDeviceMismatch", "CommError", "CommInvalidArgument", "CommMismatch", "CommRankFailed",
    "CommTimeout", "FileStore", "HookHandle", "Store", "SymmetricBuffer", "TCPStore", "Window", "Work",
    "available_backends", "join_comm", "new_comm", "rejected_connections", "symmetric_empty",
]
