"""Block sizes and warps for the Triton target's kernels.

`config_space(spec)` is a small set of launch configurations (XBLOCK,
RBLOCK, num_warps, num_stages) around the kernel's schedule (the threads per
block `braze-gpu-schedule` chose and the kernel's strategy); its first
member is the schedule's own choice. A tiled kernel's (`TileConfig`) are
tiles: a fused GEMM's (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
and its unfused alternative, torch's GEMM then the epilogue as a kernel,
so that on a GPU the faster of fused and unfused runs (as Inductor
decides); a flash attention's query rows and keys per block, from its
schedule's (`q_block`, `kv_block`) first. Tiles never exceed what a static
extent needs.

`Tuner.choose` picks one per kernel and shape class (each dynamic extent
rounded up to a power of two):

* on a GPU it times every configuration the first time a shape class is
  seen (`triton.testing.do_bench`) and keeps the fastest in a small JSON file
  under the cache directory, keyed by the kernel's source, the shape class
  and the device's name; later compiles and processes read it back. A
  corrupt entry is timed again; configurations that fail are skipped, and
  when all fail the error lists each with its message.
* in Triton's interpreter (no GPU, nothing to time) it takes the
  configuration with the largest blocks, which runs the fewest programs
  (a fused GEMM's tiled product: the kernel under test).

In a distributed job every rank must launch the same configuration:
`share_timings(comm)` (a `braze.comm` communicator) makes every tuner
all-reduce its timings (the slowest rank's time per configuration; a
configuration that fails anywhere fails everywhere) before choosing, so all
ranks choose alike. Attached to a terminal, tuning prints its progress.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from braze.codegen.analysis import KernelSpec
from braze.errors import BrazeError

CACHE_FOLDER = "triton-tune"
# The strategies of the tiled kernels (codegen/triton/gemm.py, attention.py).
TILED = ("gemm", "attention")
_shared_with = None  # the communicator tuners share their timings through


def share_timings(comm) -> None:
    """Makes every tuner of this process agree with the other ranks of
    `comm` (None: tune alone)."""
    global _shared_with
    _shared_with = comm


@dataclass(frozen=True)
class Config:
    xblock: int
    rblock: int | None  # looped reductions only (a persistent kernel fixes its own)
    num_warps: int
    num_stages: int

    def launch_options(self, spec: KernelSpec) -> dict:
        # No FMA contraction: each op rounds as the IR says (as on every target).
        options = {"XBLOCK": self.xblock, "num_warps": self.num_warps, "num_stages": self.num_stages,
                   "enable_fp_fusion": False}
        if spec.strategy == "looped":
            options["RBLOCK"] = self.rblock
        return options

    def __str__(self) -> str:
        blocks = f"XBLOCK={self.xblock}" + (f" RBLOCK={self.rblock}" if self.rblock else "")
        return f"{blocks} num_warps={self.num_warps} num_stages={self.num_stages}"


@dataclass(frozen=True)
class TileConfig:
    """A tiled kernel's launch configuration: a fused GEMM's BLOCK_M x
    BLOCK_N tile accumulated over BLOCK_K, or a flash attention's BLOCK_M
    query rows by BLOCK_N keys (`block_k` None). `unfused`: the fused GEMM
    run the other way, torch's GEMM (the vendor library) then the epilogue
    as a kernel over its product in tiles of BLOCK_M x BLOCK_N
    (codegen/triton/gemm.py)."""

    block_m: int
    block_n: int
    block_k: int | None
    num_warps: int
    num_stages: int
    unfused: bool = False

    def launch_options(self, spec: KernelSpec) -> dict:
        options = {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "num_warps": self.num_warps,
                   "num_stages": self.num_stages, "enable_fp_fusion": False}
        if spec.strategy == "gemm":
            options.update(BLOCK_K=self.block_k, PRODUCT_GIVEN=self.unfused)
        return options

    @property
    def points(self) -> int:
        """The points one program computes at a time."""
        return self.block_m * self.block_n * (self.block_k or 1)

    def __str__(self) -> str:
        if self.unfused:
            return (f"unfused: torch's GEMM, then the epilogue in BLOCK_M={self.block_m} BLOCK_N={self.block_n} "
                    f"num_warps={self.num_warps}")
        blocks = f"BLOCK_M={self.block_m} BLOCK_N={self.block_n}" + (f" BLOCK_K={self.block_k}" if self.block_k else "")
        return f"{blocks} num_warps={self.num_warps} num_stages={self.num_stages}"


# Fused GEMM tiles (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), after
# Inductor's and Triton's tutorial's matmul configurations: large tiles for
# large products, narrow ones for few rows (decode) or columns.
GEMM_TILES = ((128, 128, 32, 8, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 4, 4),
              (128, 128, 64, 8, 3), (64, 64, 64, 4, 3), (32, 64, 64, 4, 4), (16, 64, 128, 4, 4))
# Flash attention tiles (query rows, keys, num_warps, num_stages), after
# Triton's fused-attention tutorial.
ATTENTION_TILES = ((128, 64, 8, 3), (64, 64, 4, 3), (128, 32, 4, 3), (64, 32, 4, 2), (32, 32, 4, 2), (16, 64, 4, 2))


def _fit(block: int, extent: int | None) -> int:
    """`block` no larger than a static `extent` needs (`tl.dot`'s tiles are
    at least 16)."""
    return block if extent is None else max(16, min(block, 1 << max(0, extent - 1).bit_length()))


def _tile_space(spec: KernelSpec) -> list[TileConfig]:
    domain = spec.static_domain
    if spec.strategy == "gemm":
        m, n, k = domain[-3:]
        configs = [TileConfig(_fit(bm, m), _fit(bn, n), _fit(bk, k), w, stages) for bm, bn, bk, w, stages in GEMM_TILES]
        # The unfused alternative: the epilogue over torch's product, tiles of 64 x 64.
        configs.append(TileConfig(_fit(64, m), _fit(64, n), _fit(32, k), 4, 1, unfused=True))
        return list(dict.fromkeys(configs))
    batch = spec.input_types[0].rank - 2
    rows, keys = domain[batch], domain[batch + 2]  # L and S
    q_block, kv_block = spec.tile
    first = TileConfig(_fit(1 << max(0, q_block - 1).bit_length(), rows),
                       _fit(1 << max(0, kv_block - 1).bit_length(), keys), None, 4, 2)
    return list(dict.fromkeys([first] + [TileConfig(_fit(bm, rows), _fit(bn, keys), None, w, stages)
                                         for bm, bn, w, stages in ATTENTION_TILES]))


def _persistent_rblock(spec: KernelSpec) -> int:
    points = 1
    for d in spec.reduce:
        points *= spec.static_domain[d]
    return 1 << max(0, points - 1).bit_length()


def config_space(spec: KernelSpec) -> list:
    """The configurations to try for a kernel, the schedule's own first
    (`TileConfig`s for a fused GEMM, the unfused alternative among them, and
    a flash attention)."""
    if spec.strategy in TILED:
        return _tile_space(spec)
    warps = max(1, spec.threads // 32)
    neighbours = sorted({warps, max(1, warps // 2), min(16, warps * 2)}, key=lambda w: (w != warps, w))
    configs: list[Config] = []
    if spec.strategy == "points":
        # Four, then eight points per thread.
        for per_thread in (4, 8):
            configs += [Config(32 * w * per_thread, None, w, 1) for w in neighbours]
    elif spec.strategy == "persistent":
        rblock = _persistent_rblock(spec)
        # Rows per program: a block of about 1024, 4096 or 256 points.
        rows = list(dict.fromkeys(max(1, points // rblock) for points in (1024, 4096, 256)))
        configs += [Config(x, None, w, 1) for x in rows for w in neighbours if w <= 8]
    elif spec.strategy == "looped":
        threads = warps * 32
        for xblock, rblock in ((1, threads * 4), (1, threads * 2), (2, threads * 4)):
            configs += [Config(xblock, rblock, w, stages) for w in neighbours[:2] for stages in (2, 1)]
    else:
        raise BrazeError(f"kernel {spec.name}: no Triton launch configurations for strategy {spec.strategy!r}")
    return list(dict.fromkeys(configs))


def interpreter_choice(space: list):
    """The interpreter's configuration (no GPU, nothing to time): the one
    that runs the fewest programs, the largest blocks; a fused GEMM's tiled
    product, not the library's (the kernel under test)."""
    return max((c for c in space if not getattr(c, "unfused", False)),
               key=lambda c: c.points if isinstance(c, TileConfig) else c.xblock * (c.rblock or 1))


