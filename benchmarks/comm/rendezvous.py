"""Communicator creation time (rendezvous through the TCP store, transport
setup, every connection's authentication handshake):

    python benchmarks/comm/rendezvous.py [--repeats 20]

Each rank creates and closes `repeats` communicators under fresh group
names; prints the median creation time of the slowest rank per backend and
world size, and the median time to open one TCP store client (one
connection: what a rank pays per peer it connects to). Runs unchanged against a braze without authentication, which is
how the handshake's cost is measured (the same script, two builds)."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def create_many(comm, rank, world, backend, repeats):
    import braze.comm as bc

    times = []
    for k in range(repeats):
        comm.barrier()
        start = time.perf_counter()
        inner = bc.new_comm(backend, rank, world, comm.store, timeout=30.0, group=f"rv-{backend}-{k}")
        inner.barrier()  # every rank has its connections
        elapsed = np.array([time.perf_counter() - start], np.float32)
        inner.close()
        comm.all_reduce(elapsed, op="max")  # the slowest rank's time
        times.append(float(elapsed[0]))
    return sorted(times)[len(times) // 2] * 1e3


def store_connect_us(repeats=500):
    """Median time to open a TCP store client (connect and, where the build
    has it, the authentication handshake) to a server in this process."""
    import braze.comm as bc

    server = bc.TCPStore("127.0.0.1", 0, True)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        client = bc.TCPStore("127.0.0.1", server.port, False)
        times.append(time.perf_counter() - start)
        del client
    return sorted(times)[len(times) // 2] * 1e6


def main():
    from braze.comm.launch import spawn_group

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    out = {"store_connect_us": round(store_connect_us(), 1)}
    print(f"store client connect: median {out['store_connect_us']} us", flush=True)
    for backend in ("shm", "tcp"):
        for world in (2, 4):
            ms = spawn_group(create_many, world, "shm", args=(backend, args.repeats), deadline=600)[0]
            out[f"{backend}/{world}"] = round(ms, 2)
            print(f"{backend} x{world}: median creation {ms:.2f} ms", flush=True)
    print("RENDEZVOUS-JSON " + json.dumps(out))


if __name__ == "__main__":
    main()
