"""Functions the spawned ranks run (module level, so spawn can import them)."""

from __future__ import annotations

import json
import zlib
import os
import time

import numpy as np

import group

NP_DTYPES = ("float32", "float16", "int32", "int64")
OPS = ("sum", "prod", "min", "max", "avg")


def make(rank, n, dtype, salt):
    """Small integers: exact in every dtype, so every rank computes references."""
    rng = np.random.default_rng(1000 * salt + rank)
    return rng.integers(-2, 3, size=n).astype(np.float64)


def reduce_ref(arrays, op, world):
    stack = np.stack(arrays)
    if op == "sum":
        return stack.sum(0)
    if op == "prod":
        return stack.prod(0)
    if op == "min":
        return stack.min(0)
    if op == "max":
        return stack.max(0)
    return np.trunc(stack.sum(0) / world)  # integer avg truncates toward zero


def to_kind(values, dtype):
    if dtype == "bfloat16":
        import torch

        return torch.tensor(values, dtype=torch.float32).to(torch.bfloat16)
    return values.astype(dtype)


def as_f64(t):
    if hasattr(t, "numpy") and not isinstance(t, np.ndarray):
        return t.float().numpy().astype(np.float64)
    return np.asarray(t, dtype=np.float64)


def check(failures, label, got, want, dtype, op="sum"):
    got = as_f64(got)
    tol = 0 if dtype.startswith("int") else (1e-2 if dtype in ("float16", "bfloat16") else 1e-6)
    if op == "avg" and not dtype.startswith("int"):
        want = None if want is None else want
    if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
        bad = np.nonzero(~np.isclose(got, want, rtol=tol, atol=tol))[0][:5] if got.shape == want.shape else []
        failures.append(f"{label}: mismatch at {list(bad)} got {got[bad] if len(bad) else got.shape} "
                        f"want {want[bad] if len(bad) else want.shape}")


def collectives(comm, rank, world, sizes, dtypes):
    """Every collective against numpy; returns the failures."""
    failures = []
    for dtype in dtypes:
        for n in sizes:
            salt = zlib.crc32(f"{dtype}{n}".encode()) % 1000
            for op in OPS:
                data = [make(r, n, dtype, salt) for r in range(world)]
                want = reduce_ref(data, op, world)
                if op == "avg" and not dtype.startswith("int"):
                    want = data[0] * 0 + np.stack(data).sum(0) / world
                t = to_kind(data[rank], dtype)
                comm.all_reduce(t, op=op)
                check(failures, f"all_reduce {op} {dtype} n={n}", t, want, dtype, op)
            data = [make(r, n, dtype, salt + 1) for r in range(world)]
            out = to_kind(np.zeros(n * world), dtype)
            comm.all_gather(out, to_kind(data[rank], dtype))
            check(failures, f"all_gather {dtype} n={n}", out, np.concatenate(data), dtype)
            big = [make(r, n * world, dtype, salt + 2) for r in range(world)]
            out = to_kind(np.zeros(n), dtype)
            comm.reduce_scatter(out, to_kind(big[rank], dtype), op="sum")
            check(failures, f"reduce_scatter {dtype} n={n}", out, np.stack(big).sum(0)[rank * n:(rank + 1) * n], dtype)
            root = n % world
            t = to_kind(make(rank, n, dtype, salt + 3), dtype)
            comm.broadcast(t, root)
            check(failures, f"broadcast root={root} {dtype} n={n}", t, make(root, n, dtype, salt + 3), dtype)
            # Uneven all_to_all: rank i sends (i + j + n) % 5 elements to rank j.
            split = lambda i, j: (i + j + n) % 5  # noqa: E731
            ins = [split(rank, j) for j in range(world)]
            outs = [split(i, rank) for i in range(world)]
            src = np.concatenate([np.full(split(rank, j), 100 * rank + j) for j in range(world)]) if sum(ins) else np.zeros(0)
            out = to_kind(np.zeros(sum(outs)), dtype)
            comm.all_to_all_single(out, to_kind(src, dtype), out_splits=outs, in_splits=ins)
            want = np.concatenate([np.full(split(i, rank), 100 * i + rank) for i in range(world)]) if sum(outs) else np.zeros(0)
            if dtype in ("float16", "bfloat16"):
                want = as_f64(to_kind(want, dtype))
            check(failures, f"all_to_all {dtype} n={n}", out, want, dtype)
            # Ring of send/recv.
            t = to_kind(make(rank, n, dtype, salt + 4), dtype)
            got = to_kind(np.zeros(n), dtype)
            right, left = (rank + 1) % world, (rank - 1) % world
            if rank % 2 == 0:
                comm.send(t, right)
                comm.recv(got, left)
            else:
                comm.recv(got, left)
                comm.send(t, right)
            check(failures, f"send/recv {dtype} n={n}", got, make(left, n, dtype, salt + 4), dtype)
    comm.barrier()
    return failures


