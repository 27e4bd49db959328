"""braze's caching allocator (cxx/runtime/memory) through braze.memory."""

import bisect
import ctypes
import gc
import json
import random
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import torch

import braze.memory as memory
from braze.errors import BrazeError

ROOT = Path(__file__).resolve().parents[3]
_LIBC = ctypes.CDLL(None)
_LIBC.aligned_alloc.restype = ctypes.c_void_p
_LIBC.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_LIBC.free.argtypes = [ctypes.c_void_p]
_ALLOCATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


class CountingRaw:
    """A raw allocator in Python (through ctypes) that counts what is
    outstanding, so a test can see every segment come back."""

    def __init__(self, limit=None, misalign=False):
        self.outstanding = {}
        self.limit = limit
        self.misalign = misalign
        self._allocate = _ALLOCATE(self.allocate)
        self._release = _RELEASE(self.release)
        self.raw = memory.RawAllocator(ctypes.cast(self._allocate, ctypes.c_void_p).value,
                                       ctypes.cast(self._release, ctypes.c_void_p).value, 0, "counting")

    def allocate(self, size, context):
        if self.limit is not None and sum(self.outstanding.values()) + size > self.limit:
            return None
        address = _LIBC.aligned_alloc(128, size + 128)
        if self.misalign:
            address += 8
        self.outstanding[address] = size
        return address

    def release(self, address, size, context):
        assert self.outstanding.pop(address) == size
        _LIBC.free(address - 8 if self.misalign else address)


class Live:
    """Live blocks as sorted address intervals: an insertion that overlaps a
    neighbour fails the test."""

    def __init__(self):
        self.starts, self.ends = [], []

    def add(self, address, size):
        size = max(size, 1)
        at = bisect.bisect(self.starts, address)
        assert at == 0 or self.ends[at - 1] <= address, "overlaps the block before it"
        assert at == len(self.starts) or address + size <= self.starts[at], "overlaps the block after it"
        self.starts.insert(at, address)
        self.ends.insert(at, address + size)

    def remove(self, address):
        at = bisect.bisect_left(self.starts, address)
        del self.starts[at], self.ends[at]


def test_random_allocations_never_overlap_and_all_memory_comes_back():
    raw = CountingRaw()
    allocator = memory.Allocator(raw=raw.raw)
    rng = random.Random(16)
    live, blocks = Live(), []
    for step in range(4000):
        if not blocks or rng.random() < 0.55:
            size = rng.choice([rng.randrange(0, 600), rng.randrange(600, 40000), rng.randrange(1 << 20, 5 << 20)]
                              if rng.random() < 0.05 else [rng.randrange(0, 600), rng.randrange(600, 40000)])
            block, address = allocator.allocate(size)
            assert address % memory.ALIGNMENT == 0
            live.add(address, size)
            ctypes.memset(address, step % 251, size)
            blocks.append((block, address, size, step % 251))
        else:
            block, address, size, stamp = blocks.pop(rng.randrange(len(blocks)))
            if size:
                assert ctypes.string_at(address, size) == bytes([stamp]) * size, "a block was overwritten"
            live.remove(address)
            allocator.free(block)
        if step % 1000 == 999:
            allocator.empty_cache()
    stats = allocator.stats()
    assert stats["active_blocks"] == len(blocks)
    assert stats["allocations"] - stats["frees"] == len(blocks)
    for block, *_ in blocks:
        allocator.free(block)
    stats = allocator.stats()
    assert (stats["allocated_bytes"], stats["requested_bytes"], stats["active_blocks"]) == (0, 0, 0)
    assert stats["peak_allocated_bytes"] > 0 and stats["thread_cache_hits"] > 0
    allocator.empty_cache()
    stats = allocator.stats()
    assert stats["reserved_bytes"] == 0 and stats["segments"] == 0
    assert raw.outstanding == {}, "segments leaked to the raw allocator"
    assert stats["raw_allocations"] == stats["raw_releases"]


