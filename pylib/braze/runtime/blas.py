"""The BLAS functions generated CPU code calls for `braze.fused_gemm`: MKL's,
from the libtorch_cpu.so torch has already loaded (no second BLAS in the
process, no second thread pool: measured against OpenBLAS, whose pool
fought torch's OpenMP pool over the cores, see docs/cpu.md).

The generated library exports `braze_set_blas(void* const* functions)`; the
CPU step factory passes it `functions()` once, after loading it, in the
order of `NAMES` (the prelude of codegen/cpp/gemm.py declares the same)."""

from __future__ import annotations

import ctypes
import functools
import os

from braze.errors import BrazeError

# Fortran sgemm_/dgemm_ (column-major), MKL's CBLAS half-precision GEMMs
# with float results (row-major).
NAMES = ("sgemm_", "dgemm_", "cblas_gemm_bf16bf16f32", "cblas_gemm_f16f16f32")


@functools.cache
def _library() -> ctypes.CDLL | None:
    import torch

    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    try:
        return ctypes.CDLL(path)
    except OSError:
        return None


def missing() -> str | None:
    """Why fused GEMMs cannot run on this CPU build of torch (None: they can)."""
    library = _library()
    if library is None:
        return "torch's libtorch_cpu.so cannot be loaded"
    absent = [name for name in NAMES if not hasattr(library, name)]
    if absent:
        return f"torch's libtorch_cpu.so has no {', '.join(absent)} (torch not built with MKL)"
    return None


@functools.cache
def functions() -> ctypes.Array:
    """The addresses of `NAMES`, as the `void* const*` the generated code takes."""
    reason = missing()
    if reason is not None:
        raise BrazeError(f"braze.fused_gemm on the CPU calls MKL through torch, but {reason}; "
                         "compile with options={'epilogue_fusion': False}")
    _allow_amx()
    library = _library()
    return (ctypes.c_void_p * len(NAMES))(*(ctypes.cast(getattr(library, name), ctypes.c_void_p) for name in NAMES))


def _allow_amx() -> None:
    """Asks Linux for this process's AMX tile state, where the CPU has AMX
    (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, through torch). oneDNN asks for
    itself when it first wants AMX; MKL does not, and picks its bf16/f16
    GEMM's kernels at its first call: without the permission it took the
    AVX-512 path for the rest of the process (512 x 2048 x 5632 bf16 on 2
    threads: 16-19 ms, 8.0-8.2 ms with AMX; docs/cpu.md)."""
    import torch

    init_amx = getattr(torch._C._cpu, "_init_amx", None)
    if init_amx is not None:
        init_amx()
