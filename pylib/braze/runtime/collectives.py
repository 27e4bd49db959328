"""The collectives of a compiled program, run through braze.comm.

A `*_start` op issues its collective without blocking (`async_op=True`) into
a fresh output buffer and leaves a handle in its slot; `braze.wait` blocks on
that handle and puts the output in its own slot. Everything the program runs
between the two runs while the collective is in flight. The communicator's
flight recorder, hooks, timeouts and abort see these collectives exactly as
they see eager ones.

Groups: an op names torch's process group (`group`) and its global ranks
(`ranks`). `register_communicator(comm, group=..., ranks=...)` says which
braze.comm communicator serves it; a program finds it by name first, then by
ranks, at its first call (docs/distributed.md).

Tensors stay where the program has them: a CUDA program's collectives need a
communicator that takes CUDA tensors (nccl), and their outputs are made on
the same device; `braze.wait` then orders the program's stream after the
collective without blocking the host. A tensor on a device its communicator
does not serve is refused before anything is issued.

The first call of a program also checks, per group, that every member runs
the same sequence of collectives (a fingerprint exchanged with one
all_gather), so a per-rank decision that changed the sequence fails with an
error naming the ranks instead of mispairing buffers or hanging.
"""

from __future__ import annotations

import hashlib
import threading

import torch

from braze.errors import BrazeError, CollectiveError, format_location

OPS = {"braze.all_reduce_start", "braze.all_gather_start", "braze.reduce_scatter_start",
       "braze.all_to_all_start", "braze.broadcast_start", "braze.wait"}
# torch's reduction names to braze.comm's.
_REDUCE = {"sum": "sum", "avg": "avg", "product": "prod", "min": "min", "max": "max"}

_lock = threading.Lock()
_by_name: dict[str, object] = {}
_by_ranks: dict[tuple[int, ...], object] = {}


def register_communicator(comm, *, group: str | None = None, ranks=None) -> None:
    """Serves the collectives of process group `group` (torch's group name,
    e.g. `dist.group.WORLD.group_name`), or of the group whose global ranks
    are `ranks` (in group order; all ranks `range(comm.world_size)` when
    neither is given), with the braze.comm communicator `comm`."""
    if group is None and ranks is None:
        ranks = range(comm.world_size)
    with _lock:
        if group is not None:
            _by_name[str(group)] = comm
        if ranks is not None:
            _by_ranks[tuple(int(r) for r in ranks)] = comm


def unregister_communicator(comm) -> None:
    """Forgets every registration of `comm`."""
    with _lock:
        for table in (_by_name, _by_ranks):
            for key in [k for k, v in table.items() if v is comm]:
                del table[key]


def _communicator(group: str, ranks: tuple[int, ...], location: str):
    with _lock:
        comm = _by_name.get(group) or _by_ranks.get(ranks)
    if comm is None:
        raise BrazeError(
            f"no braze.comm communicator serves process group {group!r} (ranks {list(ranks)}) of the "
            f"collective at {location}; call braze.register_communicator(comm, group={group!r}) on every "
            f"rank first (docs/distributed.md)")
    if comm.world_size != len(ranks):
        raise BrazeError(f"the communicator registered for process group {group!r} has {comm.world_size} "
                         f"ranks, but the group has {len(ranks)} ({list(ranks)})")
    return comm


class _Group:
    """One process group as a program uses it: its communicator (found at
    the first call) and the sequence of its collectives, checked across the
    group once."""

    def __init__(self, name: str, ranks: tuple[int, ...]):
        self.name, self.ranks = name, ranks
        self.sequence: list[str] = []
        self.comm = None

    def communicator(self, location: str, device: torch.device):
        """The group's communicator, refused before anything is issued if it
        does not take tensors on `device`; the first call also checks the
        members' sequences."""
        comm = self.comm or _communicator(self.name, self.ranks, location)
        if device.type != torch.device(comm.device).type:
            served = "CUDA" if torch.device(comm.device).type == "cuda" else "CPU"
            wanted = "nccl" if device.type == "cuda" else "shm, tcp, gloo or mpi"
            raise BrazeError(
                f"the collective at {location}: process group {self.name!r} is served by a {comm.backend} "
                f"communicator, which takes {served} tensors, but the program's tensor is on {device}; register "
                f"a {wanted} communicator for the group (braze never copies a collective's tensors between "
                f"devices)")
        if self.comm is None:
            self._check_sequence(comm)
            self.comm = comm
        return comm

    def _check_sequence(self, comm) -> None:
        digest = hashlib.sha256("\n".join(self.sequence).encode()).digest()
        mine = torch.tensor([int.from_bytes(digest[:8], "little", signed=True)], dtype=torch.int64,
                            device=comm.device)
        everyone = torch.empty(comm.world_size, dtype=torch.int64, device=comm.device)
        try:
            comm.all_gather(everyone, mine)
        except Exception as error:
            raise CollectiveError(f"process group {self.name!r}: checking the collective sequence failed: "
                                  f"{error}") from error
        differ = [rank for rank, value in enumerate(everyone.tolist()) if value != mine.item()]
        if differ:
            raise CollectiveError(
                f"process group {self.name!r}: rank(s) {differ} (group ranks) compiled a different sequence of "
                f"collectives than this rank ({comm.rank}); this rank's is: {'; '.join(self.sequence)}")


