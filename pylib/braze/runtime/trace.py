"""Execution traces: `with braze.profile("trace.json"):` records every call
of a compiled program and each of its steps (kernels and combos by
the names the compile report gives them, host ops, views, extern aten
calls, control flow and its regions, collectives and their waits), and
every compile in the block (its stages and each pass), one lane per
thread, and writes Chrome trace JSON that Perfetto and chrome://tracing
open. A process running a distributed program is the lane of its rank
(`pid` = the global rank), so the traces of all ranks can be shown
together. While a torch.profiler profile is recording, each step and
compile stage is also a `record_function` range, so braze's events appear
in torch's trace.

The executor checks `tracer` once per call; while no profile is open it
is None and nothing else happens.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from braze.errors import BrazeError

# The open profile, or None.
tracer: "Tracer | None" = None


class Tracer:
    """The events of one `braze.profile`, in Chrome's trace event format
    (complete events, "ph": "X", times in microseconds; the process id is
    filled in when the trace is written)."""

    def __init__(self):
        self.events: list[dict] = []
        self.threads: dict[int, str] = {}
        self.origin = time.perf_counter_ns()
        # Per program: the program (kept, so its id stays its own) and each step's event.
        self.names: dict[int, tuple[object, list[tuple[str, str, dict]]]] = {}
        # The process groups of the traced programs' collectives, until one
        # of them gives this process's global rank (`process_rank`).
        self.groups: list = []
        self.process_rank: int | None = None

    def _now(self) -> float:
        return (time.perf_counter_ns() - self.origin) / 1e3

    def _thread(self) -> int:
        thread = threading.get_native_id()
        if thread not in self.threads:
            self.threads[thread] = threading.current_thread().name
        return thread

    def complete(self, name: str, category: str, started_ns: int, ended_ns: int, args: dict) -> None:
        """An event of the calling thread that ran from `started_ns` to
        `ended_ns` (time.perf_counter_ns())."""
        self.events.append({"name": name, "cat": category, "ph": "X", "ts": (started_ns - self.origin) / 1e3,
                            "dur": (ended_ns - started_ns) / 1e3, "tid": self._thread(), "args": args})

    def passes(self, runs) -> None:
        """Each pass a compile ran (run_pipeline's PassRun records)."""
        for run in runs:
            self.complete(run.name, "compile", run.started_ns, run.started_ns + int(run.seconds * 1e9),
                          {"pipeline": run.pipeline, "ops_before": run.ops_before, "ops_after": run.ops_after})

    def _step_events(self, program) -> list[tuple[str, str, dict]]:
        """Each step's (name, category, args), worked out once per program."""
        from braze.runtime import executor
        from braze.runtime.collectives import StartCall, WaitCall
        from braze.runtime.combo import ComboCall
        from braze.runtime.control_flow import SwitchCall, WhileCall

        events = []
        for step in program.steps:
            call = step.run
            if isinstance(call, executor._ExternCall):
                events.append((call.target, "extern", {}))
            elif isinstance(call, executor._ViewCall):
                events.append((call.name, "view", {}))
            elif isinstance(call, executor._HostCall):
                events.append((call.name, "host", {}))
            elif isinstance(call, ComboCall):  # one launch: named after its sub-kernels
                events.append((" + ".join(sub.name for sub in call.calls), "kernel", {}))
            elif isinstance(call, (SwitchCall, WhileCall)):  # its regions' calls nest inside
                events.append((call.name, "control", {"location": call.location}))
            elif isinstance(call, StartCall):
                if call.group not in self.groups:
                    self.groups.append(call.group)
                events.append((call.name, "collective", {"group": call.group.name, "location": call.location}))
            elif isinstance(call, WaitCall):
                events.append((f"braze.wait ({call.collective})", "wait",
                               {"group": call.group_name, "location": call.location}))
            else:  # a kernel
                location = getattr(call, "location", None)
                events.append((call.name, "kernel", {"location": location} if location else {}))
        return events

    def _learn_rank(self) -> None:
        """This process's global rank, from the communicator of a traced
        collective's group (it has one after the program's first call):
        asked while the communicator is open."""
        for group in self.groups:
            if group.comm is not None:
                self.process_rank = group.ranks[group.comm.rank]
                return

    def rank(self) -> int | None:
        """This process's global rank: as a traced collective's
        communicator gave it, else torch.distributed's; None when neither
        knows."""
        if self.process_rank is not None:
            return self.process_rank
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank()
        return None

    def run(self, program, env: list) -> None:
        """Runs `program`'s steps on `env` (as Program.__call__ does),
        recording the call and each step."""
        known = self.names.get(id(program))
        if known is None:
            known = self.names[id(program)] = (program, self._step_events(program))
        names = known[1]
        thread = self._thread()
        ranges = torch.autograd._profiler_enabled()
        events = self.events
        call_start = self._now()
        for step, (name, category, args) in zip(program.steps, names):
            started = self._now()
            if ranges:
                with torch.profiler.record_function(f"braze: {name}"):
                    step.run(env)
            else:
                step.run(env)
            events.append({"name": name, "cat": category, "ph": "X", "ts": started, "dur": self._now() - started,
                           "tid": thread, "args": args})
            for slot_number in step.release:
                env[slot_number] = None
        events.append({"name": program.name, "cat": program.kind, "ph": "X", "ts": call_start,
                       "dur": self._now() - call_start, "tid": thread, "args": {"steps": len(names)}})
        if self.groups and self.process_rank is None:
            self._learn_rank()

    def trace(self) -> dict:
        rank = self.rank()
        pid = os.getpid() if rank is None else rank
        process = "braze" if rank is None else f"braze rank {rank}"
        metadata = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": process}}]
        if rank is not None:  # ranks in order in a merged trace
            metadata.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                             "args": {"sort_index": rank}})
        metadata += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
                     for tid, name in self.threads.items()]
        # Chrome nests complete events by time on one lane: a call before its steps.
        ordered = sorted(self.events, key=lambda e: (e["tid"], e["ts"], -e["dur"]))
        return {"traceEvents": metadata + [{**event, "pid": pid} for event in ordered], "displayTimeUnit": "ms"}


@contextmanager
def compile_stage(name: str, args: dict | None = None):
    """A compile's stage (category `compile`) in the open profile, and a
    `record_function` range while torch.profiler records; nothing without
    a profile. `args` (filled in by the block, if it likes) go with the
    event."""
    current = tracer
    if current is None:
        yield
        return
    started = time.perf_counter_ns()
    try:
        if torch.autograd._profiler_enabled():
            with torch.profiler.record_function(f"braze: {name}"):
                yield
        else:
            yield
    finally:
        current.complete(name, "compile", started, time.perf_counter_ns(), args or {})


@contextmanager
def profile(path: str | os.PathLike | None = None):
    """Traces the compiled programs called inside the `with` block and
    writes the trace to `path` (Chrome trace JSON) when it ends. Without a
    path, only torch.profiler (when it records) sees braze's steps.
    Yields the Tracer (its `trace()` is the JSON's content)."""
    global tracer
    if tracer is not None:
        raise BrazeError("braze.profile is already open: profiles do not nest")
    tracer = current = Tracer()
    try:
        yield current
    finally:
        tracer = None
        if path is not None:
            try:
                Path(path).write_text(json.dumps(current.trace()))
            except OSError as error:
                raise BrazeError(f"cannot write the trace to {str(path)!r}: {error}") from None