def test_native_threads_under_thread_sanitizer(tmp_path):
    """Four native threads allocating, stamping, checking and freeing (a
    quarter of the blocks freed by another thread), built with
    -fsanitize=thread where the compiler has it."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    sources = [ROOT / "cxx/runtime/memory" / name for name in ("caching_allocator.cc", "raw_allocator.cc")]
    binary = tmp_path / "stress"
    command = [compiler, "-std=c++17", "-O1", "-g", f"-I{ROOT / 'cxx/runtime/memory'}", *map(str, sources),
               str(Path(__file__).with_name("allocator_stress.cc")), "-o", str(binary), "-pthread"]
    sanitized = subprocess.run(command + ["-fsanitize=thread"], capture_output=True, text=True)
    if sanitized.returncode:
        subprocess.run(command, check=True)
    done = subprocess.run([str(binary), "4", "3000"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ThreadSanitizer" not in done.stderr, done.stderr
    fields = dict(item.split("=") for item in done.stdout.split()[1:])
    assert done.stdout.startswith("ok")
    assert fields["allocated"] == fields["active"] == "0"
    assert fields["reserved_after_empty"] == fields["segments_after_empty"] == "0"
    assert fields["allocations"] == fields["frees"]


def test_python_threads_share_one_allocator_and_their_caches_return_at_exit():
    allocator = memory.Allocator()
    errors = []
    handed = []
    lock = threading.Lock()

    def work(seed):
        rng = random.Random(seed)
        mine = []
        try:
            for _ in range(1500):
                if not mine or rng.random() < 0.5:
                    tensor = allocator.empty((rng.randrange(1, 3000),), torch.float32)
                    tensor.fill_(seed)
                    (handed if rng.random() < 0.2 else mine).append(tensor)
                else:
                    tensor = mine.pop(rng.randrange(len(mine)))
                    assert bool((tensor == seed).all()), "a tensor was overwritten"
                with lock:
                    if handed and rng.random() < 0.3:
                        handed.pop()  # freed on this thread, allocated on another
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    handed.clear()
    stats = allocator.stats()
    assert stats["allocated_bytes"] == 0 and stats["active_blocks"] == 0
    # Each worker's cache went back to the pools when its thread ended; only
    # this thread's own (it freed the handed-over tensors) may remain.
    snapshot = allocator.snapshot()
    cached = sum(b["size"] for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "thread_cached")
    assert cached == stats["thread_cached_bytes"] <= 1 << 20


def test_size_classes_splitting_and_coalescing():
    allocator = memory.Allocator()
    a, _ = allocator.allocate(100)
    b, _ = allocator.allocate(513)
    c, _ = allocator.allocate(3 << 20)
    sizes = {blk["requested"]: blk["size"] for s in allocator.snapshot()["segments"] for blk in s["blocks"]
             if blk["state"] == "allocated"}
    assert sizes == {100: 128, 513: 640, 3 << 20: 3 << 20}
    for block in (a, b, c):
        allocator.free(block)
    allocator.empty_cache()
    # Everything merged back into whole segments, which went back.
    assert allocator.stats()["segments"] == 0
    # A large block splits its segment; freeing both halves merges them.
    x, _ = allocator.allocate(1 << 21)
    y, _ = allocator.allocate(3 << 20)
    allocator.free(x)
    allocator.free(y)
    for segment in allocator.snapshot()["segments"]:
        assert len(segment["blocks"]) == 1 and segment["blocks"][0]["state"] == "free"


def test_snapshot_tiles_every_segment_and_is_json(tmp_path):
    allocator = memory.Allocator()
    kept = [allocator.allocate(size) for size in (10, 5000, 70000, 2 << 20)]
    allocator.free(kept.pop(1)[0])
    path = tmp_path / "snapshot.json"
    allocator.dump_snapshot(path)
    snapshot = json.loads(path.read_text())
    assert snapshot["device"] == "cpu" and snapshot["alignment"] == 64
    allocated = 0
    for segment in snapshot["segments"]:
        address = segment["address"]
        for block in segment["blocks"]:
            assert block["address"] == address and block["address"] % 64 == 0
            address += block["size"]
            allocated += block["size"] if block["state"] == "allocated" else 0
        assert address == segment["address"] + segment["size"]
    assert allocated == allocator.stats()["allocated_bytes"] == snapshot["stats"]["allocated_bytes"]
    assert sum(s["size"] for s in snapshot["segments"]) == allocator.stats()["reserved_bytes"]


def test_statistics_peak_and_fragmentation():
    allocator = memory.Allocator()
    blocks = [allocator.allocate(64 << 10)[0] for _ in range(16)]
    peak = allocator.stats()["peak_allocated_bytes"]
    assert peak == 16 * (64 << 10)
    for block in blocks[::2]:  # every other block: free holes between live ones
        allocator.free(block)
    stats = allocator.stats()
    assert stats["allocated_bytes"] == 8 * (64 << 10) and stats["peak_allocated_bytes"] == peak
    assert 0 < stats["fragmentation"] < 1
    allocator.reset_peak_stats()
    assert allocator.stats()["peak_allocated_bytes"] == 8 * (64 << 10)
    for block in blocks[1::2]:
        allocator.free(block)
    assert allocator.stats()["fragmentation"] == 0


def test_tensors_own_their_blocks():
    allocator = memory.Allocator()
    x = allocator.empty((4, 256), torch.float32)
    assert x.shape == (4, 256) and x.is_contiguous() and x.data_ptr() % 64 == 0
    x.fill_(2.5)
    y = x.view(-1)[:10]  # a view keeps the block
    del x
    gc.collect()
    assert allocator.stats()["allocated_bytes"] == 4096
    assert float(y.sum()) == 25.0
    del y
    assert allocator.stats()["allocated_bytes"] == 0
    # The allocator lives while a tensor it made does.
    z = memory.Allocator().empty((3,), torch.int64)
    gc.collect()
    z.fill_(7)
    assert z.tolist() == [7, 7, 7]
    assert memory.empty((2, 3), torch.bool).dtype == torch.bool
    assert memory.empty((0,)).numel() == 0


def test_bad_use_is_a_clear_error():
    allocator = memory.Allocator()
    block, _ = allocator.allocate(10)
    allocator.free(block)
    with pytest.raises(BrazeError, match="not a live block"):
        allocator.free(block)
    with pytest.raises(BrazeError, match="cannot allocate -1 bytes"):
        allocator.bytes(-1)
    with pytest.raises(BrazeError, match="negative size"):
        allocator.empty((2, -3))
    with pytest.raises(BrazeError, match="host and CUDA memory"):
        memory.Allocator("meta")
    limited = CountingRaw(limit=4 << 20)
    small = memory.Allocator(raw=limited.raw)
    with pytest.raises(memory.OutOfMemory, match="refused 6291456 bytes"):
        small.allocate(5 << 20)
    with pytest.raises(BrazeError, match="not aligned to 64 bytes"):
        memory.Allocator(raw=CountingRaw(misalign=True).raw).allocate(10)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a CUDA driver")
def test_cuda_without_a_driver_is_refused():
    with pytest.raises(memory.DeviceUnavailable, match="CUDA driver|no CUDA device"):
        memory.Allocator("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_device_memory():
    allocator = memory.Allocator("cuda")
    x = allocator.empty((1024, 1024), torch.float32)
    assert x.device.type == "cuda" and x.data_ptr() % 64 == 0
    x.copy_(torch.arange(1 << 20, dtype=torch.float32).view(1024, 1024).cuda())
    assert float(x.sum()) == float(torch.arange(1 << 20, dtype=torch.float64).sum())
    del x
    torch.cuda.synchronize()
    assert allocator.stats()["allocated_bytes"] == 0
    allocator.empty_cache()
    assert allocator.stats()["reserved_bytes"] == 0
