"""A hostile peer for the tests: speaks braze.comm's connection handshake
(cxx/runtime/comm/auth.h) with the right secret, a wrong one or none, then
sends random or mutated frames. Loopback only."""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct
from collections import Counter

TAG = b"brzauth1"
NONCE = 32

# TCP store request: cmd u8 | key_len u32 | value_len u64 | timeout_ms u64 | key | value
STORE_HEADER = struct.Struct("<BIQQ")
# Window request: type u8 | (pad) | from i32 | offset u64 | nbytes u64
WINDOW_REQUEST = struct.Struct("<B3xiQQ")
EXTREMES = (0, 1, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1)


def connect(port: int, timeout: float = 5.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def hung_up(sock: socket.socket) -> bool:
    """True when the other end closed without sending anything more."""
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:  # it closed with our bytes unread
        return True


def mac(secret: bytes, role: bytes, nonce_a: bytes, nonce_c: bytes) -> bytes:
    return hmac.new(secret, role + nonce_a + nonce_c, hashlib.sha256).digest()


def handshake(sock: socket.socket, secret: bytes, rng) -> bool:
    """Answers the server's challenge; True when the server proved it holds
    `secret` too (so it accepted ours), False when it hung up on us."""
    challenge = recv_exact(sock, len(TAG) + NONCE)
    assert challenge[:len(TAG)] == TAG, challenge
    nonce_a, nonce_c = challenge[len(TAG):], rng.randbytes(NONCE)
    sock.sendall(nonce_c + mac(secret, b"connect", nonce_a, nonce_c))
    try:
        proof = recv_exact(sock, 32)
    except (ConnectionError, OSError):
        return False
    return hmac.compare_digest(proof, mac(secret, b"accept", nonce_a, nonce_c))


def store_frame(rng) -> bytes:
    """A store request with random fields, some extreme, maybe truncated."""
    cmd = rng.choice((0, 1, 2, rng.randrange(256)))
    key = rng.randbytes(rng.randrange(0, 40))
    value = rng.randbytes(rng.choice((0, 8, rng.randrange(0, 100))))
    key_len = rng.choice((len(key), len(key), rng.choice(EXTREMES) & 0xFFFFFFFF))
    value_len = rng.choice((len(value), len(value), rng.choice(EXTREMES)))
    frame = STORE_HEADER.pack(cmd, key_len, value_len, rng.choice(EXTREMES)) + key + value
    return frame[:rng.randrange(len(frame) + 1)] if rng.random() < 0.2 else frame


def window_frame(rng, window_bytes: int, world: int) -> bytes:
    """A window request the service must refuse: past the end, an unknown
    type, a sender out of range, or truncated. None may write memory."""
    kind = rng.randrange(4)
    if kind == 0:  # a put or get past the end
        offset = rng.choice((window_bytes, window_bytes + 1, 2**63, 2**64 - 1))
        frame = WINDOW_REQUEST.pack(rng.choice((0, 1)), 0, offset, rng.choice((1, 2**64 - 1)))
    elif kind == 1:
        frame = WINDOW_REQUEST.pack(rng.randrange(3, 256), 0, 0, 4)
    elif kind == 2:
        frame = WINDOW_REQUEST.pack(2, rng.choice((-1, world, 2**31 - 1)), 0, 0)
    else:
        frame = WINDOW_REQUEST.pack(0, 0, 0, 8)[:rng.randrange(WINDOW_REQUEST.size)]
    return frame


def attack(port: int, secret: bytes, rng, make_frame, n_frames: int, *, max_frames_per_connection: int = 7,
           timeout: float = 5.0) -> Counter:
    """Sends `n_frames` hostile frames to the service on `port` over fresh
    connections of four kinds: raw bytes with no handshake, a wrong secret,
    a hang-up right after connecting, and the right secret followed by up to
    `max_frames_per_connection` frames from `make_frame(rng)` (1 where a
    truncated frame followed by another could spell a valid request). Stops early when the port closes (a rendezvous
    port lives only until the real peers have connected). Returns connection
    counts per kind, plus "frames" and "wrong_secret_accepted" (a security
    failure if non-zero)."""
    counts = Counter()
    while counts["frames"] < n_frames:
        kind = rng.choice(("raw", "wrong_secret", "hang_up", "mutated"))
        try:
            sock = connect(port, timeout)
        except ConnectionRefusedError:
            counts["port_closed"] += 1
            break
        counts[kind] += 1
        with sock:
            try:
                if kind == "raw":
                    sock.sendall(rng.randbytes(rng.randrange(1, 200)))
                    counts["frames"] += 1
                elif kind == "wrong_secret":
                    counts["wrong_secret_accepted"] += handshake(sock, secret + b"-not-it", rng)
                    counts["frames"] += 1
                elif kind == "hang_up":
                    counts["frames"] += 1
                elif handshake(sock, secret, rng):
                    for _ in range(rng.randrange(1, max_frames_per_connection + 1)):
                        sock.sendall(make_frame(rng))
                        counts["frames"] += 1
            except OSError:
                counts["reset_by_server"] += 1  # it hung up on a bad frame: expected
    return counts
