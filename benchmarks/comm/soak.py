"""Soak test for braze.comm:

    python benchmarks/comm/soak.py [--minutes 10] [--backends shm,tcp] [--results benchmarks/RESULTS.md]

4 ranks run a random mix of collectives (fault_ops: every collective,
send/recv, uneven all_to_all, window puts, an occasional reconfigure) of random
sizes and dtypes, checking every result, for the given time per backend. Each
rank samples its resident memory and descriptor count every couple of
seconds; both must stay flat. Writes the "## Communication: soak" section of
the results file."""

from __future__ import annotations

import argparse
import os
import random
import secrets
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fault_ops  # noqa: E402
import faults  # noqa: E402
from results_md import write_section  # noqa: E402

DTYPES = ("float32", "float16", "int32", "int64")
# Reconfigure rebuilds the transport: rare, but it exercises teardown.
OP_WEIGHTS = {op: (1 if op == "reconfigure" else 10) for op in fault_ops.OPS}
MAX_ELEMENTS = 1 << 20
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(128 << 10), "MALLOC_TRIM_THRESHOLD_": str(256 << 10)}
SAMPLE_EVERY_S = 2.0
# Allowed rise of the resident-memory floor (see floor_growth_kb).
RSS_SLACK_KB = 8 << 10


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def soak_rank(comm, rank, world, seconds, seed):
    """Runs the mix until rank 0 says stop (every rank issues the same ops:
    one seed); returns ops run, wrong results and (t, rss_kb, fds) samples."""
    rng = random.Random(seed)
    win = comm.new_window(np.zeros(fault_ops.WINDOW_ELEMENTS, np.float32))
    ops, wrong, samples = 0, [], []
    # Scratch buffers (the runtime's and the allocator's) grow to the largest
    # op they have seen and stay: reach that high-water mark before sampling.
    for op in OP_WEIGHTS:
        if op != "reconfigure":
            wrong.append(fault_ops.run(comm, op, 0, MAX_ELEMENTS, "int64", win))
    wrong = [w for w in wrong if w]
    start = next_sample = time.monotonic()
    go = np.ones(1, np.int32)
    while go[0]:
        op = rng.choices(list(OP_WEIGHTS), weights=list(OP_WEIGHTS.values()))[0]
        n = rng.randint(1, MAX_ELEMENTS) if rng.random() < 0.05 else rng.randint(1, 4096)
        dtype = rng.choice(DTYPES)
        # Values stay small (i % 64): exact in float16 whatever the op.
        problem = fault_ops.run(comm, op, ops % 64, n, dtype, win, uuid=f"soak-{ops}")
        if problem:
            wrong.append(f"op {ops} ({op}, {n} x {dtype}): {problem}")
        ops += 1
        now = time.monotonic()
        # Right after a reconfigure: the transport's scratch buffers (up to
        # 8 MB each, sized by the largest op since) were just freed, so the
        # sample sees what persists, not which sizes ran lately.
        if op == "reconfigure" and now >= next_sample:
            samples.append((now - start, rss_kb(), faults.fd_count()))
            next_sample = now + SAMPLE_EVERY_S
        if ops % 20 == 0:
            go[0] = int(rank != 0 or now - start < seconds)
            comm.broadcast(go, 0)  # rank 0's clock decides when every rank stops
    win.close()
    return {"ops": ops, "wrong": wrong[:20], "samples": samples}


