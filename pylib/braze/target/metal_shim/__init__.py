"""MSL compiled as C++ against a small shim header (`metal_stdlib` here) and
run on the CPU: the Metal target's check on machines without Apple's
compiler and GPU. Each threadgroup is emulated by real threads (one per
Metal thread) that meet at a real barrier; groups run one after another, on
the same threads (started once per launch).
SIMD-group shuffles (a warp tree's) exchange values through slots that the
32 threads of each SIMD group share, between two barriers of their own.
docs/targets.md says what this proves and what it does not."""

from __future__ import annotations

import ctypes
from pathlib import Path

from braze.codegen.analysis import KernelSpec
from braze.runtime.combo import GpuComboCall
from braze.runtime.executor import KernelCall, StepFactory
from braze.runtime.native_cache import Toolchain

SHIM = Path(__file__).parent

_HARNESS_HEAD = """#include "metal_stdlib"
#include <barrier>
#include <memory>
#include <optional>
#include <thread>
#include <vector>
static thread_local std::barrier<>* bz_group_barrier = nullptr;
void metal::threadgroup_barrier(metal::mem_flags) { bz_group_barrier->arrive_and_wait(); }
// A SIMD group of 32 threads: the slots its lanes exchange values through.
struct bz_simd_group {
  std::barrier<> meeting{32};
  uint64_t slots[32];
};
static thread_local bz_simd_group* bz_simd = nullptr;
static thread_local uint bz_lane = 0;
uint metal::bz_simd_lane() { return bz_lane; }
void metal::bz_simd_exchange(void* value, size_t size, uint lane) {
  std::memcpy(&bz_simd->slots[bz_lane], value, size);
  bz_simd->meeting.arrive_and_wait();
  if (lane < 32) std::memcpy(value, &bz_simd->slots[lane], size);
  bz_simd->meeting.arrive_and_wait();  // every lane has read before the slots are written again
}
"""


def launch_shapes(unit) -> dict[str, tuple[int, int]]:
    """Per launch function of `unit` (a kernel that is not a combo's
    sub-kernel, or a combo's launch): its buffer parameters and threads."""
    inside = {member for members in unit.launches.values() for member in members}
    shapes = {name: (len(spec.input_types) + len(spec.result_types), spec.threads)
              for name, spec in unit.kernels.items() if name not in inside}
    for name, members in unit.launches.items():
        shapes[name] = (len(unit.launch_buffers[name]), max(unit.kernels[m].threads for m in members))
    return shapes


def harness(shapes: dict[str, tuple[int, int]]) -> str:
    """Per launch function (`shapes`: its buffer count and threads), `int
    bz_run_<name>(void* const* buffers, const int64_t* sizes, int64_t
    groups)`: runs every group with the function's threads; returns the
    failure flag."""
    parts = [_HARNESS_HEAD]
    for name, (count, threads) in shapes.items():
        pointers = ", ".join(["void*"] * count)
        arguments = ", ".join(f"buffers[{k}]" for k in range(count))
        parts.append(f"""
extern "C" void {name}({pointers}, const int64_t*, int*, uint, uint);
extern "C" int bz_run_{name}(void* const* buffers, const int64_t* sizes, int64_t groups) {{
  int failed = 0;
  // Each group's barriers are new: a thread that returned early (past the
  // last point) drops out of them. They are made once every thread is done
  // with the group before, as the step between groups completes.
  std::optional<std::barrier<>> meeting;
  std::unique_ptr<bz_simd_group[]> simd_groups;
  auto next_group = [&]() noexcept {{
    meeting.emplace({threads});
    simd_groups.reset(new bz_simd_group[{-(-threads // 32)}]);
  }};
  std::barrier between({threads}, next_group);
  std::vector<std::thread> threads;
  for (uint thread = 0; thread < {threads}; ++thread)
    threads.emplace_back([&, thread] {{
      for (int64_t group = 0; group < groups; ++group) {{
        between.arrive_and_wait();
        bz_group_barrier = &*meeting;
        bz_simd = &simd_groups[thread / 32];
        bz_lane = thread % 32;
        {name}({arguments}, sizes, &failed, thread, (uint)group);
        meeting->arrive_and_drop();
        bz_simd->meeting.arrive_and_drop();
      }}
    }});
  for (auto& t : threads) t.join();
  return failed;
}}""")
    return "\n".join(parts) + "\n"


class MetalShimToolchain(Toolchain):
    title = "the C++ compiler (Metal shim)"
    source_name = "source.metal"
    artifact_name = "lib.so"

    def __init__(self, unit):
        super().__init__(("-std=c++20", "-O2", "-shared", "-fPIC", "-pthread", "-Wno-attributes", "-x", "c++",
                          "-I", str(SHIM)))
        self.harness = harness(launch_shapes(unit))

    def identity(self) -> str:
        return super().identity() + "\n" + self.harness

    def command(self, source: Path, output: Path) -> list[str]:
        path = source.with_name("harness.cpp")
        path.write_text(self.harness)
        return super().command(source, output)[:-2] + [str(path), "-o", str(output)]


def _runner(library, name: str):
    """The harness's `bz_run_<name>`, ready to call."""
    function = getattr(library, f"bz_run_{name}")
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    return function


class _ShimKernelCall(KernelCall):
    def __init__(self, function, spec: KernelSpec, op, slots: dict):
        super().__init__(spec, op, slots)
        self.function = function
        self.spec = spec
        self.buffer_type = ctypes.c_void_p * max(len(self.inputs) + len(self.outputs), 1)

    def launch(self, inputs, outputs, extents, sizes) -> int:
        blocks = self.spec.blocks(extents)
        if blocks == 0:
            return 0
        pointers = [t.data_ptr() for t in inputs] + [t.data_ptr() for t in outputs]
        return self.function(self.buffer_type(*pointers), sizes, blocks)


class _ShimComboCall(GpuComboCall):
    """A combo's launch function (codegen/gpu_combo.py) run by the harness."""

    def __init__(self, function, name: str, calls: list, op, buffers: list):
        super().__init__(name, calls, op, buffers)
        self.function = function
        self.buffer_type = ctypes.c_void_p * len(buffers)

    def run(self, tensors, sizes, blocks) -> int:
        return self.function(self.buffer_type(*[t.data_ptr() for t in tensors]), sizes.buffer_info()[0], blocks)


class ShimKernels(StepFactory):
    """The Metal target's step factory over the shim library;
    `launch_buffers`: its combos' buffer parameters (`Unit.launch_buffers`)."""

    def __init__(self, library, launch_buffers: dict | None = None):
        self.library = library
        self.launch_buffers = launch_buffers or {}

    def kernel_call(self, spec: KernelSpec, op, slots: dict) -> KernelCall:
        return _ShimKernelCall(_runner(self.library, spec.name), spec, op, slots)

    def combo_call(self, name: str, calls: list[KernelCall], op):
        return _ShimComboCall(_runner(self.library, name), name, calls, op, self.launch_buffers[name])
