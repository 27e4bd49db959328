"""Which steps of a `Program` copy tensor data on the host.

A layout that no strided view expresses costs a torch copy somewhere: a
reshape that cannot be a view, a kernel input made contiguous first, a
library call copying an operand it cannot read in place (addmm's start
from the broadcast bias, its bias add, and dtype conversions are not
counted). braze-fold-layouts
aims at none; `host_copies` finds the ones left, per step, by watching one
call under torch's profiler (every data copy in torch ends in `aten::copy_`).
It is a diagnostic, slow by design; the executor's call loop is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch.profiler import ProfilerActivity, profile

from braze.runtime.executor import Program, _Step

_COPY = "aten::copy_"
# Copies that are no layout's: torch.addmm starts its result as the
# broadcast bias and lets the GEMM accumulate onto it (the bias add), and a
# dtype conversion (`.to`, as attention's boolean mask becomes additive)
# writes new values.
_NOT_LAYOUT = {"aten::addmm", "aten::_to_copy"}


@dataclass(frozen=True)
class HostCopy:
    """One step that copied: its number in the program and what it runs
    (an op name, or a kernel's name), and how many copies it made."""

    step: int
    name: str
    copies: int


class _Watched:
    def __init__(self, run, number: int, found: list[HostCopy]):
        self.run, self.number, self.found = run, number, found
        self.name = getattr(run, "name", type(run).__name__)

    def __call__(self, env: list) -> None:
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            self.run(env)
        copies = sum(event.name == _COPY and not (event.cpu_parent and event.cpu_parent.name in _NOT_LAYOUT)
                     for event in profiler.events())
        if copies:
            self.found.append(HostCopy(self.number, self.name, copies))


def host_copies(program: Program, *arguments) -> list[HostCopy]:
    """Calls `program` once on `arguments` and returns the steps that copied
    tensor data through torch (empty when none did). Outputs that alias an
    input are copied after the steps, as the executor's contract requires;
    those copies are not counted."""
    found: list[HostCopy] = []
    steps = program.steps
    program.steps = [_Step(_Watched(step.run, number, found), step.release)
                     for number, step in enumerate(steps)]
    try:
        program(*arguments)
    finally:
        program.steps = steps
    return found
