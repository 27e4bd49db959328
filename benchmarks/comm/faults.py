"""Fault-injection campaign for braze.comm:

    python benchmarks/comm/faults.py [--trials 300] [--seed 18] [--results benchmarks/RESULTS.md] [--from-log]

Every trial starts a group of 2-4 ranks (shm or tcp) that runs one kind of op
(fault_ops.OPS: every collective, send/recv, uneven all_to_all, window puts,
reconfigure) a few times, checking every result, and injects one fault into a
victim rank at a random point (before an op, a few µs to ms inside one, or
right after one):

- kill:  SIGKILL;
- stop:  SIGSTOP, then SIGCONT well after the survivors' timeout (a hang, not
  a death);
- close: (tcp) the victim shuts down one of its sockets under a live op.

Then every survivor must have failed within its timeout (plus a grace) or
finished correctly; the survivors reconfigure and run a correct all_reduce;
braze-fr must name the victim (kill, stop) or say that it cannot tell; /dev/shm must hold no new segment
and no survivor may hold more descriptors than when it started. Writes the
"## Communication: fault injection" section of the results file."""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fault_ops  # noqa: E402
from results_md import write_section  # noqa: E402

TIMEOUT = 3.0  # the ranks' op timeout, seconds
GRACE = 1.0  # how far past the timeout a survivor may learn of the fault
FAULTS = ("kill", "stop", "close")
POINTS = ("before", "inside", "between")
SECTION = "## Communication: fault injection"


# -- inside the ranks ----------------------------------------------------------
def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _peer_socket(store_port):
    """A descriptor of one of this rank's connections to a peer (not to the store)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            with socket.socket(fileno=os.dup(fd)) as s:
                if s.family == socket.AF_INET and s.getpeername()[1] != store_port:
                    return fd
        except OSError:
            continue  # closed meanwhile, listening, or not connected
    return None


def _stamp(path):
    with open(path, "w") as f:
        f.write(repr(time.time()))


def inject(plan, comm, stamp):
    """Starts the victim's fault; returns a thread to join (or None)."""
    fault, delay = plan["fault"], plan["delay_s"]
    if fault == "stop":
        # Another process: a stopped rank cannot continue itself. It comes
        # back well after its op's deadline, when the survivors have moved on.
        late = 2 * TIMEOUT + 2.0
        subprocess.Popen(["sh", "-c", f"sleep {delay:.6f}; date +%s.%N > {stamp}; kill -STOP {os.getpid()}; "
                                      f"sleep {late}; kill -CONT {os.getpid()}"])
        return None

    def fire():
        time.sleep(delay)
        if fault == "kill":
            _stamp(stamp)
            os.kill(os.getpid(), signal.SIGKILL)
        fd = _peer_socket(comm.store.port)
        if fd is not None:
            _stamp(stamp)
            with socket.socket(fileno=os.dup(fd)) as s:
                s.shutdown(socket.SHUT_RDWR)  # the fd stays valid: the runtime sees a dead connection

    if plan["point"] != "inside":
        fire()
        return None
    thread = threading.Thread(target=fire, daemon=True)
    thread.start()
    return thread


def trial_rank(comm, rank, world, plan, tmp):
    """One rank of a trial; returns what it saw."""
    import braze.comm as bc

    fds_before = fd_count()
    with open(os.path.join(tmp, f"pid.{rank}"), "w") as f:
        f.write(str(os.getpid()))  # shm segment names carry their creator's pid
    victim, stamp = plan["victim"], os.path.join(tmp, "fault_time")
    win = comm.new_window(np.zeros(fault_ops.WINDOW_ELEMENTS, np.float32)) if plan["op"] == "window_put" else None
    wrong, error, failed_at, injector = [], None, None, None
    try:
        for i in range(plan["iterations"]):
            if rank == victim and i == plan["at"] and plan["point"] != "between":
                injector = inject(plan, comm, stamp)
            wrong.append(fault_ops.run(comm, plan["op"], i, plan["n"], plan["dtype"], win))
            if rank == victim and i == plan["at"] and plan["point"] == "between":
                injector = inject(plan, comm, stamp)
        if rank == victim and plan["fault"] != "close":
            time.sleep(TIMEOUT + GRACE + 2.0)  # killed or stopped here at the latest
        wrong.append(fault_ops.run(comm, "all_reduce", plan["iterations"], 1, "float32"))  # roll call
    except bc.CommError as exc:
        error, failed_at = exc, time.time()
    if injector is not None:
        injector.join()  # a late socket shutdown must not hit the rebuilt group
    if win is not None:
        win.close()
    out = {"error": type(error).__name__ if error else None, "message": str(error) if error else "",
           "failed_at": failed_at, "wrong": [w for w in wrong if w]}
    survivors = list(range(world)) if plan["fault"] == "close" else [r for r in range(world) if r != victim]
    if rank not in survivors:
        return out
    try:
        comm.reconfigure("recover", survivors)
        out["wrong"].append(fault_ops.run(comm, "all_reduce", 0, 1000, "float32"))
    except bc.CommError as exc:
        out["wrong"].append(f"recovery failed: {type(exc).__name__}: {exc}")
    out["wrong"] = [w for w in out["wrong"] if w]
    out["fds"] = (fds_before, fd_count())
    return out


