"""Hostile input: a rogue client on loopback sends thousands of random and
mutated frames to the TCP store and to a rank's data ports. The store and
the ranks must go on serving their legitimate peers; nothing may crash."""

import random
from collections import Counter

import braze.comm as bc
import rogue
import security_workers
from group import run_group

SECRET = b"hostile-test-secret"


def test_store_serves_legitimate_clients_through_a_flood_of_rogue_frames():
    server = bc.TCPStore("127.0.0.1", 0, True, secret=SECRET)
    legit = bc.TCPStore("127.0.0.1", server.port, False, secret=SECRET)
    rng = random.Random(18)
    before = bc.rejected_connections()
    totals = Counter()
    for round_ in range(20):
        totals += rogue.attack(server.port, SECRET, rng, rogue.store_frame, 100)
        legit.set(f"round/{round_}", str(round_))
        assert legit.get(f"round/{round_}") == str(round_).encode()
        assert legit.add("rounds", 1) == round_ + 1
    assert totals["frames"] >= 2000 and totals["mutated"] > 0, totals
    assert totals["wrong_secret_accepted"] == 0, totals
    assert bc.rejected_connections() - before >= totals["wrong_secret"], totals


def test_ranks_serve_each_other_through_a_flood_of_rogue_frames():
    results = run_group(security_workers.rogue_against_ranks, 2, "tcp", args=(1500, 18), deadline=120,
                        comm_timeout=30.0)
    assert results[0]["wrong"] == [] and results[1]["wrong"] == [], results
    counts = results[1]["counts"]
    # All 1500 at the window service; the transport's rendezvous port takes
    # what arrives before the real peer connects and it closes.
    assert counts["frames"] >= 1500 and counts["wrong_secret_accepted"] == 0, counts
