"""Steps for `braze.switch` and `braze.while`: each region is built once,
when the program is, as a nested step program over its block (its kernels
compiled with the rest of the function); a call reads the index or the
condition from a tensor and runs the region it selects.

Region results that could alias an input are copies (as a function's
outputs are), so a control-flow op's results are fresh tensors the
executor may reuse like a kernel's.
"""

from __future__ import annotations

from typing import Callable

from braze.errors import BrazeError, format_location
from braze.hostops.control_flow import branch_number, condition_holds


class _ControlFlowCall:
    def __init__(self, op, slots: dict, build: Callable):
        self.name = op.operation.name
        self.location = format_location(op.operation.location)
        self.operands = [slots[v] for v in op.operation.operands]
        self.results = [slots[v] for v in op.operation.results]
        self.regions = [build(region.blocks[0]) for region in op.operation.regions]
        for region, part in zip(self.regions, self._parts()):
            region.name = f"{self.name} {part}"  # as traces name its calls
        self.kernel_count = sum(region.kernel_count for region in self.regions)

    def _run(self, region, arguments: list) -> list:
        try:
            return region.run(arguments)
        except BrazeError as error:
            raise BrazeError(f"{error.message} (in a region of {self.name} at {self.location})") from None


class SwitchCall(_ControlFlowCall):
    """Runs the branch the rank-0 index tensor selects (clamped)."""

    def _parts(self):
        return (f"branch {number}" for number in range(len(self.regions)))

    def __call__(self, env: list) -> None:
        index, *inputs = [env[s] for s in self.operands]
        branch = self.regions[branch_number(index, len(self.regions))]
        for slot, value in zip(self.results, self._run(branch, inputs)):
            env[slot] = value


class WhileCall(_ControlFlowCall):
    """Runs the body while the condition region yields true."""

    def _parts(self):
        return ("condition", "body")

    def __call__(self, env: list) -> None:
        values = [env[s] for s in self.operands]
        carried, extras = values[:len(self.results)], values[len(self.results):]
        condition, body = self.regions
        if not condition_holds(self._run(condition, carried + extras)[0]):
            carried = [value.clone() for value in carried]  # zero iterations: the results are the inputs
        else:
            carried = self._run(body, carried + extras)
            while condition_holds(self._run(condition, carried + extras)[0]):
                carried = self._run(body, carried + extras)
        for slot, value in zip(self.results, carried):
            env[slot] = value


def control_flow_call(op, slots: dict, build: Callable):
    """The step running `op` (braze.switch or braze.while); `build(block)`
    makes the step program of one of its regions."""
    if op.operation.name == "braze.switch":
        return SwitchCall(op, slots, build)
    return WhileCall(op, slots, build)
