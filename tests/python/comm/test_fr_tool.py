"""braze-fr on hand-written dumps: cases the fault campaign met."""

import json

from braze.tools.fr import analyze, load_dumps


def _dump(path, rank, world, dumped_at, missing, entries, failed_since=None, reason="test", generation=0,
          group="braze"):
    doc = {"version": 1, "rank": rank, "world_size": world, "pid": 100 + rank, "backend": "tcp", "group": group,
           "generation": generation, "reason": reason, "dumped_at": dumped_at, "missing_ranks": missing,
           "entries": entries}
    if failed_since is not None:
        doc["failed_since"] = failed_since
    (path / f"braze_fr_g{generation}_rank{rank}.json").write_text(json.dumps(doc))


def _entry(seq, op, in_count, state="failed", generation=0):
    return {"id": seq + 1, "seq": seq, "p2p": False, "generation": generation, "op": op, "in_count": in_count,
            "out_count": in_count, "dtype": "float32", "peer": -1, "state": state, "t_scheduled": 1.0,
            "t_started": 1.0, "t_completed": 2.0, "error": "", "stack": ""}


def _culprits(path):
    return sorted({r for kind, ranks, _ in analyze(load_dumps([path])) if kind != "error" for r in ranks})


def test_uneven_all_to_all_is_not_a_divergence(tmp_path):
    """Rank 2 died in an all_to_all whose splits differ per rank."""
    for rank, count in ((0, 111), (1, 222)):
        _dump(tmp_path, rank, 3, 100.0, [2], [_entry(0, "all_to_all_single", count)])
    assert _culprits(tmp_path) == [2]


def test_a_rank_that_dumps_long_after_the_others_does_not_vote(tmp_path):
    """Rank 1 was stopped between ops; rank 0 timed out waiting for it. When
    rank 1 ran again its next op found rank 0 gone, and it blamed rank 0."""
    _dump(tmp_path, 0, 2, 100.0, [1], [_entry(3, "all_reduce", 8)])
    _dump(tmp_path, 1, 2, 108.0, [0], [_entry(3, "all_reduce", 8), _entry(4, "all_reduce", 8)])
    assert _culprits(tmp_path) == [1]  # also not "rank 0 never joined seq 4"


def test_simultaneous_dumps_that_blame_each_other_name_neither(tmp_path):
    """One of the two is wrong, and nothing tells which: braze-fr says it cannot tell."""
    _dump(tmp_path, 0, 2, 100.0, [1], [_entry(3, "all_reduce", 8)])
    _dump(tmp_path, 1, 2, 100.5, [0], [_entry(3, "all_reduce", 8)])
    findings = analyze(load_dumps([tmp_path]))
    assert _culprits(tmp_path) == [] and findings[0][0] == "unknown" and "cannot tell" in findings[0][2], findings


def test_a_tie_after_a_kill_during_a_tcp_reconfigure_names_nobody(tmp_path):
    """The campaign (tcp, 3 ranks): rank 0 died in a planned reconfigure
    after its abort dump (blaming no one); rank 1 lost its handshake with
    rank 0, rank 2 its handshake with rank 1, which had just given up."""
    done = [_entry(0, "all_reduce", 8, "completed")]
    _dump(tmp_path, 0, 3, 100.0, [], done, reason="reconfigure to [0, 1, 2]")
    _dump(tmp_path, 1, 3, 100.012, [0], done, failed_since=100.001, reason="reconfigure planned-1: authenticating to rank 0")
    _dump(tmp_path, 2, 3, 100.012, [1], done, failed_since=100.001, reason="reconfigure planned-1: authenticating to rank 1")
    assert _culprits(tmp_path) == []
    assert [k for k, _, _ in analyze(load_dumps([tmp_path]))] == ["unknown"]


def test_dumps_that_blame_no_one_do_not_start_the_clock(tmp_path):
    """Every rank dumped when a planned reconfigure aborted the group (blaming
    no one); rank 1 then died, and the others named it 3 s later."""
    _dump(tmp_path, 1, 3, 100.0, [], [_entry(0, "all_reduce", 8, "completed")])
    for rank in (0, 2):
        _dump(tmp_path, rank, 3, 103.0, [1], [_entry(0, "all_reduce", 8, "completed")])
    assert _culprits(tmp_path) == [1]


def test_an_unreadable_dump_is_skipped(tmp_path, capsys):
    (tmp_path / "braze_fr_g0_rank1.json").write_text("")  # a rank killed while writing
    _dump(tmp_path, 0, 2, 100.0, [1], [_entry(0, "all_reduce", 8)])
    assert _culprits(tmp_path) == [1]
    assert "skipping unreadable dump" in capsys.readouterr().err


def _p2p(seq, op, peer, state, started):
    return dict(_entry(seq, op, 1000, state), p2p=True, peer=peer, t_scheduled=started, t_started=started)


def test_a_rank_that_waited_out_its_timeout_still_votes(tmp_path):
    """The campaign's send/recv ring on shm, rank 1 killed: ranks 0 and 2
    saw it die at once; rank 3 was sending to rank 0, which had aborted, and
    only timed out 3 s later. It was waiting all along, so it is no stalled
    rank (braze-fr used to name it with the victim)."""
    for rank, peer in ((0, 1), (2, 1)):
        _dump(tmp_path, rank, 4, 100.01, [1], [_p2p(6, "send", peer, "failed", 100.0)], failed_since=100.0)
    _dump(tmp_path, 3, 4, 103.0, [0], [_p2p(7, "send", 0, "failed", 100.0)], failed_since=100.0)
    assert _culprits(tmp_path) == [1]


