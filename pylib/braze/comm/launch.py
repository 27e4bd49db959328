"""Starts a group of local ranks (spawned processes) around one TCP store and
collects what each returns, with a hard deadline: ranks still running then
are killed, so a caller never hangs. Used by tests and benchmarks; handy for
trying braze.comm on one machine."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import secrets
import time
import traceback

from braze.comm.stores import SECRET_ENV


def _rank_main(fn, rank, world, backend, port, timeout, args, results, options, secret):
    try:
        # In the environment, so that whatever the rank starts (stores of its
        # own, replacement ranks) authenticates with the same secret.
        os.environ[SECRET_ENV] = secret
        import braze.comm as bc

        store = bc.TCPStore("127.0.0.1", port, False)
        comm = bc.new_comm(backend, rank, world, store, timeout=timeout, **options)
        value = fn(comm, rank, world, *args)
        results.put((rank, "ok", value))
        comm.close()
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def spawn_group(fn, world, backend="shm", *, args=(), deadline=60.0, timeout=10.0, options=None, expect_dead=()):
    """Runs `fn(comm, rank, world, *args)` on `world` spawned ranks; returns
    {rank: value}. Raises RuntimeError on a rank's exception, on ranks that
    did not finish by `deadline` seconds, or that died unless in `expect_dead`.

    The group's job secret is $BRAZE_COMM_SECRET, or a fresh random one handed
    to the ranks."""
    import braze.comm as bc

    secret = os.environ.get(SECRET_ENV) or secrets.token_hex(32)
    store = bc.TCPStore("127.0.0.1", 0, True, secret=secret)  # outlives any rank that dies
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    # Not daemonic: a rank may start processes itself (a replacement rank);
    # leftovers are killed below all the same.
    procs = [ctx.Process(target=_rank_main,
                         args=(fn, r, world, backend, store.port, timeout, args, results, options or {}, secret))
             for r in range(world)]
    for p in procs:
        p.start()
    out, errors = {}, {}
    end = time.monotonic() + deadline
    while len(out) + len(errors) < world - len(expect_dead) and time.monotonic() < end:
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
        raise RuntimeError("\n".join(f"rank {r}:\n{tb}" for r, tb in sorted(errors.items())))
    missing = sorted(set(range(world)) - set(out) - set(expect_dead))
    if missing:
        raise RuntimeError(f"ranks {missing} did not finish within {deadline} s")
    return out
