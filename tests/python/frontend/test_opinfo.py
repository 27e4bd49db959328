"""PyTorch's OpInfo samples of every supported op: captured, run on the
reference interpreter and compiled for the CPU, compared with eager. A sample braze refuses must be
refused with a BrazeError; it may never produce a different answer or fail
inside braze. benchmarks/opinfo_report.py runs every sample and dtype."""

import pytest
import torch

from braze.testing.opinfo import opinfos, run_op, summarize

pytest.importorskip("expecttest", reason="OpInfo's database needs expecttest")

INFOS = opinfos()
SAMPLES_PER_DTYPE = 2
DTYPES = (torch.float32, torch.int64, torch.bool, torch.bfloat16)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("name", sorted(INFOS))
def test_opinfo_samples(name, backend):
    info = INFOS[name]
    results = run_op(info, DTYPES, SAMPLES_PER_DTYPE, backend)
    bad = [f"{r.outcome}: {r.detail}" for r in results if r.outcome in ("mismatch", "error")]
    assert not bad, "\n".join(bad)
    counts = summarize(results)
    assert counts["pass"] >= 1 or not results, f"no sample passed: {counts}"


def test_every_listed_op_is_in_the_database():
    from braze.testing.opinfo import OPINFO_OPS

    assert len(INFOS) == len(OPINFO_OPS)
