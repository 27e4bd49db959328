"""Rendezvous stores: values, counters, timeouts, and a group over a FileStore."""

import time

import numpy as np
import pytest

import braze.comm as bc
from braze.comm.launch import spawn_group


def test_tcp_store_set_get_add_and_timeout():
    server = bc.TCPStore("127.0.0.1", 0, True)
    client = bc.TCPStore("127.0.0.1", server.port, False)
    client.set("k", b"v\x00w")
    assert server.get("k") == b"v\x00w"
    assert client.add("n", 2) == 2 and server.add("n", 3) == 5
    start = time.monotonic()
    with pytest.raises(bc.CommTimeout, match="'absent'"):
        client.get("absent", timeout=0.3)
    assert time.monotonic() - start < 2.0
    client.set("after", "still in step")  # a timed-out wait leaves the stream usable
    assert client.get("after") == b"still in step"


def test_tcp_store_connect_timeout():
    with pytest.raises(bc.CommTimeout):
        bc.TCPStore("127.0.0.1", 1, False, timeout=0.3)  # nothing listens on port 1


def test_file_store(tmp_path):
    a, b = bc.FileStore(tmp_path / "s"), bc.FileStore(tmp_path / "s")
    a.set("x/y", "1")
    assert b.get("x/y") == b"1"
    assert a.add("c", 1) == 1 and b.add("c", 1) == 2
    with pytest.raises(bc.CommTimeout):
        b.get("missing", timeout=0.2)


def _sum_over_file_store(comm, rank, world, path):
    store = bc.FileStore(path)
    inner = bc.new_comm("tcp", rank, world, store, timeout=10.0, group="fs")
    t = np.full(11, rank + 1, np.int64)
    inner.all_reduce(t)
    inner.close()
    return t.tolist()


def test_group_over_file_store(tmp_path):
    results = spawn_group(_sum_over_file_store, 3, "shm", args=(str(tmp_path / "fs"),))
    assert all(v == [6] * 11 for v in results.values())


def test_unknown_backend_and_bad_rank():
    store = bc.TCPStore("127.0.0.1", 0, True)
    with pytest.raises(bc.CommInvalidArgument, match="registered"):
        bc.new_comm("nope", 0, 1, store)
    with pytest.raises(bc.CommInvalidArgument, match="out of range"):
        bc.new_comm("shm", 3, 2, store)
    assert {"shm", "tcp", "gloo", "mpi"} <= set(bc.available_backends())


def test_add_on_a_non_counter_is_an_error(tmp_path):
    server = bc.TCPStore("127.0.0.1", 0, True)
    server.set("word", "abc")
    with pytest.raises(bc.CommInvalidArgument, match="counter"):
        server.add("word", 1)
    assert server.add("n", 4) == 4  # the server survived
    fs = bc.FileStore(tmp_path / "s")
    fs.set("word", "abc")
    with pytest.raises(bc.CommInvalidArgument, match="counter"):
        fs.add("word", 1)
