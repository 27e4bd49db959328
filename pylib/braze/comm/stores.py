"""Rendezvous stores: `TCPStore(host, port, is_server)` and `FileStore(path)`.

A store carries the job secret: the store's own connections and those of the
transports and windows that rendezvous through it authenticate with it
(docs/comm.md, "Security")."""

from __future__ import annotations

import os

from braze.runtime import _comm

SECRET_ENV = "BRAZE_COMM_SECRET"


def job_secret(secret: str | bytes | None = None) -> bytes:
    """`secret` if given, else $BRAZE_COMM_SECRET, else empty (no secret:
    anyone who can reach the ports can join; fine on loopback only)."""
    if secret is None:
        secret = os.environ.get(SECRET_ENV, "")
    return secret.encode() if isinstance(secret, str) else bytes(secret)


def rejected_connections() -> int:
    """Connections this process refused so far: failed authentication or
    malformed input (each is also logged to stderr with the peer's address)."""
    return _comm.rejected_connections()


class Store:
    """A key-value store shared by the ranks of a group. Timeouts in seconds."""

    native: _comm.NativeStore

    def set(self, key: str, value: bytes | str) -> None:
        self.native.set(key, value.encode() if isinstance(value, str) else bytes(value))

    def get(self, key: str, timeout: float = 30.0) -> bytes:
        """Waits until `key` exists; raises CommTimeout after `timeout`."""
        return self.native.get(key, float(timeout))

    def add(self, key: str, delta: int = 1) -> int:
        return self.native.add(key, int(delta))


class TCPStore(Store):
    """The process with `is_server=True` serves the store (port 0 picks a free
    port, see `.port`); every process, the server's included, is a client."""

    def __init__(self, host: str, port: int, is_server: bool, timeout: float = 30.0, *,
                 secret: str | bytes | None = None):
        self.host = host
        self.native = _comm.NativeStore.tcp(host, int(port), bool(is_server), float(timeout), job_secret(secret))
        self.port = self.native.port
        self.is_server = is_server


class FileStore(Store):
    """A directory on a file system every rank sees (one file per key)."""

    def __init__(self, path: str, timeout: float = 30.0, *, secret: str | bytes | None = None):
        self.path = str(path)
        self.native = _comm.NativeStore.file(self.path, float(timeout), job_secret(secret))