# -- the harness ---------------------------------------------------------------
def shm_segments():
    return {n for n in os.listdir("/dev/shm") if n.startswith("braze-")}


def random_plan(rng, backends=("shm", "tcp")):
    fault = rng.choices(FAULTS, weights=(6, 2, 2))[0]
    backend = "tcp" if fault == "close" and "tcp" in backends else rng.choice(backends)
    if fault == "close" and backend != "tcp":
        fault = "kill"  # shm ranks have no sockets to close
    world = rng.choice((2, 3, 4))
    iterations = rng.randint(2, 5)
    point = rng.choice(POINTS)
    return {"backend": backend, "world": world, "fault": fault, "op": rng.choice(fault_ops.OPS),
            "victim": rng.randrange(world), "iterations": iterations, "at": rng.randrange(iterations),
            "point": point, "delay_s": rng.uniform(0, 0.003) if point == "inside" else 0.0,
            "n": rng.choice(fault_ops.SIZES), "dtype": rng.choice(fault_ops.DTYPES)}


def run_trial(plan, keep_failed=None) -> dict:
    """Runs one trial; returns the plan with its outcome ("ok" or the first
    check it failed), the detection times and whether braze-fr named the victim.
    With `keep_failed` (a directory), the flight-recorder dumps of a trial that
    failed a check are moved there (as result["dumps"]) for a later look."""
    from braze.comm.launch import spawn_group
    from braze.tools.fr import analyze, load_dumps

    tmp = tempfile.mkdtemp(prefix="braze-faults-")
    dump_dir = os.path.join(tmp, "dumps")
    os.makedirs(dump_dir)
    segments_before = shm_segments()
    victim = plan["victim"]
    result = dict(plan, outcome="ok", detect_ms=[], culprit=None, problems=[])
    try:
        ranks = spawn_group(trial_rank, plan["world"], plan["backend"], args=(plan, tmp), deadline=90,
                            timeout=TIMEOUT, options={"dump_dir": dump_dir},
                            expect_dead=() if plan["fault"] == "close" else (victim,))
    except RuntimeError as exc:
        result["outcome"] = "hang" if "did not finish" in str(exc) else "rank crashed"
        result["problems"].append(str(exc)[-2000:])
        shutil.rmtree(tmp, ignore_errors=True)
        return result
    fault_time = float(open(os.path.join(tmp, "fault_time")).read()) if os.path.exists(
        os.path.join(tmp, "fault_time")) else None
    survivors = {r: v for r, v in ranks.items() if "fds" in v}
    for r, v in survivors.items():
        result["problems"] += [f"rank {r}: {w}" for w in v["wrong"]]
        if v["error"] and fault_time is not None:
            detect = v["failed_at"] - fault_time
            result["detect_ms"].append(detect * 1e3)
            if detect > TIMEOUT + GRACE:
                result["problems"].append(f"rank {r}: error {detect:.2f} s after the fault")
        if v["fds"][1] > v["fds"][0]:
            result["problems"].append(f"rank {r}: {v['fds'][0]} descriptors before, {v['fds'][1]} after")
    if len(survivors) != plan["world"] - (plan["fault"] != "close"):
        result["problems"].append(f"survivors {sorted(survivors)} did not all report")
    if plan["fault"] != "close" and any(v["error"] for v in survivors.values()):
        findings = analyze(load_dumps([dump_dir]))
        culprits = sorted({r for kind, rs, _ in findings if kind != "error" for r in rs})
        if not culprits and any(kind == "unknown" for kind, _, _ in findings):
            result["culprit"] = "cannot tell"  # said plainly, and no wrong rank: not a failed check
        else:
            result["culprit"] = culprits == [victim]
            if not result["culprit"]:
                result["problems"].append(f"braze-fr named {culprits}, not rank {victim}")
    # Other jobs on the machine create segments too: only this trial's count.
    pids = {open(os.path.join(tmp, name)).read() for name in os.listdir(tmp) if name.startswith("pid.")}
    leaked = {seg for seg in shm_segments() - segments_before if seg.split("-")[2] in pids}
    if leaked:
        result["problems"].append(f"/dev/shm segments left: {sorted(leaked)}")
    if result["problems"]:
        result["outcome"] = "failed checks"
        if keep_failed:
            result["dumps"] = tempfile.mkdtemp(prefix="trial-", dir=keep_failed)
            shutil.move(dump_dir, result["dumps"])
    shutil.rmtree(tmp, ignore_errors=True)
    return result


