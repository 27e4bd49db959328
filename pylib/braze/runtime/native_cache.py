"""Kernel source to a loaded binary, cached on disk by content hash, for
every compiler (a `Toolchain`: the host C++ compiler by default; nvcc,
NVRTC, hipcc and OpenCL builds are toolchains too, see `braze.target`).

Layout: `<cache>/<key[:2]>/<key>/` holds the source (`source.cpp` for C++,
kept for inspection), the artifact (`lib.so`) and its `.sha256`. The key
hashes the source, the toolchain's identity (for C++: the compiler and its
version, the flags and the host's CPU features, flags including
-march=native) and a salt (the target's options). An entry whose library does not match its recorded hash, or
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


def first_accepted(spellings: tuple[str, ...]) -> tuple[str, ...]:
    """The first of `spellings` (one flag, spelled as successive compiler
    versions take it) that the C++ compiler accepts, as a 0- or 1-tuple."""
    return _first_accepted(spellings, compiler())


@functools.lru_cache(maxsize=None)
def _first_accepted(spellings: tuple[str, ...], compiler_command: str) -> tuple[str, ...]:
    for flag in spellings:
        probe = subprocess.run([*shlex.split(compiler_command), flag, "-x", "c++", "-fsyntax-only", "-"],
                               input="", capture_output=True, text=True)
        if probe.returncode == 0:
            return (flag,)
    return ()


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


class Toolchain:
    """One compiler as the cache sees it: what identifies it (enters the
    key), the file names of an entry, how to build and how to load. The
    default is the host C++ compiler building a shared library."""

    title = "the C++ compiler"
    source_name = "source.cpp"
    artifact_name = "lib.so"

    def __init__(self, flags=DEFAULT_FLAGS):
        self.flags = tuple(flags)

    def identity(self) -> str:
        return _identity(compiler()) + "\n" + " ".join(self.flags)

    def command(self, source: Path, output: Path) -> list[str]:
        return shlex.split(compiler()) + [*self.flags, str(source), "-o", str(output)]

    def run(self, source: Path, output: Path, entry: Path) -> None:
        """Builds `output` from `source`; a failure is a BrazeError with the
        compiler's message and the kept source's path."""
        command = self.command(source, output)
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            raise BrazeError(
                f"{self.title} failed (exit {run.returncode}) on {source}; the "
                f"source is kept there.\n$ {shlex.join(command)}\n{(run.stderr or run.stdout).strip()}")
        if run.stderr.strip():
            (entry / "build.log").write_text(run.stderr)

    def load(self, path: Path):
        """The loaded artifact, or None when it does not load."""
        try:
            return ctypes.CDLL(str(path))
        except OSError:
            return None


class PreludeToolchain(Toolchain):
    """The host C++ compiler with `prelude`, the text every generated source
    begins with (the kernels' helpers and the standard headers they
    include), precompiled once per cache directory, compiler and flags: a
    source that begins with it is built from the rest, with the prelude
    included from its precompiled form (g++ reads `prelude.h.gch` beside
    `prelude.h`; a compiler that cannot use it parses the text). Parsing the
    prelude was most of a small kernel's build (0.14 s of which 0.09 s). A
    build that fails this way is run again the plain way, so that the
    compiler's messages name the kept source's lines; a compiler that fails
    to precompile the prelude builds every source plainly, asked once."""

    def __init__(self, flags, prelude: str, directory: Path):
        super().__init__(flags)
        self.prelude = prelude
        self.directory = Path(directory)

    def run(self, source: Path, output: Path, entry: Path) -> None:
        text = source.read_text()
        header = self._header() if text.startswith(self.prelude) else None
        if header is not None:
            rest = output.with_name("rest.cpp")
            rest.write_text(text[len(self.prelude):])
            command = shlex.split(compiler()) + [*self.flags, "-include", str(header), str(rest), "-o", str(output)]
            if subprocess.run(command, capture_output=True).returncode == 0:
                return
        super().run(source, output, entry)

    def _header(self) -> Path | None:
        """The prelude's header, its precompiled form beside it; None when
        the compiler does not precompile it."""
        flags = [flag for flag in self.flags if flag != "-shared"]
        compiled = built_once(self.directory / "prelude", self.identity(), "prelude.h", self.prelude, "prelude.h.gch",
                              lambda header, output: shlex.split(compiler()) + [
                                  *flags, "-x", "c++-header", str(header), "-o", str(output)])
        return compiled.with_name("prelude.h") if compiled else None


def built_once(root: Path, identity: str, source_name: str, text: str, product_name: str, command) -> Path | None:
    """`product_name` built from `text` (written as `source_name`) by the
    compiler command `command(source, output)`, once per `identity` (the
    compiler and flags) and text: in a folder of `root` named by their hash,
    other processes waiting on its lock. None when the compiler fails, which
    is then not asked again (a `refused` file keeps its message)."""
    folder = root / hashlib.sha256(f"{identity}\0{text}".encode()).hexdigest()[:32]
    product, refused = folder / product_name, folder / "refused"
    if product.exists() or refused.exists():
        return product if product.exists() else None
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if product.exists() or refused.exists():  # another process decided while this one waited
            return product if product.exists() else None
        source = folder / source_name
        _write_atomically(source, text.encode())
        with tempfile.TemporaryDirectory(dir=folder, prefix="build-") as scratch:
            partial = Path(scratch) / product_name
            run = subprocess.run(command(source, partial), capture_output=True, text=True)
            if run.returncode != 0:
                _write_atomically(refused, (run.stderr or run.stdout).encode())
                return None
            os.replace(partial, product)
    return product


class NativeCache:
    """Builds and loads artifacts through one toolchain (by default C++ to a
    shared library); counts compiler runs (for tests and for reporting cold
    versus warm compiles). `salt` (e.g. a target's options) enters the key."""

    def __init__(self, directory: Path | None = None, flags=DEFAULT_FLAGS, toolchain: Toolchain | None = None,
                 salt: str = ""):
        self.directory = Path(directory) if directory else cache_dir()
        self.toolchain = toolchain or Toolchain(flags)
        self.flags = self.toolchain.flags
        self.salt = salt
        self.compilations = 0

    def key(self, source: str) -> str:
        digest = hashlib.sha256()
        for part in (self.toolchain.identity(), self.salt, source):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()

    def entry(self, source: str) -> Path:
        key = self.key(source)
        return self.directory / key[:2] / key

    def source_path(self, source: str) -> Path:
        return self.entry(source) / self.toolchain.source_name

    def load(self, source: str):
        """The artifact built from `source`, compiling it at most once."""
        entry = self.entry(source)
        artifact = self._load_valid(entry)
        if artifact is not None:
            return artifact
        entry.mkdir(parents=True, exist_ok=True)
        with open(entry / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # Another process may have built it while this one waited.
            artifact = self._load_valid(entry)
            if artifact is None:
                self._build(entry, source)
                artifact = self._load_valid(entry)
        if artifact is None:
            raise BrazeError(f"the {self.toolchain.artifact_name} built in {entry} does not load")
        return artifact

    def _load_valid(self, entry: Path):
        artifact = entry / self.toolchain.artifact_name
        recorded = entry / (self.toolchain.artifact_name + ".sha256")
        if not (artifact.exists() and recorded.exists()):
            return None
        if _sha256(artifact) != recorded.read_text().strip():
            return None  # corrupt or half-written: rebuild
        return self.toolchain.load(artifact)

    def _build(self, entry: Path, source: str) -> None:
        source_path = entry / self.toolchain.source_name
        _write_atomically(source_path, source.encode())
        name = self.toolchain.artifact_name
        with tempfile.TemporaryDirectory(dir=entry, prefix="build-") as scratch:
            output = Path(scratch) / name
            self.compilations += 1
            self.toolchain.run(source_path, output, entry)
            checksum = _sha256(output)
            os.replace(output, entry / name)
        _write_atomically(entry / (name + ".sha256"), checksum.encode())


def _write_atomically(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temporary, path)