class CollectivePlan:
    """The groups of one program (one `_Group` per name)."""

    def __init__(self):
        self.groups: dict[str, _Group] = {}

    def group(self, op) -> _Group:
        from mlir import ir  # only while a program is built: a loaded AOT package has no MLIR

        name = ir.StringAttr(op.attributes["group"]).value
        ranks = tuple(ir.DenseI64ArrayAttr(op.attributes["ranks"]))
        group = self.groups.setdefault(name, _Group(name, ranks))
        if group.ranks != ranks:
            raise BrazeError(f"process group {name!r} appears with ranks {list(group.ranks)} and {list(ranks)}")
        return group


class _InFlight:
    __slots__ = ("work", "output", "call")

    def __init__(self, work, output, call):
        self.work, self.output, self.call = work, output, call


class StartCall:
    """A `*_start` step: issues the collective into a fresh buffer and
    leaves an `_InFlight` in the work's slot."""

    deterministic = False  # never run when the program is built

    def __init__(self, op, slots: dict, plan: CollectivePlan):
        from mlir import ir  # only while a program is built (see CollectivePlan.group)

        self.name = op.operation.name
        self.location = format_location(op.operation.location)
        self.group = plan.group(op)
        attributes = op.attributes
        self.reduce = _REDUCE.get(ir.StringAttr(attributes["reduce"]).value) if "reduce" in attributes else None
        if "reduce" in attributes and self.reduce is None:
            raise BrazeError(f"{self.name} at {self.location}: braze.comm has no reduction "
                             f"{ir.StringAttr(attributes['reduce']).value!r}")
        self.root = ir.IntegerAttr(attributes["root"]).value if "root" in attributes else None
        self.splits = [list(ir.DenseI64ArrayAttr(attributes[k])) for k in ("output_splits", "input_splits")
                       if k in attributes]
        self.input = slots[op.operation.operands[0]]
        self.result = slots[op.operation.results[0]]
        # What every member must agree on (sizes and splits may differ per
        # rank; the communicator checks them against each other per op).
        element = ir.RankedTensorType(op.operation.operands[0].type).element_type
        self.group.sequence.append(f"{self.name} {self.reduce} {self.root} {element}")
        self.issue = getattr(self, "_" + self.name[len("braze."):-len("_start")])

    def __call__(self, env: list) -> None:
        x = env[self.input].contiguous()
        comm = self.group.communicator(self.location, x.device)
        try:
            work, output = self.issue(comm, x)
        except Exception as error:
            raise CollectiveError(f"{self.name} at {self.location} (process group {self.group.name!r}): "
                                  f"{error}") from error
        env[self.result] = _InFlight(work, output, self)

    def _all_reduce(self, comm, x):
        output = x.clone()
        return comm.all_reduce(output, op=self.reduce, async_op=True), output

    def _broadcast(self, comm, x):
        output = x.clone()
        return comm.broadcast(output, self.root, async_op=True), output

    def _all_gather(self, comm, x):
        output = x.new_empty((x.shape[0] * comm.world_size, *x.shape[1:]))
        return comm.all_gather(output, x, async_op=True), output

    def _reduce_scatter(self, comm, x):
        output = x.new_empty((x.shape[0] // comm.world_size, *x.shape[1:]))
        return comm.reduce_scatter(output, x, op=self.reduce, async_op=True), output

    def _all_to_all(self, comm, x):
        row = x[0].numel() if x.shape[0] else 0
        if not self.splits or not self.splits[0]:
            output = torch.empty_like(x)
            return comm.all_to_all_single(output, x, async_op=True), output
        output_splits, input_splits = self.splits
        output = x.new_empty((sum(output_splits), *x.shape[1:]))
        work = comm.all_to_all_single(output, x, out_splits=[s * row for s in output_splits],
                                      in_splits=[s * row for s in input_splits], async_op=True)
        return work, output


class WaitCall:
    """A `braze.wait` step: blocks until the collective is done and puts
    its output in the result's slot."""

    deterministic = False

    def __init__(self, op, slots: dict, start: StartCall):
        self.name = op.operation.name
        # What traces say of the collective it waits for.
        self.collective, self.group_name, self.location = start.name, start.group.name, start.location
        self.work = slots[op.operation.operands[0]]
        self.result = slots[op.operation.results[0]]
        # The start's input is read while the collective is in flight: the
        # program keeps it (and lets no kernel write into it) until here.
        self.reads = [self.work, start.input]

    def __call__(self, env: list) -> None:
        in_flight = env[self.work]
        try:
            in_flight.work.wait()
        except Exception as error:
            start = in_flight.call
            raise CollectiveError(f"{start.name} at {start.location} (process group {start.group.name!r}) "
                                  f"failed: {error}") from error
        env[self.result] = in_flight.output


def collective_step(op, slots: dict, plan: CollectivePlan, starts: dict):
    """The step for a collective op, and the slots it reads (a wait also
    holds its start's input). `starts` maps work values to their StartCall."""
    if op.operation.name == "braze.wait":
        call = WaitCall(op, slots, starts[op.operation.operands[0]])
        return call, call.reads
    call = StartCall(op, slots, plan)
    starts[op.operation.results[0]] = call
    return call, [call.input]