def shape_class(spec: KernelSpec, extents: list[int]) -> tuple[int, ...]:
    """Each dynamic extent rounded up to a power of two."""
    return tuple(1 << max(0, e - 1).bit_length() for e, size in zip(extents, spec.static_domain) if size is None)


def _device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name() if device == "cuda" else device


class Tuner:
    """Chooses launch configurations; `measure(run)` times one (in ms) on a
    GPU, `directory` keeps the winners. Counts its timing runs."""

    def __init__(self, directory: Path, measure=None, tune: bool = True, comm=None):
        self.directory = Path(directory) / CACHE_FOLDER
        self.measure = measure
        self.tune = tune
        self.comm = comm  # None: the one share_timings() set, if any
        self.benchmarks = 0
        self.chosen: dict = {}

    def key(self, spec: KernelSpec, source_hash: str, classes: tuple, device_name: str) -> str:
        digest = hashlib.sha256(json.dumps([source_hash, spec.name, list(classes), device_name]).encode())
        return digest.hexdigest()

    def entry(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def choose(self, spec: KernelSpec, source_hash: str, classes: tuple, device: str, run) -> Config:
        """The configuration for `spec` at shape class `classes`; `run(config)`
        launches the kernel once with it (on scratch results)."""
        space = config_space(spec)
        if device == "cpu" or not self.tune:
            # The interpreter: nothing to time, fewest programs; untuned: the schedule's.
            return interpreter_choice(space) if device == "cpu" else space[0]
        memo = (spec.name, source_hash, classes)
        if memo in self.chosen:
            return self.chosen[memo]
        key = self.key(spec, source_hash, classes, _device_name(device))
        config = self._read(self.entry(key), space)
        if config is None:
            config = self._benchmark(spec, space, run)
            self._write(self.entry(key), config)
        self.chosen[memo] = config
        return config

    def _read(self, path: Path, space: list) -> Config | TileConfig | None:
        try:
            config = type(space[0])(**json.loads(path.read_text())["config"])
        except (OSError, ValueError, TypeError, KeyError):
            return None  # absent or corrupt: time it again
        return config if config in space else None

    def _write(self, path: Path, config: Config) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(handle, "w") as file:
            json.dump({"config": asdict(config)}, file)
        os.replace(temporary, path)

    def _benchmark(self, spec: KernelSpec, space: list[Config], run) -> Config:
        import numpy as np

        measure = self.measure or _do_bench
        timings, errors = np.full(len(space), math.inf, dtype=np.float32), []  # a dtype every comm backend reduces
        progress = sys.stderr.isatty()
        for number, config in enumerate(space):
            if progress:
                print(f"\rbraze: tuning {spec.name} [{number + 1}/{len(space)}] {config}\033[K",
                      end="", file=sys.stderr, flush=True)
            self.benchmarks += 1
            try:
                timings[number] = measure(lambda: run(config))
            except Exception as error:  # a config the compiler or the device refuses
                message = str(error).strip().splitlines()
                errors.append(f"  {config}: {type(error).__name__}: {message[0] if message else ''}")
        if progress:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
        comm = self.comm if self.comm is not None else _shared_with
        if comm is not None:
            comm.all_reduce(timings, op="max")  # every rank chooses from the same numbers
        if not np.isfinite(timings).any():
            raise BrazeError(f"kernel {spec.name}: every Triton launch configuration failed"
                             + (" on some rank" if comm is not None and not errors else "") + ":\n"
                             + "\n".join(errors or [f"  {config}" for config in space]))
        return space[int(np.argmin(timings))]


def _do_bench(function) -> float:
    from triton.testing import do_bench

    return do_bench(function, warmup=5, rep=20)
