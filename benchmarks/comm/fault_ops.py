"""The ops a fault-injection trial runs (benchmarks/comm/faults.py): each
call issues one op of a kind, with data that depends on (rank, i), and
returns what is wrong with its result ("" when correct)."""

from __future__ import annotations

import numpy as np

SIZES = (1, 1000, 300_000)  # elements: tree, mid, ring paths
DTYPES = ("float32", "int64")
WINDOW_ELEMENTS = 4096
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all_uneven", "send_recv", "barrier",
       "window_put", "reconfigure")


def _splits(i, world, src):
    """Uneven all_to_all: rank src sends (src + dst + i) % 4 * 37 elements to dst."""
    return [(src + dst + i) % 4 * 37 for dst in range(world)]


def run(comm, op, i, n, dtype, win=None, uuid=None):
    """`uuid` names a reconfigure (default "planned-<i>"); each must be fresh."""
    rank, world = comm.rank, comm.world_size
    if op == "all_reduce":
        t = np.full(n, rank + 1 + i, dtype)
        comm.all_reduce(t)
        want = world * (world + 1) // 2 + world * i
        return "" if np.all(t == want) else f"all_reduce {i}: got {t[:3]}, want {want}"
    if op == "all_gather":
        out = np.zeros(n * world, dtype)
        comm.all_gather(out, np.full(n, rank + i, dtype))
        want = np.repeat(np.arange(world) + i, n).astype(dtype)
        return "" if np.array_equal(out, want) else f"all_gather {i}: wrong blocks"
    if op == "reduce_scatter":
        out = np.zeros(n, dtype)
        comm.reduce_scatter(out, np.full(n * world, rank + i, dtype))
        want = world * (world - 1) // 2 + world * i
        return "" if np.all(out == want) else f"reduce_scatter {i}: got {out[:3]}, want {want}"
    if op == "broadcast":
        root = i % world
        t = np.full(n, rank * 10 + i, dtype)
        comm.broadcast(t, root)
        return "" if np.all(t == root * 10 + i) else f"broadcast {i}: got {t[:3]}, want {root * 10 + i}"
    if op == "all_to_all_uneven":
        ins = _splits(i, world, rank)
        outs = [_splits(i, world, src)[rank] for src in range(world)]
        src = np.concatenate([np.full(k, 100 * rank + dst, dtype) for dst, k in enumerate(ins)])
        out = np.zeros(sum(outs), dtype)
        comm.all_to_all_single(out, src, out_splits=outs, in_splits=ins)
        want = np.concatenate([np.full(k, 100 * s + rank, dtype) for s, k in enumerate(outs)])
        return "" if np.array_equal(out, want) else f"all_to_all {i}: wrong blocks"
    if op == "send_recv":
        right, left = (rank + 1) % world, (rank - 1) % world
        got = np.zeros(n, dtype)
        if rank % 2 == 0:
            comm.send(np.full(n, rank + i, dtype), right)
            comm.recv(got, left)
        else:
            comm.recv(got, left)
            comm.send(np.full(n, rank + i, dtype), right)
        return "" if np.all(got == left + i) else f"send/recv {i}: got {got[:3]}, want {left + i}"
    if op == "barrier":
        comm.barrier()
        return ""
    if op == "window_put":
        m, right, left = min(n, WINDOW_ELEMENTS), (rank + 1) % world, (rank - 1) % world
        win.put(right, np.full(m, rank + i, np.float32), 0)
        comm.barrier()
        got = win.buffer[:m].copy()
        comm.barrier()  # nobody puts the next value before everyone has looked
        return "" if np.all(got == left + i) else f"window put {i}: got {got[:3]}, want {left + i}"
    if op == "reconfigure":
        comm.reconfigure(uuid or f"planned-{i}", list(range(world)))
        return run(comm, "all_reduce", i, n, dtype)
    raise ValueError(op)
