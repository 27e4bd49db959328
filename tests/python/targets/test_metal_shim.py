"""The Metal shim's runtime (target/metal_shim/runtime.cpp): compiled once
per cache and linked into every kernel library; a compiler that cannot
compile it alone compiles it with each kernel."""

import torch

import braze


def _run(cache, scale: float):
    x = torch.randn(3, 70)
    compiled = braze.compile(lambda x: (x * scale).softmax(-1) + 1, (x,), target="metal",
                             options={"threads": 32, "cache_dir": str(cache)})
    torch.testing.assert_close(compiled(x), (x * scale).softmax(-1) + 1)


def test_the_runtime_is_compiled_once_per_cache(private_cache):
    _run(private_cache, 2.0)
    (runtime,) = private_cache.glob("metal-shim/*/runtime.o")
    built_at = runtime.stat().st_mtime_ns
    _run(private_cache, 3.0)  # another kernel library, linked with the same runtime
    assert [p.stat().st_mtime_ns for p in private_cache.glob("metal-shim/*/runtime.o")] == [built_at]


def test_a_compiler_that_cannot_compile_the_runtime_alone_compiles_it_with_each_kernel(private_cache,
                                                                                       refusing_compiler):
    log = refusing_compiler("-fvisibility=hidden")
    _run(private_cache, 2.0)
    _run(private_cache, 3.0)
    assert log.read_text().splitlines() == ["refused"], "asked once"
    assert list(private_cache.glob("metal-shim/*/refused")) and not list(private_cache.glob("metal-shim/*/runtime.o"))
