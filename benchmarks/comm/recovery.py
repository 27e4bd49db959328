"""Recovery time: a rank dies; the survivors detect it, rebuild the group in
place (`reconfigure`) and run a correct all_reduce. Detection is timed from
the victim's death (it stamps the store just before SIGKILL), recovery from
the end of detection to the end of the first collective of the new group."""

from __future__ import annotations

import os
import time

import numpy as np

VICTIM = 2


def fault_and_recover(comm, rank, world, store_port):
    import braze.comm as bc

    store = bc.TCPStore("127.0.0.1", store_port, False)
    comm.all_reduce(np.ones(1024, np.float32))  # warm
    if rank == VICTIM:
        time.sleep(0.2)  # let the survivors block in the next op first
        store.set("bench/death", repr(time.time()))
        os.kill(os.getpid(), 9)
    t = np.ones(1024, np.float32)
    try:
        comm.all_reduce(t)
        raise AssertionError("the collective survived a dead rank")
    except bc.CommError:
        detected_at = time.time()
    death = float(store.get("bench/death", 10.0))
    start = time.perf_counter()
    survivors = [r for r in range(world) if r != VICTIM]
    comm.reconfigure("bench-recovery", survivors)
    t = np.full(1024, comm.rank + 1, np.float32)
    comm.all_reduce(t)
    recovery = time.perf_counter() - start
    n = len(survivors)
    if not np.all(t == n * (n + 1) / 2):
        raise AssertionError("wrong result after reconfigure")
    return {"detect_ms": (detected_at - death) * 1e3, "recover_ms": recovery * 1e3}