def async_overlap(comm, rank, world):
    a = np.full(500_000, rank + 1, dtype=np.float32)
    b = np.full(1001, 2 * (rank + 1), dtype=np.int64)
    wa = comm.all_reduce(a, async_op=True)
    wb = comm.all_reduce(b, op="max", async_op=True)
    assert wb.wait(10.0) and wa.wait(10.0)
    assert wa.is_completed() and wb.is_completed() and wa.exception() is None
    total = world * (world + 1) / 2
    return bool(np.all(a == total)) and bool(np.all(b == 2 * world))


def hooks_in_order(comm, rank, world):
    events = []
    pre = comm.register_pre_hook(lambda i: events.append(("pre", i["op"], i["seq"], i["in_numel"], i["dtype"])))
    post = comm.register_post_hook(lambda i: events.append(("post", i["op"], i["seq"], i["duration"] >= 0, i["ok"])))
    comm.all_reduce(np.ones(5, np.float32))
    comm.broadcast(np.ones(3, np.int32), 0)
    pre.remove()
    post.remove()
    comm.barrier()  # not recorded: hooks removed
    return events


def bad_inputs(comm, rank, world):
    """Each bad call must raise a clear error; the comm must stay usable."""
    import braze.comm as bc

    seen = []

    def expect(exc_type, fn, needle):
        try:
            fn()
        except exc_type as exc:
            seen.append(needle in str(exc))
            return
        seen.append(False)

    # Mismatched sizes across ranks: detected on every rank, nothing copied.
    expect(bc.CommMismatch, lambda: comm.all_reduce(np.ones(10 + rank, np.float32)), "disagree")
    expect(bc.CommMismatch, lambda: comm.all_reduce(np.ones(4, np.float32 if rank else np.int32)), "disagree")
    expect(bc.CommInvalidArgument, lambda: comm.all_gather(np.ones(3, np.int32), np.ones(2, np.float32)), "dtypes differ")
    expect(bc.CommInvalidArgument, lambda: comm.all_reduce(np.ones(4, np.float64)), "unsupported dtype")
    expect(bc.CommInvalidArgument, lambda: comm.broadcast(np.ones(4, np.float32), world), "out of range")
    expect(bc.CommInvalidArgument, lambda: comm.send(np.ones(4, np.float32), -1), "out of range")
    expect(bc.CommInvalidArgument, lambda: comm.all_gather(np.ones(5, np.float32), np.ones(2, np.float32)), "needs")
    expect(bc.CommInvalidArgument, lambda: comm.all_reduce(np.ones((4, 4), np.float32)[:, 1]), "contiguous")
    expect(bc.CommInvalidArgument, lambda: comm.all_to_all_single(np.ones(world, np.float32), np.ones(world, np.float32),
                                                                  in_splits=[-1] + [1] * world), "non-negative")
    win = comm.new_window(np.zeros(8, np.float32))
    expect(bc.CommInvalidArgument, lambda: win.put((rank + 1) % world, np.ones(4, np.float32), 6), "past the end")
    expect(bc.CommInvalidArgument, lambda: win.get((rank + 1) % world, 7, 2), "past the end")
    comm.barrier()
    win.close()
    t = np.ones(7, np.float32)
    comm.all_reduce(t)
    seen.append(bool(np.all(t == world)))
    return seen


