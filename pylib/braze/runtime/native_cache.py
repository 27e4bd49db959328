"""C++ source to a loaded shared library, cached on disk by content hash.

Layout: `<cache>/<key[:2]>/<key>/` holds `source.cpp` (kept for inspection),
`lib.so` and `lib.so.sha256`. The key hashes the source, the compiler and
its version, the flags and the host's CPU features (flags include
-march=native). An entry whose library does not match its recorded hash, or
does not load, is corrupt and is rebuilt. Writers hold a per-entry lock and
publish with atomic renames, so several processes compiling one source at
once leave one valid library and only one of them runs the compiler.

The cache directory is `$BRAZE_CACHE_DIR`, else `$XDG_CACHE_HOME/braze`,
else `~/.cache/braze`.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from braze.errors import BrazeError

FORMAT_VERSION = "1"
DEFAULT_FLAGS = ("-O3", "-march=native", "-fopenmp", "-std=c++17", "-shared", "-fPIC")


def cache_dir() -> Path:
    if os.environ.get("BRAZE_CACHE_DIR"):
        return Path(os.environ["BRAZE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "braze"


def compiler() -> str:
    """The C++ compiler: $CXX, else c++ on PATH."""
    command = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not command:
        raise BrazeError("no C++ compiler found: install g++ or set CXX")
    return command


@functools.lru_cache(maxsize=None)
def _identity(compiler_command: str) -> str:
    """What the generated code depends on besides its text."""
    version = subprocess.run(shlex.split(compiler_command) + ["--version"],
                             capture_output=True, text=True).stdout.splitlines()[:1]
    cpu = ""
    try:
        cpu = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("flags"))
    except (OSError, StopIteration):
        pass
    return "\n".join([FORMAT_VERSION, compiler_command, *version, cpu])


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class NativeCache:
    """Compiles and loads shared libraries; counts compiler runs (for tests
    and for reporting cold versus warm compiles)."""

    def __init__(self, directory: Path | None = None, flags=DEFAULT_FLAGS):
        self.directory = Path(directory) if directory else cache_dir()
        self.flags = tuple(flags)
        self.compilations = 0

    def key(self, source: str) -> str:
        digest = hashlib.sha256()
        for part in (_identity(compiler()), " ".join(self.flags), source):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()

    def entry(self, source: str) -> Path:
        key = self.key(source)
        return self.directory / key[:2] / key

    def load(self, source: str) -> ctypes.CDLL:
        """The library built from `source`, compiling it at most once."""
        entry = self.entry(source)
        library = self._load_valid(entry)
        if library is not None:
            return library
        entry.mkdir(parents=True, exist_ok=True)
        with open(entry / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # Another process may have built it while this one waited.
            library = self._load_valid(entry)
            if library is None:
                self._build(entry, source)
                library = self._load_valid(entry)
        if library is None:
            raise BrazeError(f"the library built in {entry} does not load")
        return library

    @staticmethod
    def _load_valid(entry: Path) -> ctypes.CDLL | None:
        library, recorded = entry / "lib.so", entry / "lib.so.sha256"
        if not (library.exists() and recorded.exists()):
            return None
        if _sha256(library) != recorded.read_text().strip():
            return None  # corrupt or half-written: rebuild
        try:
            return ctypes.CDLL(str(library))
        except OSError:
            return None

    def _build(self, entry: Path, source: str) -> None:
        source_path = entry / "source.cpp"
        _write_atomically(source_path, source.encode())
        with tempfile.TemporaryDirectory(dir=entry, prefix="build-") as scratch:
            output = Path(scratch) / "lib.so"
            command = shlex.split(compiler()) + [*self.flags, str(source_path), "-o", str(output)]
            self.compilations += 1
            run = subprocess.run(command, capture_output=True, text=True)
            if run.returncode != 0:
                raise BrazeError(
                    f"the C++ compiler failed (exit {run.returncode}) on {source_path}; the "
                    f"source is kept there.\n$ {shlex.join(command)}\n{run.stderr.strip()}")
            checksum = _sha256(output)
            os.replace(output, entry / "lib.so")
        _write_atomically(entry / "lib.so.sha256", checksum.encode())


def _write_atomically(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temporary, path)
