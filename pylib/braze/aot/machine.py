"""What a package's native code needs of the machine, and whether this one
has it: the CPU architecture, the instruction-set extensions the kernels
were built for (`-march=native` lets the compiler use every extension of
the building CPU), and the device of the package's target."""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from braze.errors import BrazeError
from braze.machine import cpu_flags

# Instruction-set extensions as /proc/cpuinfo spells them: what
# -march=native may enable. Other flags (a hypervisor, the cache's
# features) do not change the code, so they do not keep a package off a
# machine.
ISA_FLAGS = frozenset("""
    sse sse2 ssse3 sse4_1 sse4_2 sse4a popcnt abm lzcnt movbe cx16 aes pclmulqdq
    avx avx2 fma f16c bmi1 bmi2 adx rdrand rdseed sha_ni xsave xsavec xsaveopt
    avx512f avx512dq avx512cd avx512bw avx512vl avx512ifma avx512vbmi avx512_vbmi2
    avx512_vnni avx512_bitalg avx512_vpopcntdq avx512_bf16 avx512_fp16 avx512_vp2intersect
    avx_vnni avx_vnni_int8 avx_ifma amx_tile amx_bf16 amx_int8 amx_fp16 gfni vaes vpclmulqdq
    asimd sve sve2 fphp asimdhp asimddp bf16 i8mm
""".split())


def host_features() -> dict:
    """The machine facts a package records (see `check_machine`)."""
    return {"machine": platform.machine(), "cpu_features": sorted(cpu_flags() & ISA_FLAGS)}


def check_machine(manifest: dict, path: Path) -> None:
    """A BrazeError when this machine cannot run the package's code: another
    CPU architecture, a missing instruction-set extension, or no device of
    the package's kind."""
    machine = platform.machine()
    if manifest["machine"] != machine:
        raise BrazeError(f"AOT package {path} was built for {manifest['machine']} CPUs; this machine is {machine}")
    missing = sorted(set(manifest["cpu_features"]) - cpu_flags())
    if missing:
        raise BrazeError(f"AOT package {path} was built for CPU features this machine lacks: {', '.join(missing)} "
                         f"(its kernels were compiled with -march=native on a CPU that had them); "
                         f"package the model again on this machine or one like it")
    device = torch.device(manifest["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BrazeError(f"AOT package {path} runs on {manifest['device']} ({manifest.get('gpu') or 'a CUDA GPU'}), "
                         f"but this machine has no CUDA device")
    if device.type not in ("cpu", "cuda"):
        raise BrazeError(f"AOT package {path} runs on device {manifest['device']}, which braze.aot cannot load")