def fault(comm, rank, world, victim, when, dump_dir):
    """`victim` dies before or during a collective; survivors must see an
    error within the timeout, run abort hooks, dump, reconfigure, continue."""
    aborts = []
    comm.register_abort_hook(lambda i: aborts.append(i["op"]))
    comm.all_reduce(np.ones(4, np.float32))  # seq 0 completes everywhere
    if rank == victim and when == "before":
        group.kill_self()
    if rank == victim and when == "during":
        comm.all_reduce(np.ones(4_000_000, np.float32), async_op=True)
        time.sleep(0.002)
        group.kill_self()
    start = time.monotonic()
    error = None
    try:
        comm.all_reduce(np.ones(4_000_000, np.float32))
    except Exception as exc:
        error = type(exc).__name__
    detected = time.monotonic() - start
    survivors = [r for r in range(world) if r != victim]
    t0 = time.monotonic()
    comm.reconfigure("after-fault", survivors)
    t = np.full(1001, comm.rank + 1, np.float32)
    comm.all_reduce(t)
    recovery = time.monotonic() - t0
    n = len(survivors)
    return {"error": error, "detected_s": detected, "aborts": aborts, "rank": comm.rank,
            "world": comm.world_size, "ok": bool(np.all(t == n * (n + 1) / 2)), "recovery_s": recovery}


def abort_pending(comm, rank, world):
    """abort() fails pending and later ops promptly with CommAborted."""
    import braze.comm as bc

    if rank == 0:
        time.sleep(1.0)  # rank 0 never joins: rank 1's op stays pending
        return "skip"
    work = comm.all_reduce(np.ones(10, np.float32), async_op=True)
    time.sleep(0.05)
    comm.abort("test abort")
    start = time.monotonic()
    kinds = []
    try:
        work.wait()
    except bc.CommAborted:
        kinds.append("pending")
    try:
        comm.barrier()
    except bc.CommAborted:
        kinds.append("later")
    return {"kinds": kinds, "prompt": time.monotonic() - start < 1.0, "aborted": comm.is_aborted()}


def timeout_names_missing(comm, rank, world, dump_dir):
    import braze.comm as bc

    comm.barrier()
    if rank == world - 1:
        time.sleep(3.0)  # a straggler: never joins seq 1 in time
        return {"skipped": True}
    try:
        comm.all_reduce(np.ones(8, np.float32))
    except bc.CommTimeout as exc:
        return {"message": str(exc), "missing": exc.missing_ranks}
    return {"message": "no timeout"}


def windows(comm, rank, world):
    buf = np.zeros(16, np.float32)
    win = comm.new_window(buf)
    peer = (rank + 1) % world
    win.put(peer, np.full(4, rank + 1, np.float32), offset=4 * 0 + 2)
    win.signal(peer)
    win.wait_signal((rank - 1) % world, timeout=10.0)
    got_local = buf[2:6].tolist()
    remote = win.get(peer, 0, 16)
    comm.barrier()
    win.close()
    return {"local": got_local, "remote": remote.tolist(), "size": 16}


def symmetric(comm, rank, world):
    import braze.comm as bc

    mem = bc.symmetric_empty(comm, (4, world), np.float32)
    mem.local[:] = rank
    comm.barrier()
    seen = [float(mem.peer(r)[1, 1]) for r in range(world)]
    mem.peer((rank + 1) % world)[0, rank] = 100 + rank  # write into a peer
    comm.barrier()
    row = mem.local[0].tolist()
    comm.barrier()
    mem.close()
    return {"seen": seen, "row": row}


def flight_dump(comm, rank, world, dump_dir):
    comm.all_reduce(np.ones(3, np.float32))
    comm.barrier()
    text = comm.flight_recorder_dump(os.path.join(dump_dir, f"braze_fr_g0_rank{rank}.json"))
    return json.loads(text)["entries"]


def diverge(comm, rank, world, dump_dir):
    """Rank 1 issues a different collective at seq 1: everyone fails cleanly."""
    import braze.comm as bc

    comm.barrier()
    try:
        if rank == 1:
            comm.broadcast(np.ones(4, np.float32), 0)
        else:
            comm.all_reduce(np.ones(4, np.float32))
    except bc.CommMismatch as exc:
        comm.flight_recorder_dump(os.path.join(dump_dir, f"braze_fr_g0_rank{rank}.json"))
        return str(exc)
    return "no error"


