"""Runs a function on N spawned ranks with a hard deadline, so no test can
hang: leftovers are killed and reported as failures."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
import traceback


def _child(worker, rank, world, backend, port, comm_timeout, args, results, options):
    try:
        import braze.comm as bc

        store = bc.TCPStore("127.0.0.1", port, False)
        comm = bc.new_comm(backend, rank, world, store, timeout=comm_timeout, **options)
        value = worker(comm, rank, world, *args)
        results.put((rank, "ok", value))
        comm.close()
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def run_group(worker, world, backend="shm", *, args=(), deadline=60.0, comm_timeout=10.0, options=None,
              expect_dead=()):
    """{rank: value} for every rank that finished; raises on errors, hangs,
    or ranks that died unexpectedly."""
    import braze.comm as bc

    store = bc.TCPStore("127.0.0.1", 0, True)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(worker, r, world, backend, store.port, comm_timeout, args, results,
                                              options or {}), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    out, errors = {}, {}
    end = time.monotonic() + deadline
    expected = world - len(expect_dead)
    while len(out) + len(errors) < expected and time.monotonic() < end:
        try:
            rank, kind, value = results.get(timeout=0.2)
        except queue.Empty:
            continue
        (out if kind == "ok" else errors)[rank] = value
    for p in procs:
        p.join(timeout=max(0.1, end - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    if errors:
        raise AssertionError("\n".join(f"rank {r}:\n{tb}" for r, tb in sorted(errors.items())))
    missing = sorted(set(range(world)) - set(out) - set(expect_dead))
    if missing:
        raise AssertionError(f"ranks {missing} did not finish within {deadline} s")
    return out


def kill_self():
    os.kill(os.getpid(), 9)
