"""Connection authentication: the job secret, the challenge-response on
every store, transport and window connection, and where data sockets bind."""

import random
import socket

import pytest

import braze.comm as bc
import rogue
import security_workers
from group import run_group

SECRET = b"test-secret-0123456789"


def test_store_accepts_the_secret_and_refuses_everything_else():
    server = bc.TCPStore("127.0.0.1", 0, True, secret=SECRET)
    client = bc.TCPStore("127.0.0.1", server.port, False, secret=SECRET)
    client.set("k", "v")
    before = bc.rejected_connections()
    with pytest.raises(bc.CommError, match=r"TCP store at 127\.0\.0\.1:\d+: authenticating"):
        bc.TCPStore("127.0.0.1", server.port, False, secret=b"wrong", timeout=5.0)
    with pytest.raises(bc.CommError, match="authenticating"):
        bc.TCPStore("127.0.0.1", server.port, False, secret=b"", timeout=5.0)
    assert bc.rejected_connections() >= before + 2
    assert server.get("k") == b"v" and client.add("n", 1) == 1  # the server kept serving


def test_handshake_matches_an_independent_hmac_sha256():
    """Python's hmac module answers the C++ server's challenge: the two
    HMAC-SHA256 implementations agree, and a wrong key is refused."""
    server = bc.TCPStore("127.0.0.1", 0, True, secret=SECRET)
    rng = random.Random(0)
    with rogue.connect(server.port) as sock:
        assert rogue.handshake(sock, SECRET, rng)
    with rogue.connect(server.port) as sock:
        assert not rogue.handshake(sock, SECRET + b"x", rng)


def test_no_byte_is_read_before_the_handshake():
    """A request sent in place of the handshake answer is refused, not served."""
    server = bc.TCPStore("127.0.0.1", 0, True, secret=SECRET)
    with rogue.connect(server.port) as sock:
        rogue.recv_exact(sock, len(rogue.TAG) + rogue.NONCE)
        sock.sendall(rogue.STORE_HEADER.pack(0, 1, 1, 0) + b"k" + b"v" + bytes(64))
        assert rogue.hung_up(sock)  # no reply
    with pytest.raises(bc.CommTimeout):
        server.get("k", timeout=0.2)


def test_silent_stranger_does_not_block_the_store():
    server = bc.TCPStore("127.0.0.1", 0, True, secret=SECRET)
    with socket.create_connection(("127.0.0.1", server.port)):  # connects, never answers
        client = bc.TCPStore("127.0.0.1", server.port, False, secret=SECRET)
        client.set("a", "1")
        assert server.get("a", timeout=2.0) == b"1"


def test_transport_refuses_a_rank_with_another_secret(tmp_path):
    """Rank 1 rendezvouses (through a file store, no socket) with another
    secret: its connection to rank 0 fails the handshake. Both fail cleanly,
    and rank 0 at once: rank 1 reports that it gave up on the setup."""
    results = run_group(security_workers.mismatched_secrets, 2, "shm", args=(str(tmp_path / "fs"),))
    kind, message = results[1]
    assert "authenticating to rank 0 at 127.0.0.1:" in message, results
    kind, message = results[0]
    assert kind == "CommRankFailed" and "rank 1 gave up on the group's setup (authenticating" in message, results


def test_data_sockets_listen_on_the_rendezvous_interface():
    results = run_group(security_workers.listening_addresses, 2, "tcp")
    for addresses in results.values():
        assert addresses and all(a.startswith("127.") for a in addresses), addresses


def test_secret_from_the_environment(monkeypatch):
    monkeypatch.setenv("BRAZE_COMM_SECRET", SECRET.decode())
    server = bc.TCPStore("127.0.0.1", 0, True)
    bc.TCPStore("127.0.0.1", server.port, False, secret=SECRET).set("x", "1")
    with pytest.raises(bc.CommError, match="authenticating"):
        bc.TCPStore("127.0.0.1", server.port, False, secret=b"", timeout=5.0)
