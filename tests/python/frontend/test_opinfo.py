"""PyTorch's OpInfo samples of every supported op: captured once, run on the
reference interpreter, compiled for the CPU and for OpenCL (on PoCL; one
float32 and one bfloat16 sample), compared with eager; the same float32 and
bfloat16 samples' kernels built as CUDA C++ by NVRTC for sm_90 (no GPU
here to run them). A sample braze refuses must be refused with a
BrazeError; it may never produce a different answer or fail inside braze.
benchmarks/opinfo_report.py runs every sample and dtype."""

import pytest
import torch

from braze import target as targets
from braze.testing.opinfo import opinfos, run_op, summarize

pytest.importorskip("expecttest", reason="OpInfo's database needs expecttest")

INFOS = opinfos()
SAMPLES_PER_DTYPE = 2
DTYPES = (torch.float32, torch.int64, torch.bool, torch.bfloat16)


GPU_BACKENDS = {"opencl": "opencl", "cuda": "cuda:build"}  # target -> backend


def _plan() -> dict:
    """backend -> (dtypes, samples per dtype): PoCL and NVRTC where they are
    installed (required with BRAZE_REQUIRE_TOOLCHAINS=1, as CI sets)."""
    plan = {"reference": (DTYPES, SAMPLES_PER_DTYPE), "cpu": (DTYPES, SAMPLES_PER_DTYPE)}
    for target, backend in GPU_BACKENDS.items():
        missing = targets.get(target).compiler_missing()
        if missing is None:
            plan[backend] = ((torch.float32, torch.bfloat16), 1)
        elif targets.require_toolchains():
            pytest.fail(f"the {target} target: {missing} (BRAZE_REQUIRE_TOOLCHAINS=1)")
    return plan


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(INFOS))
def test_opinfo_samples(name):
    results = run_op(INFOS[name], _plan())
    bad = [f"{r.backend} {r.dtype} {r.outcome}: {r.detail}" for r in results if r.outcome in ("mismatch", "error")]
    assert not bad, "\n".join(bad)
    for backend in ("reference", "cpu"):
        counts = summarize(r for r in results if r.backend == backend)
        assert counts["pass"] >= 1 or not sum(counts.values()), f"{backend}: no sample passed: {counts}"
    # OpenCL runs what the CPU runs (all 206 samples when this was written),
    # and NVRTC builds the kernels of every sample the CPU passes.
    cpu = {(r.dtype, r.sample): r for r in results if r.backend == "cpu"}
    for r in results:
        if r.backend == "opencl":
            assert r.outcome == cpu[r.dtype, r.sample].outcome, f"opencl {r.dtype}: {r.outcome}: {r.detail}"
        if r.backend == GPU_BACKENDS["cuda"] and cpu[r.dtype, r.sample].outcome == "pass":
            assert r.outcome == "pass", f"cuda {r.dtype}: {r.outcome}: {r.detail}"


def test_every_listed_op_is_in_the_database():
    from braze.testing.opinfo import OPINFO_OPS

    assert len(INFOS) == len(OPINFO_OPS)
