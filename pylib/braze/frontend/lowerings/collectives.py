"""torch.distributed's functional collectives (`_c10d_functional`) as braze
collective ops: each collective becomes a `*_start` op returning a
`!braze.work<T>`, each `wait_tensor` a `braze.wait` (dialects/BrazeCollectiveOps.td).

The group is read when the graph is captured: torch's group name becomes the
op's `group`, the group's global ranks its `ranks`. At run time the group is
the braze.comm communicator registered for that name or those ranks
(docs/distributed.md).
"""

from __future__ import annotations

import torch
from mlir import ir

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import is_index
from braze.frontend.lowerings import lowers

c10d = torch.ops._c10d_functional
_WAIT = c10d.wait_tensor.default


def _group(group_name: str) -> tuple[str, list[int]]:
    """Torch's group name and the group's global ranks, in group order."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group

    if not dist.is_available() or not dist.is_initialized():
        raise BrazeError(f"a collective of process group {group_name!r} was captured, but "
                         "torch.distributed is not initialized; braze reads the group's ranks from it")
    return group_name, list(dist.get_process_group_ranks(_resolve_process_group(group_name)))


def _start(b, op_class, x, group_name, *attributes):
    """A `*_start` op for the node, after checking every user of its result
    is a wait_tensor (the value is only a handle until then)."""
    others = sorted({str(user.target) for user in b.node.users if user.target is not _WAIT})
    if others:
        raise BrazeError(f"the result of {b.node.target} is used by {', '.join(others)} before "
                         "wait_tensor; only a wait may read an issued collective")
    group, ranks = _group(group_name)
    work = ir.Type.parse(f"!braze.work<{b.out_type()}>")
    return op_class(work, x, *attributes, group, ranks).result


def _check_size(group_size: int, ranks: list[int], group_name: str) -> None:
    if group_size != len(ranks):
        raise BrazeError(f"the collective names a group of {group_size} but process group {group_name!r} "
                         f"has {len(ranks)} ranks")


@lowers(c10d.all_reduce.default)
def all_reduce(b, x, reduce_op, group_name):
    return _start(b, bz.AllReduceStartOp, x, group_name, reduce_op)


@lowers(c10d.all_gather_into_tensor.default)
def all_gather_into_tensor(b, x, group_size, group_name):
    _check_size(group_size, _group(group_name)[1], group_name)
    return _start(b, bz.AllGatherStartOp, x, group_name)


@lowers(c10d.reduce_scatter_tensor.default)
def reduce_scatter_tensor(b, x, reduce_op, group_size, group_name):
    _check_size(group_size, _group(group_name)[1], group_name)
    return _start(b, bz.ReduceScatterStartOp, x, group_name, reduce_op)


@lowers(c10d.all_to_all_single.default)
def all_to_all_single(b, x, output_split_sizes, input_split_sizes, group_name):
    splits = []
    for name, sizes in (("output", output_split_sizes), ("input", input_split_sizes)):
        sizes = list(sizes or [])
        if any(is_index(size) for size in sizes):
            raise BrazeError(f"all_to_all_single's {name} splits are known only at run time; "
                             "braze takes splits fixed when the graph is captured")
        splits.append(sizes)
    return _start(b, bz.AllToAllStartOp, x, group_name, *splits)


@lowers(c10d.broadcast.default)
def broadcast(b, x, src, group_name):
    ranks = _group(group_name)[1]
    if src not in ranks:
        raise BrazeError(f"broadcast from rank {src}, which is not in process group {group_name!r} ({ranks})")
    return _start(b, bz.BroadcastStartOp, x, group_name, ranks.index(src))


@lowers(_WAIT)
def wait_tensor(b, work):
    if isinstance(work, ir.Value) and str(work.type).startswith("!braze.work<"):
        return bz.WaitOp(work, results=[b.out_type()]).result
    # A collective braze did not lower runs through torch (an extern call):
    # torch's own wait completes it.
    raise BrazeError("wait_tensor of a value no braze collective made")