def test_a_rank_stalled_before_a_reconfigure_does_not_vote(tmp_path):
    """Rank 0 was stopped before a planned reconfigure; rank 1 gave up on it
    there. Rank 0 ran again 7.5 s later and its reconfigure soon found rank 1
    gone: the wait it blames rank 1 for began after rank 1 had given up,
    though its dump came less than 2 s after rank 1's."""
    _dump(tmp_path, 1, 2, 106.0, [0], [_entry(0, "all_reduce", 8, "completed")], failed_since=100.0,
          reason="reconfigure planned-4: rank 0 never arrived")
    _dump(tmp_path, 0, 2, 107.9, [1], [_entry(0, "all_reduce", 8, "completed")], failed_since=107.5,
          reason="reconfigure planned-4: store barrier timed out: ranks [1] never arrived or stopped inside it")
    findings = analyze(load_dumps([tmp_path]))
    assert _culprits(tmp_path) == [0] and findings[0][0] == "late", findings


def test_failures_that_name_no_rank_are_said_to_be_undecidable(tmp_path):
    """A kill during a reconfigure on shm left every survivor timed out in the
    setup with nobody named: braze-fr says it cannot tell, and names nobody."""
    done = [_entry(0, "all_reduce", 8, "completed")]
    _dump(tmp_path, 1, 4, 100.0, [], done, reason="reconfigure to [0, 1, 2, 3]")  # the victim, before it died
    for rank in (0, 2, 3):
        _dump(tmp_path, rank, 4, 103.0, [], done, failed_since=100.0, reason="reconfigure planned-3: store barrier "
              "'braze/planned-3/shm/mapped' timed out after 3.000000 s: ranks [] never arrived")
    findings = analyze(load_dumps([tmp_path]))
    assert [(k, r) for k, r, _ in findings] == [("unknown", [])], findings
    assert "cannot tell" in findings[0][2]


def test_ranks_that_failed_an_earlier_collective_did_not_fail_to_join_the_next(tmp_path):
    """The final campaign (tcp, 3 ranks, 2.4 MB ring all_reduce): rank 2 was
    stopped inside seq 1; rank 1 still finished seq 1 (its part was done) and
    waited in seq 2, where rank 0, which timed out in seq 1 and aborted,
    never came. Rank 0 is no culprit for seq 2 (braze-fr named it)."""
    ok = _entry(0, "all_reduce", 8, "completed")
    _dump(tmp_path, 0, 3, 103.0, [2], [ok, _entry(1, "all_reduce", 8)], failed_since=100.0)
    _dump(tmp_path, 1, 3, 103.0, [0], [ok, _entry(1, "all_reduce", 8, "completed"), _entry(2, "all_reduce", 8)],
          failed_since=100.1)
    _dump(tmp_path, 2, 3, 108.0, [2], [ok, _entry(1, "all_reduce", 8)], failed_since=100.0,
          reason="all_reduce (seq 1): this rank stalled")
    assert _culprits(tmp_path) == [2]


def test_a_rank_that_failed_the_reconfigure_into_the_newest_generation_did_not_die(tmp_path):
    """The fault test (tcp, 3 ranks, rank 1 killed inside reconfigure
    planned-1): rank 0 had finished its handshakes and entered generation 1,
    whose first all_reduce lost rank 1; rank 2's handshake with the dying
    rank 1 failed, so it stayed in generation 0 and dumped there. It is no
    rank that left no dump, nor one that never joined generation 1's seq 0
    (braze-fr named it with the victim)."""
    done = [_entry(0, "all_reduce", 8, "completed")]
    for rank in (0, 1):
        _dump(tmp_path, rank, 3, 100.0, [], done, failed_since=0.0, reason="reconfigure to [0, 1, 2]")
    _dump(tmp_path, 2, 3, 100.012, [1], done, failed_since=100.001,
          reason="reconfigure planned-1: authenticating to rank 1 at 127.0.0.1:45453: peer connection lost on recv: "
                 "Connection reset by peer (it rejected this process's secret?)")
    _dump(tmp_path, 0, 3, 100.010, [1], done + [_entry(0, "all_reduce", 8, generation=1)], failed_since=100.008,
          reason="all_reduce (seq 0): lost the connection to rank 1 (the rank died or aborted)", generation=1,
          group="braze/planned-1")
    assert _culprits(tmp_path) == [1], analyze(load_dumps([tmp_path]))


def test_a_failed_reconfigure_into_an_older_generation_is_no_excuse(tmp_path):
    """Rank 2's failed reconfigure formed another generation than the newest:
    it says nothing about generation 2, which rank 2 never joined."""
    done = [_entry(0, "all_reduce", 8, "completed")]
    _dump(tmp_path, 2, 3, 100.0, [1], done, failed_since=99.9, reason="reconfigure planned-0: rank 1 never arrived")
    for rank in (0, 1):
        _dump(tmp_path, rank, 3, 200.0, [2], done + [_entry(0, "all_reduce", 8, generation=2)],
              failed_since=197.0, generation=2, group="braze/planned-1")
    assert _culprits(tmp_path) == [2]
