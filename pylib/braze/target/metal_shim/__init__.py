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
import functools
import shlex
from pathlib import Path

from braze.codegen.analysis import KernelSpec
from braze.runtime.combo import GpuComboCall
from braze.runtime.executor import KernelCall, StepFactory
from braze.runtime.native_cache import Toolchain, built_once, compiler

SHIM = Path(__file__).parent

RUNTIME = SHIM / "runtime.cpp"


@functools.lru_cache(maxsize=None)
def _shim_text() -> str:
    """What a build depends on besides the kernels: the header and the
    runtime (read once: every cache lookup's key includes them)."""
    return (SHIM / "metal_stdlib").read_text() + RUNTIME.read_text()

# The harness: per launch function, an entry point that hands it to the
# runtime's bz_shim_run.
_HARNESS_HEAD = """#include <cstdint>
typedef uint32_t uint;
typedef void (*bz_launch_fn)(void* const* buffers, const int64_t* sizes, int* failed, uint thread, uint group);
extern "C" int bz_shim_run(bz_launch_fn launch, void* const* buffers, const int64_t* sizes, int64_t groups,
                           uint threads);
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
static void bz_launch_{name}(void* const* buffers, const int64_t* sizes, int* failed, uint thread, uint group) {{
  {name}({arguments}, sizes, failed, thread, group);
}}
extern "C" int bz_run_{name}(void* const* buffers, const int64_t* sizes, int64_t groups) {{
  return bz_shim_run(bz_launch_{name}, buffers, sizes, groups, {threads});
}}""")
    return "\n".join(parts) + "\n"


class MetalShimToolchain(Toolchain):
    """g++ on the kernels' MSL and the harness, linked with the runtime
    (runtime.cpp), which is compiled once per cache directory, compiler and
    flags: its C++20 thread headers took 0.7 of a small kernel's 0.9 s. A
    compiler that fails to compile it alone compiles it with each kernel."""

    title = "the C++ compiler (Metal shim)"
    source_name = "source.metal"
    artifact_name = "lib.so"

    def __init__(self, unit, directory: Path):
        super().__init__(("-std=c++20", "-O2", "-shared", "-fPIC", "-pthread", "-Wno-attributes", "-x", "c++",
                          "-I", str(SHIM)))
        self.harness = harness(launch_shapes(unit))
        self.directory = Path(directory)

    def identity(self) -> str:
        return super().identity() + "\n" + self.harness + "\n" + _shim_text()

    def command(self, source: Path, output: Path) -> list[str]:
        path = source.with_name("harness.cpp")
        path.write_text(self.harness)
        runtime = self._runtime()
        linked = [str(RUNTIME)] if runtime is None else ["-x", "none", str(runtime)]
        return super().command(source, output)[:-2] + [str(path), *linked, "-o", str(output)]

    def _runtime(self) -> Path | None:
        """runtime.cpp's object file (its symbols hidden: each library
        keeps its own), or None when the compiler fails to build it alone."""
        flags = [flag for flag in self.flags if flag != "-shared"]
        # The header enters the identity: the runtime includes it.
        return built_once(self.directory / "metal-shim", Toolchain.identity(self) + _shim_text(), "runtime.cpp",
                          RUNTIME.read_text(), "runtime.o", lambda source, output: shlex.split(compiler()) + [
                              *flags, "-fvisibility=hidden", "-c", str(source), "-o", str(output)])


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
