"""Functions the spawned ranks of test_security and test_hostile run."""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
from collections import Counter

import numpy as np

import rogue


def mismatched_secrets(comm, rank, world, path):
    """Rank 1 rendezvouses with another secret; returns each rank's error."""
    import braze.comm as bc

    store = bc.FileStore(path, secret=b"another secret" if rank == 1 else None)
    try:
        bc.new_comm("tcp", rank, world, store, timeout=3.0, group="fs").close()
    except bc.CommError as exc:
        return type(exc).__name__, str(exc)
    return None


def _listening_addresses_of_this_process():
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    addresses = []
    with open("/proc/self/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # LISTEN
                ip = socket.inet_ntoa(struct.pack("<I", int(local.split(":")[0], 16)))
                addresses.append(ip)
    return addresses


def listening_addresses(comm, rank, world):
    """The addresses this rank listens on while it serves a window."""
    win = comm.new_window(np.zeros(4, np.float32))
    addresses = _listening_addresses_of_this_process()
    comm.barrier()
    win.close()
    return addresses


def _attack_when_published(store_port, key, secret, rng, make_frame, n_frames, out, frames_per_connection):
    """Waits for a rank to publish `key` ("host:port" or "host port ...")
    and attacks that port; the counts are added to `out`."""
    import braze.comm as bc

    # Its own store connection: a waiting GET holds the connection's lock.
    record = bc.TCPStore("127.0.0.1", store_port, False).get(key, 30.0).decode()
    port = int(record.replace(":", " ").split()[1])
    out.update(rogue.attack(port, secret, rng, make_frame, n_frames, max_frames_per_connection=frames_per_connection))


def rogue_against_ranks(comm, rank, world, n_frames, seed):
    """Rank 1 floods rank 0's window service with hostile frames while both
    use the window and run collectives, then floods rank 0's transport port
    while the group reconfigures. Rank 0 reports what it saw."""
    secret = os.environ["BRAZE_COMM_SECRET"].encode()
    rng = random.Random(seed)
    window = np.zeros(64, np.float32)
    win = comm.new_window(window)
    counts = Counter()
    attacker = None
    if rank == 1:
        frames = lambda r: rogue.window_frame(r, window.nbytes, world)  # noqa: E731
        attacker = threading.Thread(target=_attack_when_published,
                                    args=(comm.store.port, "braze/win/0/0", secret, rng, frames, n_frames, counts, 1))
        attacker.start()
    wrong = []
    for i in range(40):
        if rank == 1:
            win.put(0, np.full(8, i, np.float32), 8 * (i % 8))
            if not np.array_equal(win.get(0, 8 * (i % 8), 8), np.full(8, i, np.float32)):
                wrong.append(f"window get {i}")
        t = np.full(100, rank + i, np.float32)
        comm.all_reduce(t)
        if not np.all(t == 2 * i + 1):
            wrong.append(f"all_reduce {i}")
    if attacker:
        attacker.join()
    comm.barrier()
    if rank == 0:
        want = np.concatenate([np.full(8, max(i for i in range(40) if i % 8 == k), np.float32) for k in range(8)])
        if not np.array_equal(window, want):
            wrong.append("window memory changed by a refused request")
    win.close()
    # The transport's rendezvous port: strangers and bad hellos while the
    # real rank 1 connects.
    if rank == 1:
        bad_hello = lambda r: struct.pack("<i", r.choice((-1, 0, world, 2**31 - 1)))  # noqa: E731
        attacker = threading.Thread(target=_attack_when_published,
                                    args=(comm.store.port, "braze/hostile/tcp/0", secret, rng, bad_hello, 60, counts, 1))
        attacker.start()
    comm.reconfigure("hostile", list(range(world)))
    t = np.full(10, rank + 1, np.float32)
    comm.all_reduce(t)
    if not np.all(t == 3):
        wrong.append("all_reduce after reconfigure")
    if attacker:
        attacker.join()
    return {"wrong": wrong, "counts": dict(counts)}
