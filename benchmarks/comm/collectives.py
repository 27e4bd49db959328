"""nccl-tests-style timing of one communicator: algorithm and bus bandwidth
and latency of all_reduce, all_gather and reduce_scatter over a size sweep."""

from __future__ import annotations

import time

import numpy as np

OPS = ("all_reduce", "all_gather", "reduce_scatter")
SIZES = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def bus_factor(op, world):
    """nccl-tests' factors from algorithm bandwidth to bus bandwidth."""
    return 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world


def iterations(nbytes):
    return max(5, min(2000, int(2e8 // max(nbytes, 1))))


def _buffers(op, nbytes, world):
    n = nbytes // 4
    if op == "all_reduce":
        return (np.ones(n, np.float32),)
    if op == "all_gather":  # nbytes is the gathered (output) size, as in nccl-tests
        return np.empty(n, np.float32), np.ones(n // world, np.float32)
    return np.empty(n // world, np.float32), np.ones(n, np.float32)  # reduce_scatter input is nbytes


def _call(comm, op, bufs):
    if op == "all_reduce":
        comm.all_reduce(bufs[0])
    elif op == "all_gather":
        comm.all_gather(*bufs)
    else:
        comm.reduce_scatter(*bufs)


def measure(comm, rank, world, sizes=SIZES, ops=OPS):
    """Rows (op, bytes, time_us, algbw_GBps, busbw_GBps) on rank 0; slowest rank's time."""
    rows = []
    for op in ops:
        for nbytes in sizes:
            bufs = _buffers(op, nbytes, world)
            for _ in range(3):
                _call(comm, op, bufs)
            iters = iterations(nbytes)
            comm.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                _call(comm, op, bufs)
            elapsed = np.array([(time.perf_counter() - start) / iters], np.float32)
            comm.all_reduce(elapsed, op="max")
            t = float(elapsed[0])
            algbw = nbytes / t / 1e9
            rows.append({"op": op, "bytes": nbytes, "time_us": t * 1e6, "algbw": algbw,
                         "busbw": algbw * bus_factor(op, world)})
    return rows