def summarize(results):
    """Rows per (fault, backend): trials, outcomes, culprit named, detection."""
    rows = []
    for fault in FAULTS:
        for backend in ("shm", "tcp"):
            rs = [r for r in results if r["fault"] == fault and r["backend"] == backend]
            if not rs:
                continue
            detects = sorted(d for r in rs for d in r["detect_ms"])
            named = [r["culprit"] for r in rs if r["culprit"] is not None]
            untold = sum(c == "cannot tell" for c in named)
            rows.append({"fault": fault, "backend": backend, "trials": len(rs),
                         "ok": sum(r["outcome"] == "ok" for r in rs),
                         "hang": sum(r["outcome"] == "hang" for r in rs),
                         "crashed": sum(r["outcome"] == "rank crashed" for r in rs),
                         "failed": sum(r["outcome"] == "failed checks" for r in rs),
                         "culprit": (f"{sum(c is True for c in named)}/{len(named)}"
                                     + (f" ({untold} cannot tell)" if untold else "")) if named else "n/a",
                         "median_ms": detects[len(detects) // 2] if detects else None,
                         "worst_ms": detects[-1] if detects else None})
    return rows


def markdown(results, command, seconds):
    rows = summarize(results)
    fmt = lambda v: "n/a" if v is None else f"{v:.0f}"  # noqa: E731
    lines = ["## Communication: fault injection", "",
             f"{len(results)} randomized trials in {seconds / 60:.1f} min on {os.cpu_count()} cores "
             f"(op timeout {TIMEOUT:.0f} s). Command:", "", f"    {command}", "",
             "Each trial: 2-4 ranks run one op kind (every collective, send/recv, uneven all_to_all, window "
             "puts, reconfigure) with checked results; one victim is killed (SIGKILL), stopped (SIGSTOP, "
             "SIGCONT after the timeout) or has a socket shut down, before, inside or between ops. A trial is "
             "ok when every survivor failed within timeout + 1 s or finished correctly, the survivors "
             "reconfigured and ran a correct all_reduce, no survivor holds more descriptors than at its "
             "start and /dev/shm holds no new segment. braze-fr must name the victim (kill, stop) or say it cannot tell; "
             "naming another rank fails the trial. Detection: from the fault to the survivor's error.",
             "", "| fault | backend | trials | ok | hang | rank crashed | failed checks | braze-fr named the "
             "victim | detection median (ms) | detection worst (ms) |", "|" + " --- |" * 10]
    for r in rows:
        lines.append(f"| {r['fault']} | {r['backend']} | {r['trials']} | {r['ok']} | {r['hang']} | {r['crashed']} "
                     f"| {r['failed']} | {r['culprit']} | {fmt(r['median_ms'])} | {fmt(r['worst_ms'])} |")
    failures = [r for r in results if r["outcome"] != "ok"]
    if failures:
        lines += ["", "Trials that failed a check:", ""]
        for r in failures[:20]:
            what = {k: r[k] for k in ("backend", "world", "fault", "op", "victim", "point", "n", "dtype")}
            lines.append(f"- {what}: {r['outcome']}: {'; '.join(r['problems'])[:300]}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--results", default=os.path.join(HERE, "..", "RESULTS.md"))
    parser.add_argument("--log", default=os.path.join(HERE, "faults.jsonl"),
                        help="one JSON line per trial, written as the campaign goes")
    parser.add_argument("--keep-failed", metavar="DIR",
                        help="keep the flight-recorder dumps of trials that fail a check under DIR")
    parser.add_argument("--from-log", action="store_true",
                        help="only render the results section from --log (e.g. of a campaign cut short)")
    args = parser.parse_args()
    command = f"python benchmarks/comm/faults.py --trials {args.trials} --seed {args.seed}"
    if args.from_log:
        with open(args.log) as f:
            logged = [json.loads(line) for line in f]
        write_section(args.results, markdown(logged, command, sum(r["seconds"] for r in logged)), SECTION)
        return
    os.environ.setdefault("BRAZE_COMM_SECRET", secrets.token_hex(32))
    if args.keep_failed:
        os.makedirs(args.keep_failed, exist_ok=True)
    rng = random.Random(args.seed)
    results, start = [], time.monotonic()
    with open(args.log, "w") as log:
        for t in range(args.trials):
            began = time.monotonic()
            r = run_trial(random_plan(rng), args.keep_failed)
            r["seconds"] = time.monotonic() - began
            results.append(r)
            log.write(json.dumps(r) + "\n")
            log.flush()
            print(f"[{t + 1}/{args.trials}] {r['backend']} x{r['world']} {r['fault']} {r['op']} {r['point']}: "
                  f"{r['outcome']} {'; '.join(r['problems'])[:200]}", flush=True)
    section = markdown(results, command, time.monotonic() - start)
    write_section(args.results, section, SECTION)
    print(section)


if __name__ == "__main__":
    main()
