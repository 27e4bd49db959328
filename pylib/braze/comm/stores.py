"""Rendezvous stores: `TCPStore(host, port, is_server)` and `FileStore(path)`."""

from __future__ import annotations

from braze.runtime import _comm


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

    def __init__(self, host: str, port: int, is_server: bool, timeout: float = 30.0):
        self.host = host
        self.native = _comm.NativeStore.tcp(host, int(port), bool(is_server), float(timeout))
        self.port = self.native.port
        self.is_server = is_server


class FileStore(Store):
    """A directory on a file system every rank sees (one file per key)."""

    def __init__(self, path: str, timeout: float = 30.0):
        self.path = str(path)
        self.native = _comm.NativeStore.file(self.path, float(timeout))
