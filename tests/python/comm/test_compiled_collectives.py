"""Compiled programs with collectives on 2 and 4 spawned ranks: braze
(through braze.comm) against eager torch.distributed (Gloo) on the same
inputs, and a rank killed in the middle of a compiled step."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

import compiled_workers
from group import run_group

torch = pytest.importorskip("torch")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_compiled_collectives_match_eager_gloo_and_survive_a_killed_rank(tmp_path):
    """One group of 2 ranks (spawning and compiling once keeps this fast):
    numbers against eager Gloo (a data-parallel backward with its gradients
    bucketed among them), then rank 1 killed mid-step; braze-fr names
    it from the survivor's flight recorder, as for eager collectives."""
    timeout = 5.0
    results = run_group(compiled_workers.numbers_then_kill, 2, "shm", args=(_free_port(), 1),
                        comm_timeout=timeout, expect_dead=(1,), deadline=120,
                        options={"dump_dir": str(tmp_path)})
    for rank, r in enumerate(results[0]["numbers"]):
        assert r["tp_vs_eager"] == 0.0, (rank, r)  # two partial sums: one order
        assert r["tp_vs_unsharded"] < 1e-4, (rank, r)
        assert r["dp_vs_eager"] < 1e-5, (rank, r)  # fused kernels round differently
        assert r["dp_replicas_agree"], (rank, r)
        assert r["a2a_vs_eager"] == 0.0 and r["a2a_round_trip"] == 0.0, (rank, r)
        assert r["dp_bucketed_vs_eager"] < 1e-6, (rank, r)
        assert r["dp_compiled_all_reduces"] == 3 < r["dp_parameters"] == 6, (rank, r)  # three buckets
    survivor = results[0]["killed"]
    assert survivor["error"] == "CollectiveError", survivor
    assert survivor["cause"] in ("CommRankFailed", "CommAborted", "CommTimeout"), survivor
    assert survivor["seconds"] < timeout, survivor
    out = subprocess.run([sys.executable, "-m", "braze.tools.fr", "--json", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    report = json.loads(out.stdout)
    assert out.returncode == 1 and report["culprits"] == [1], report


def test_parallel_programs_at_four_ranks_match_eager_gloo():
    """A column- then row-parallel MLP and a tensor-parallel transformer
    block on 4 ranks, compiled with braze-overlap in each mode (braze.comm
    and Gloo may add the 4 partial sums in different orders, so the numbers
    agree to rounding); an uneven all_to_all and a data-parallel backward
    with bucketed gradients, as at 2 ranks."""
    results = run_group(compiled_workers.tensor_parallel_numbers, 4, "shm", args=(_free_port(),), deadline=240)
    for rank, r in sorted(results.items()):
        for mode in ("simple", "cost"):
            assert r[f"mlp_{mode}_vs_eager"] < 1e-5 and r[f"mlp_{mode}_vs_unsharded"] < 1e-4, (rank, r)
            assert r[f"block_{mode}_vs_eager"] < 1e-5 and r[f"block_{mode}_vs_unsharded"] < 1e-4, (rank, r)
            assert r[f"{mode}_braze_all_reduces"] == 3, (rank, r)  # the MLP's one and the block's two
        assert r["a2a_vs_eager"] == 0.0 and r["a2a_round_trip"] == 0.0, (rank, r)
        assert r["dp_bucketed_vs_eager"] < 1e-6, (rank, r)
        assert r["dp_compiled_all_reduces"] == 3 < r["dp_parameters"], (rank, r)
