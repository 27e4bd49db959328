"""Execution traces: `with braze.profile("trace.json"):` records every call
of a compiled program and each of its steps (kernels and combos by
the names the compile report gives them, host ops, views, extern aten
calls), one lane per thread, and writes Chrome trace JSON that Perfetto
and chrome://tracing open. While a torch.profiler profile is recording,
each step is also a `record_function` range, so braze's steps appear in
torch's trace.

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
    (complete events, "ph": "X", times in microseconds)."""

    def __init__(self):
        self.events: list[dict] = []
        self.threads: dict[int, str] = {}
        self.pid = os.getpid()
        self.origin = time.perf_counter_ns()
        # Per program: the program (kept, so its id stays its own) and each step's event.
        self.names: dict[int, tuple[object, list[tuple[str, str, dict]]]] = {}

    def _now(self) -> float:
        return (time.perf_counter_ns() - self.origin) / 1e3

    def _step_events(self, program) -> list[tuple[str, str, dict]]:
        """Each step's (name, category, args), worked out once per program."""
        from braze.runtime import executor
        from braze.runtime.combo import ComboCall

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
            else:  # a kernel, or a control-flow op (braze.switch, braze.while)
                location = getattr(call, "location", None)
                events.append((call.name, "kernel", {"location": location} if location else {}))
        return events

    def run(self, program, env: list) -> None:
        """Runs `program`'s steps on `env` (as Program.__call__ does),
        recording the call and each step."""
        known = self.names.get(id(program))
        if known is None:
            known = self.names[id(program)] = (program, self._step_events(program))
        names = known[1]
        thread = threading.get_native_id()
        if thread not in self.threads:
            self.threads[thread] = threading.current_thread().name
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
                           "pid": self.pid, "tid": thread, "args": args})
            for slot_number in step.release:
                env[slot_number] = None
        events.append({"name": program.name, "cat": "call", "ph": "X", "ts": call_start,
                       "dur": self._now() - call_start, "pid": self.pid, "tid": thread,
                       "args": {"steps": len(names)}})

    def trace(self) -> dict:
        metadata = [{"name": "process_name", "ph": "M", "pid": self.pid, "tid": 0, "args": {"name": "braze"}}]
        metadata += [{"name": "thread_name", "ph": "M", "pid": self.pid, "tid": tid, "args": {"name": name}}
                     for tid, name in self.threads.items()]
        # Chrome nests complete events by time on one lane: a call before its steps.
        ordered = sorted(self.events, key=lambda e: (e["tid"], e["ts"], -e["dur"]))
        return {"traceEvents": metadata + ordered, "displayTimeUnit": "ms"}


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
