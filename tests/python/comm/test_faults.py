"""Fault injection: dead ranks, abort, timeouts, the flight recorder and
braze-fr, in-place reconfiguration."""

import json
import os
import subprocess
import sys

import pytest

import workers
from group import run_group


@pytest.mark.parametrize("backend", ["shm", "tcp"])
@pytest.mark.parametrize("when", ["before", "during"])
def test_dead_rank_then_reconfigure(backend, when, tmp_path):
    world, victim, timeout = 3, 2, 3.0
    results = run_group(workers.fault, world, backend, args=(victim, when, str(tmp_path)), comm_timeout=timeout,
                        options={"dump_dir": str(tmp_path)}, expect_dead=(victim,), deadline=60)
    assert sorted(results) == [0, 1]
    for old_rank, r in results.items():
        assert r["error"] in ("CommRankFailed", "CommTimeout"), r
        assert r["detected_s"] < timeout + 0.5, r
        assert r["aborts"] == ["all_reduce"], r  # abort hooks ran, naming the failed op
        assert (r["rank"], r["world"], r["ok"]) == (old_rank, 2, True), r
    # Survivors dumped; braze-fr names the dead rank.
    out = subprocess.run([sys.executable, "-m", "braze.tools.fr", "--json", str(tmp_path)],
                         capture_output=True, text=True, timeout=30)
    report = json.loads(out.stdout)
    assert out.returncode == 1 and report["culprits"] == [victim], report


@pytest.mark.parametrize("backend", ["shm", "tcp"])
def test_abort_fails_pending_and_later_ops(backend):
    r = run_group(workers.abort_pending, 2, backend)[1]
    assert r == {"kinds": ["pending", "later"], "prompt": True, "aborted": True}


@pytest.mark.parametrize("backend", ["shm", "tcp"])
def test_timeout_names_op_seq_and_missing_rank(backend, tmp_path):
    results = run_group(workers.timeout_names_missing, 3, backend, args=(str(tmp_path),), comm_timeout=1.0)
    for rank in (0, 1):
        assert results[rank]["missing"] == [2], results[rank]
        assert "all_reduce (seq 1) timed out" in results[rank]["message"]


def test_flight_recorder_dump_on_demand(tmp_path):
    entries = run_group(workers.flight_dump, 2, "shm", args=(str(tmp_path),), options={"record_stack": True})[0]
    assert [(e["seq"], e["op"], e["state"]) for e in entries] == [(0, "all_reduce", "completed"),
                                                                  (1, "barrier", "completed")]
    assert "workers.py" in entries[0]["stack"] and entries[0]["t_completed"] >= entries[0]["t_started"] > 0
    script = os.path.join(os.path.dirname(sys.executable), "braze-fr")  # the installed console script
    out = subprocess.run([script, str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "nothing diverged" in out.stdout


@pytest.mark.parametrize("backend", ["shm", "tcp"])
def test_divergent_op_is_a_mismatch_and_braze_fr_names_it(backend, tmp_path):
    results = run_group(workers.diverge, 3, backend, args=(str(tmp_path),))
    assert all("disagree" in msg for msg in results.values()), results
    out = subprocess.run([sys.executable, "-m", "braze.tools.fr", "--json", str(tmp_path)], capture_output=True,
                         text=True, timeout=30)
    report = json.loads(out.stdout)
    assert report["culprits"] == [1] and report["findings"][0]["kind"] == "diverged", report


@pytest.mark.parametrize("backend", ["shm", "tcp"])
def test_replacement_rank_joins_survivors(backend):
    results = run_group(workers.replace_dead_rank, 3, backend, args=(backend,), comm_timeout=3.0,
                        expect_dead=(2,), deadline=60)
    assert results[0]["joiner"] == [18.0] * 7  # 1 + 2 + 3, then summed over 3 ranks again
    for r in results.values():
        assert r["mine"] == [18.0] * 7 and r["world"] == 3


@pytest.mark.parametrize("backend,quitter", [("tcp", 3), ("tcp", 0), ("shm", 0)])
def test_member_quitting_setup_fails_the_others_promptly(backend, quitter, tmp_path):
    """A member whose side of a reconfigure fails leaves at once; the others
    used to wait for it until their own timeout, and a retry started by the
    quitter right away then gave up on them just as they arrived (the fault
    campaign's "socket closed during reconfigure" trial). Now they learn of
    it through the store, fail within a fraction of the timeout naming the
    quitter, and the retry succeeds on every rank."""
    world, timeout = 4, 3.0
    results = run_group(workers.setup_quitter, world, backend, args=(backend, quitter), comm_timeout=timeout,
                        options={"dump_dir": str(tmp_path)}, deadline=60)
    for rank, r in results.items():
        assert r["error"] is not None, (rank, r)
        assert r["took"] < timeout / 3, (rank, r)
        assert r["sum"] == [10.0] * 5, (rank, r)
        if rank != quitter:
            assert r["error"]["type"] == "CommRankFailed", (rank, r)
            assert f"rank {quitter} gave up" in r["error"]["message"] and r["error"]["missing"] == [quitter], r
    out = subprocess.run([sys.executable, "-m", "braze.tools.fr", "--json", str(tmp_path)], capture_output=True,
                         text=True, timeout=30)
    assert json.loads(out.stdout)["culprits"] == [quitter], out.stdout


@pytest.mark.parametrize("backend", ["shm", "tcp"])
def test_a_peer_that_aborts_fails_collectives_waiting_for_it_at_once(backend):
    """Rank 1 waits in a collective for rank 0, which has aborted. It used to
    learn only at its timeout (shm) or when rank 0 tore its transport down
    (tcp) -- by when a rank 0 that had reconfigured at once had given up on
    it (the campaign's kill in a send/recv ring on shm: the rank sending to a
    survivor that failed fast). Now it fails at once, naming rank 0."""
    timeout = 3.0
    results = run_group(workers.peer_aborts, 2, backend, comm_timeout=timeout, deadline=60)
    error = results[1]["error"]
    assert error["type"] == "CommRankFailed" and error["missing"] == [0], error
    assert error["after"] < 0.3, error  # rank 0 reconfigures (tcp: closes its sockets) only 0.5 s later
    assert results[0]["sum"] == results[1]["sum"] == [3.0] * 3, results
