"""MSL compiled as C++ against a small shim header (see `metal_stdlib`
here): the Metal target's check on machines without Apple's compiler."""

from __future__ import annotations

from pathlib import Path

from braze.runtime.native_cache import Toolchain

SHIM = Path(__file__).parent

# The barrier the kernels call: one std::barrier per running group.
_HARNESS = """
#include <barrier>
static thread_local std::barrier<>* bz_group_barrier = nullptr;
void metal::threadgroup_barrier(metal::mem_flags) { if (bz_group_barrier) bz_group_barrier->arrive_and_wait(); }
"""


class MetalShimToolchain(Toolchain):
    title = "the C++ compiler (Metal shim)"
    source_name = "source.metal"
    artifact_name = "lib.so"

    def __init__(self):
        super().__init__(("-std=c++20", "-O1", "-shared", "-fPIC", "-Wno-attributes", "-x", "c++",
                          "-I", str(SHIM)))

    def command(self, source: Path, output: Path) -> list[str]:
        harness = source.with_name("harness.cpp")
        harness.write_text('#include "metal_stdlib"\n' + _HARNESS)
        return super().command(source, output)[:-2] + [str(harness), "-o", str(output)]