def floor_growth_kb(samples):
    """How far the lowest RSS of the second half of the run lies above the
    lowest of the first half. Large scratch buffers make RSS swing between
    samples; a leak lifts the floor."""
    rss = [s[1] for s in samples]
    half = max(1, len(rss) // 2)
    return min(rss[half:] or rss) - min(rss[:half])


def run_soak(backend, seconds, seed=18, world=4):
    """Returns per-rank results and what was not flat."""
    from braze.comm.launch import spawn_group

    # glibc raises its mmap threshold after a large buffer is freed, and then
    # keeps later large buffers in a heap it rarely gives back: resident
    # memory would drift with the mix of sizes, leak or not. A fixed threshold
    # returns every large buffer at free, so RSS tracks live memory.
    saved = {k: os.environ.get(k) for k in MALLOC_ENV}
    os.environ.update(MALLOC_ENV)
    try:
        ranks = spawn_group(soak_rank, world, backend, args=(seconds, seed), deadline=seconds + 120, timeout=60.0)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    problems = []
    for r, v in sorted(ranks.items()):
        problems += [f"rank {r}: {w}" for w in v["wrong"]]
        growth = floor_growth_kb(v["samples"])
        if growth > RSS_SLACK_KB:
            problems.append(f"rank {r}: the resident-memory floor rose {growth} KB from the first half to the second")
        samples = v["samples"]
        fds = {s[2] for s in samples}
        if len(fds) > 1:
            problems.append(f"rank {r}: descriptor count varied: {sorted(fds)}")
    return ranks, problems


def markdown(rows, command):
    lines = ["## Communication: soak", "",
             "4 ranks, a random mix of every collective, send/recv, uneven all_to_all, window puts and an "
             "occasional reconfigure, 1 to 1M elements of float32/float16/int32/int64, every result checked; "
             "after a warm-up at the largest size, resident memory and descriptors sampled right after a "
             f"reconfigure (the transport's scratch buffers just freed), at most every {SAMPLE_EVERY_S:.0f} s "
             f"(flat: the lowest RSS of the second half within {RSS_SLACK_KB >> 10} MB of the lowest of the first "
             "half, one descriptor count). Command:", "",
             f"    {command}", "",
             "| backend | minutes | ops (rank 0) | wrong results | samples | RSS first / min / max / last (MB, "
             "rank whose floor rose most) | RSS floor rise (MB) | descriptor counts seen (all ranks) | flat |",
             "|" + " --- |" * 9]
    for row in rows:
        first, low, high, last = row["rss"]
        lines.append(f"| {row['backend']} | {row['minutes']:.1f} | {row['ops']} | {row['wrong']} | {row['samples']} | "
                     f"{first:.0f} / {low:.0f} / {high:.0f} / {last:.0f} | {row['floor_growth_mb']:.1f} | {row['fds']} | "
                     f"{'yes' if not row['problems'] else 'NO: ' + '; '.join(row['problems'])[:200]} |")
    return "\n".join(lines) + "\n"


def summary_row(backend, seconds, ranks, problems):
    worst = max(ranks.values(), key=lambda v: floor_growth_kb(v["samples"]))
    rss = [s[1] / 1024 for s in worst["samples"]]
    return {"backend": backend, "minutes": seconds / 60, "ops": ranks[0]["ops"],
            "wrong": sum(len(v["wrong"]) for v in ranks.values()), "samples": len(rss),
            "rss": (rss[0], min(rss), max(rss), rss[-1]), "floor_growth_mb": floor_growth_kb(worst["samples"]) / 1024,
            "fds": sorted({s[2] for v in ranks.values() for s in v["samples"]}), "problems": problems}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="per backend")
    parser.add_argument("--backends", default="shm,tcp")
    parser.add_argument("--results", default=os.path.join(HERE, "..", "RESULTS.md"))
    args = parser.parse_args()
    os.environ.setdefault("BRAZE_COMM_SECRET", secrets.token_hex(32))
    rows = []
    for backend in args.backends.split(","):
        ranks, problems = run_soak(backend, args.minutes * 60)
        rows.append(summary_row(backend, args.minutes * 60, ranks, problems))
        print(rows[-1], flush=True)
    command = f"python benchmarks/comm/soak.py --minutes {args.minutes:g} --backends {args.backends}"
    write_section(args.results, markdown(rows, command), "## Communication: soak")
    print(markdown(rows, command))


if __name__ == "__main__":
    main()
