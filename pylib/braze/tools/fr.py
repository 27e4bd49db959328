"""`braze-fr`: reads the flight-recorder dumps of all ranks and names the
rank(s) that diverged (different op at the same seq id) or never joined a
collective.

    braze-fr DUMP_DIR            # every braze_fr_*.json in it
    braze-fr a.json b.json ...   # explicit files
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path


def load_dumps(paths):
    dumps = []
    for p in paths:
        p = Path(p)
        files = sorted(p.glob("braze_fr_*.json")) if p.is_dir() else [p]
        for f in files:
            try:
                with open(f) as fh:
                    dumps.append(json.load(fh))
            except (OSError, ValueError) as exc:  # e.g. written by an older braze as its rank was killed
                print(f"braze-fr: skipping unreadable dump {f}: {exc}", file=sys.stderr)
    return dumps


# A dump that blames someone for a wait that began after the first such dump
# of its generation comes from a rank that ran again after the others had
# given up on it (it was stopped or starved): what it blames is hindsight, so
# it does not vote. A rank that was already waiting then and only reached its
# own timeout later (its peer had aborted) does vote. Dumps say when the
# failed wait began ("failed_since"; JITTER_S allows for clocks of different
# hosts); older ones only when they were written, and then a dump this long
# after the first is late.
JITTER_S = 0.5
LATE_DUMP_S = 2.0


def _late(dump, first):
    if not dump.get("missing_ranks"):
        return False
    if dump.get("failed_since"):
        return dump["failed_since"] - first > JITTER_S
    return dump.get("dumped_at", 0) - first > LATE_DUMP_S


def _failed_reconfigures(dumps, newest, world):
    """rank -> dump, for ranks with no dump in the newest generation whose own
    newest dump records that they failed the reconfigure that formed it: the
    runtime names that generation's group "<base>/<uuid>" and such a failure
    "reconfigure <uuid>: ...", and dumps it in the old generation's numbering.
    That is the new one where as many members reconfigured; where the group
    grew or shrank the dumps do not tell the new numbers, and such a dump is
    left out (as before)."""
    group = newest[0].get("group", "")
    if "/" not in group:
        return {}
    prefix = f"reconfigure {group.rsplit('/', 1)[1]}: "
    present = {d["rank"] for d in newest}
    own = {}
    for d in dumps:
        if d["rank"] not in present and d["generation"] >= own.get(d["rank"], d)["generation"]:
            own[d["rank"]] = d
    return {r: d for r, d in own.items()
            if d.get("reason", "").startswith(prefix) and _failed(d) and d["world_size"] == world and r < world}


def _signature(entry):
    # Uneven all_to_all sends different amounts from every rank: as in the
    # runtime's header check, only the op and the dtype must agree.
    count = None if entry["op"] == "all_to_all_single" else entry["in_count"]
    return (entry["op"], count, entry["dtype"])


def analyze(dumps):
    """Findings for the newest generation: a list of (kind, ranks, text)."""
    if not dumps:
        return [("error", [], "no flight-recorder dumps found")]
    generation = max(d["generation"] for d in dumps)
    newest = [d for d in dumps if d["generation"] == generation]
    world = max(d["world_size"] for d in newest)
    # A rank that failed the reconfigure which formed this generation never
    # entered it: its dump is filed under the generation it was leaving. It
    # did leave a dump, issued none of this generation's collectives because
    # it had failed, and whom it blames counts (a survivor whose handshake
    # with the dying rank failed, while the others had finished theirs).
    setup_failed = _failed_reconfigures(dumps, newest, world)
    dumps = {d["rank"]: d for d in newest}
    dumps.update(setup_failed)
    findings = []
    # Ranks that blamed others long after the first accusation ran again after
    # the others had given up on them: set their dumps aside (as if they had
    # left none) and name them.
    first = min((d.get("dumped_at", 0) for d in dumps.values() if d.get("missing_ranks")), default=0)
    late = sorted(r for r, d in dumps.items() if _late(d, first))
    if late:
        findings.append(("late", late, f"rank(s) {late} began the wait they failed in after the others had given "
                                       "up on them (stopped or starved)"))
        dumps = {r: d for r, d in dumps.items() if r not in late}
    absent = [r for r in range(world) if r not in dumps]
    # Whom the dumps blame. When survivors blame each other (one aborted and
    # closed its sockets first), a rank that left no dump is the one; when
    # every rank dumped (a dying rank can still write one), the majority wins,
    # and a tie decides nothing: braze-fr says so rather than name a wrong rank.
    votes = collections.Counter(r for d in dumps.values() for r in set(d.get("missing_ranks", [])))
    if absent:
        reported_missing = sorted(set(votes) - set(dumps))
    else:
        top = max(votes.values(), default=0)
        reported_missing = sorted(r for r, v in votes.items() if v == top and top > 0)
        if len(reported_missing) > 1:
            findings.append(("unknown", [], f"the dumps blame rank(s) {reported_missing} equally ({top} each): "
                                            "braze-fr cannot tell which of them failed"))
            reported_missing = []
    # seq -> rank -> entry, collectives only (p2p ids are per pair).
    by_seq = collections.defaultdict(dict)
    first_seq = {}
    for rank, d in dumps.items():
        seqs = [e["seq"] for e in d["entries"] if not e["p2p"] and e.get("generation", generation) == generation]
        first_seq[rank] = min(seqs) if seqs else 0
        for e in d["entries"]:
            if not e["p2p"] and e.get("generation", generation) == generation:
                by_seq[e["seq"]][rank] = e
    floor = max(first_seq.values()) if first_seq else 0  # older entries fell out of some ring
    for seq in sorted(s for s in by_seq if s >= floor):
        ranks = by_seq[seq]
        groups = collections.defaultdict(list)
        for rank, e in ranks.items():
            groups[_signature(e)].append(rank)
        if len(groups) > 1:
            majority = max(groups.values(), key=len)
            for sig, rs in groups.items():
                if rs is not majority:
                    findings.append(("diverged", sorted(rs),
                                     f"seq {seq}: rank(s) {sorted(rs)} ran {sig[0]} ({ranks[rs[0]]['in_count']} x {sig[2]}) while "
                                     f"rank(s) {sorted(majority)} ran "
                                     f"{ranks[majority[0]]['op']} ({ranks[majority[0]]['in_count']} x "
                                     f"{ranks[majority[0]]['dtype']})"))
            break
    # The first seq that some rank issued and another (alive or dead) never did.
    # A rank whose last collective failed issued nothing after it (its
    # communicator was aborted): it did not fail to join the later ones.
    failed_at = {rank: -1 for rank in setup_failed}
    for rank in dumps:
        mine = [s for s in by_seq if rank in by_seq[s]]
        if mine and by_seq[max(mine)][rank]["state"] == "failed":
            failed_at[rank] = max(mine)
    all_seqs = sorted(s for s in by_seq if s >= floor)
    for seq in all_seqs:
        missing = sorted(r for r in set(range(world)) - set(by_seq[seq]) if failed_at.get(r, seq) >= seq)
        if missing:
            stuck = sorted(r for r, e in by_seq[seq].items() if e["state"] != "completed")
            findings.append(("never_joined", missing,
                             f"seq {seq} ({next(iter(by_seq[seq].values()))['op']}): rank(s) {missing} never "
                             f"joined; rank(s) {stuck} were waiting in it"))
            break
    for r in absent:
        if r not in late:
            findings.append(("no_dump", [r], f"rank {r}: no dump (the process died or never dumped)"))
    if reported_missing:
        findings.append(("reported_missing", reported_missing,
                         f"survivors report rank(s) {reported_missing} as not arrived or failed"))
    if not findings:
        failed = sorted(r for r, d in dumps.items() if _failed(d))
        if failed:
            findings.append(("unknown", [], f"rank(s) {failed} failed ({dumps[failed[0]]['reason']}), but no dump "
                                            "names a rank: braze-fr cannot tell which rank failed"))
    return findings


def _failed(dump):
    """Whether the dump reports a failure (not a planned abort or an on-demand dump)."""
    return dump.get("failed_since", 0) > 0 or any(e["state"] == "failed" for e in dump["entries"])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="braze-fr", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="dump directories or files")
    parser.add_argument("--json", action="store_true", help="print findings as JSON")
    args = parser.parse_args(argv)
    findings = analyze(load_dumps(args.paths))
    culprits = sorted({r for kind, ranks, _ in findings if kind != "error" for r in ranks})
    if args.json:
        print(json.dumps({"culprits": culprits,
                          "findings": [{"kind": k, "ranks": r, "text": t} for k, r, t in findings]}))
    else:
        for _, _, text in findings:
            print(text)
        if culprits:
            print(f"suspect rank(s): {culprits}")
        elif not findings:
            print("all ranks agree; nothing diverged")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