def dropped_work_handle(comm, rank, world):
    """Fire-and-forget: the runtime keeps the buffers of a dropped Work alive."""
    import gc

    comm.all_reduce(np.ones(2_000_000, np.float32), async_op=True)
    gc.collect()
    t = np.ones(5, np.float32)
    comm.all_reduce(t)
    return bool(np.all(t == world))


def _replacement_rank(port, backend, results):
    import braze.comm as bc

    store = bc.TCPStore("127.0.0.1", port, False)
    comm = bc.join_comm(backend, 2, 3, store, "rejoin", timeout=10.0)
    t = np.full(7, comm.rank + 1, np.float32)
    comm.all_reduce(t)
    comm.reconfigure("again", [0, 1, 2])  # later generations: same namespace as the survivors
    comm.all_reduce(t)
    results.put(t.tolist())
    comm.close()


def replace_dead_rank(comm, rank, world, backend):
    """Rank 2 dies; rank 0 starts a replacement that joins as the new rank 2."""
    import multiprocessing as mp

    comm.barrier()
    if rank == 2:
        group.kill_self()
    try:
        comm.all_reduce(np.ones(4, np.float32))
    except Exception:
        pass
    joiner, results = None, None
    if rank == 0:
        ctx = mp.get_context("spawn")
        results = ctx.Queue()
        joiner = ctx.Process(target=_replacement_rank, args=(comm.store.port, backend, results), daemon=True)
        joiner.start()
    comm.reconfigure("rejoin", [0, 1, None])
    t = np.full(7, comm.rank + 1, np.float32)
    comm.all_reduce(t)
    comm.reconfigure("again", [0, 1, 2])
    comm.all_reduce(t)
    out = {"mine": t.tolist(), "world": comm.world_size}
    if joiner is not None:
        out["joiner"] = results.get(timeout=30)
        joiner.join(10)
    return out


# One member's transport setup fails at once, for a reason of its own: on tcp
# it cannot bind its data address, on shm (rank 0 only) its segment layout is
# refused. Its peers are left waiting for it in the setup.
SETUP_SPOILERS = {"tcp": ("BRAZE_COMM_ADDR", "192.0.2.1"), "shm": ("BRAZE_SHM_SLOT_BYTES", "1")}


def setup_quitter(comm, rank, world, backend, quitter):
    """`quitter` fails its side of a reconfigure; returns every rank's error
    and how long it took, then whether an immediate retry works."""
    import braze.comm as bc

    name, value = SETUP_SPOILERS[backend]
    if rank == quitter:
        os.environ[name] = value
    start = time.monotonic()
    try:
        comm.reconfigure("spoiled", list(range(world)))
        error = None
    except bc.CommError as exc:
        error = {"type": type(exc).__name__, "message": str(exc), "missing": exc.missing_ranks}
    took = time.monotonic() - start
    os.environ.pop(name, None)
    comm.reconfigure("retry", list(range(world)))  # at once: the others must not still be waiting
    t = np.full(5, rank + 1, np.float32)
    comm.all_reduce(t)
    return {"error": error, "took": took, "sum": t.tolist()}


def peer_aborts(comm, rank, world):
    """Rank 0 aborts and reconfigures a second later; rank 1 enters a
    collective half a second after the abort. Returns how rank 1's
    collective failed and whether the reconfigure that follows works."""
    import braze.comm as bc

    comm.barrier()
    error = None
    if rank == 0:
        comm.abort("rank 0 saw a failure first")
        time.sleep(1.0)
    else:
        time.sleep(0.5)
        start = time.monotonic()
        try:
            comm.all_reduce(np.ones(4, np.float32))
        except bc.CommError as exc:
            error = {"type": type(exc).__name__, "missing": exc.missing_ranks, "after": time.monotonic() - start}
    comm.reconfigure("after", list(range(world)))
    t = np.full(3, rank + 1, np.float32)
    comm.all_reduce(t)
    return {"error": error, "sum": t.tolist()}
