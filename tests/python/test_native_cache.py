"""The on-disk cache of compiled C++: hits, concurrency, corruption, errors."""

import ctypes
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import braze
from braze.runtime.native_cache import NativeCache, cache_dir

SOURCE = 'extern "C" int add(int a, int b) { return a + b; }\n'


def test_compiles_loads_and_hits(tmp_path, logging_compiler):
    cache = NativeCache(tmp_path / "cache")
    assert cache.load(SOURCE).add(2, 3) == 5
    assert cache.compilations == 1
    again = NativeCache(tmp_path / "cache")
    assert again.load(SOURCE).add(20, 22) == 42
    assert again.compilations == 0
    entry = cache.entry(SOURCE)
    assert (entry / "source.cpp").read_text() == SOURCE
    assert logging_compiler.runs == 1


def test_another_process_hits_the_cache(tmp_path, logging_compiler):
    NativeCache(tmp_path / "cache").load(SOURCE)
    code = textwrap.dedent(f"""
        from braze.runtime.native_cache import NativeCache
        cache = NativeCache({str(tmp_path / 'cache')!r})
        assert cache.load({SOURCE!r}).add(1, 1) == 2
        print(cache.compilations)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "0"
    assert logging_compiler.runs == 1


@pytest.mark.slow
def test_four_processes_compile_one_source_once(tmp_path, logging_compiler):
    source = SOURCE + "// concurrent\n"
    code = textwrap.dedent(f"""
        from braze.runtime.native_cache import NativeCache
        print(NativeCache({str(tmp_path / 'cache')!r}).load({source!r}).add(40, 2))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    assert [out.strip() for out, _ in outputs] == ["42"] * 4
    assert logging_compiler.runs == 1
    entry = NativeCache(tmp_path / "cache").entry(source)
    assert sorted(p.name for p in entry.iterdir() if not p.name.startswith(".")) == [
        "lib.so", "lib.so.sha256", "source.cpp"]


def _load_in_child(directory: Path) -> str:
    """Loads SOURCE in a fresh process (a library mapped here must not be
    overwritten under this process's feet) and reports compilations."""
    code = textwrap.dedent(f"""
        from braze.runtime.native_cache import NativeCache
        cache = NativeCache({str(directory)!r})
        print(cache.load({SOURCE!r}).add(3, 4), cache.compilations)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


@pytest.mark.parametrize("damage", ["garbage", "truncate", "remove_checksum"])
def test_corrupt_entry_is_rebuilt(tmp_path, damage):
    directory = tmp_path / "cache"
    assert _load_in_child(directory) == "7 1"
    entry = NativeCache(directory).entry(SOURCE)
    library = entry / "lib.so"
    if damage == "garbage":
        library.write_bytes(b"\0not an elf file")
    elif damage == "truncate":
        library.write_bytes(library.read_bytes()[:100])
    else:
        (entry / "lib.so.sha256").unlink()
    assert _load_in_child(directory) == "7 1"  # rebuilt once
    assert _load_in_child(directory) == "7 0"  # and valid again


def test_compiler_failure_is_a_braze_error_with_the_source_kept(tmp_path):
    cache = NativeCache(tmp_path / "cache")
    bad = 'extern "C" int broken( { return 1; }\n'
    with pytest.raises(braze.BrazeError) as info:
        cache.load(bad)
    message = str(info.value)
    source = cache.entry(bad) / "source.cpp"
    assert f"the C++ compiler failed (exit 1) on {source}; the source is kept there" in message
    assert "error:" in message and source.read_text() == bad


def test_cache_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path / "here"))
    assert cache_dir() == tmp_path / "here"
    assert NativeCache().load(SOURCE).add(1, 2) == 3
    assert any((tmp_path / "here").rglob("lib.so"))
    monkeypatch.delenv("BRAZE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "braze"


def test_missing_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    with pytest.raises((braze.BrazeError, OSError)):
        NativeCache(tmp_path / "cache").load(SOURCE)


PRELUDE = '#include <cmath>\nstatic inline float twice(float x) { return 2 * x; }\n'


def test_a_source_beginning_with_the_prelude_builds_on_its_precompiled_form(tmp_path):
    from braze.runtime.native_cache import DEFAULT_FLAGS, PreludeToolchain

    def cache():
        return NativeCache(tmp_path / "cache", toolchain=PreludeToolchain(DEFAULT_FLAGS, PRELUDE, tmp_path / "cache"))

    first = PRELUDE + 'extern "C" float f(float x) { return twice(std::sqrt(x)); }\n'
    library = cache().load(first)
    library.f.restype, library.f.argtypes = ctypes.c_float, [ctypes.c_float]
    assert library.f(16.0) == 8.0
    (precompiled,) = (tmp_path / "cache" / "prelude").glob("*/prelude.h.gch")
    built_at = precompiled.stat().st_mtime_ns
    # Another source reuses it; the kept source is the whole text.
    second = PRELUDE + 'extern "C" int g() { return (int)twice(21); }\n'
    assert cache().load(second).g() == 42
    assert precompiled.stat().st_mtime_ns == built_at
    assert cache().source_path(second).read_text() == second
    # A compile error names the kept source and its own line, not the rest's.
    broken = PRELUDE + 'extern "C" int h() { return undefined_name; }\n'
    with pytest.raises(braze.BrazeError) as caught:
        cache().load(broken)
    assert f"{cache().source_path(broken)}:3" in caught.value.message and "undefined_name" in caught.value.message


def test_a_compiler_that_cannot_precompile_the_prelude_builds_plainly_and_is_not_asked_again(tmp_path,
                                                                                             refusing_compiler):
    from braze.runtime.native_cache import DEFAULT_FLAGS, PreludeToolchain

    log = refusing_compiler("c++-header")
    for number in range(2):
        cache = NativeCache(tmp_path / "cache", toolchain=PreludeToolchain(DEFAULT_FLAGS, PRELUDE, tmp_path / "cache"))
        source = PRELUDE + f'extern "C" int g() {{ return (int)twice({number}); }}\n'
        assert cache.load(source).g() == 2 * number
    assert log.read_text().splitlines() == ["refused"]
    assert not list((tmp_path / "cache" / "prelude").glob("*/prelude.h.gch"))
