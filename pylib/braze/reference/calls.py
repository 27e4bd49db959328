"""Ops with a callee or a region: `func.call`, `braze.group`, `braze.switch`
and `braze.while`."""

from __future__ import annotations

from braze.hostops.control_flow import branch_number, condition_holds
from braze.reference.registry import handles


@handles("func.call")
def call(op, operands, interpreter):
    callee = op.attributes["callee"].value
    return interpreter.call(callee, operands, caller=op)


@handles("braze.group")
def group(op, operands, interpreter):
    # A fusion group computes exactly what its body's ops compute.
    return interpreter.run_region(op, operands, "braze.yield")


@handles("braze.switch")
def switch(op, operands, interpreter):
    index, *inputs = operands
    branch = branch_number(index, len(op.regions))
    return interpreter.run_region(op, inputs, "braze.yield", branch)


@handles("braze.while")
def while_(op, operands, interpreter):
    carried_count = len(op.operation.results)
    carried, extras = operands[:carried_count], operands[carried_count:]
    while condition_holds(interpreter.run_region(op, carried + extras, "braze.yield", 0)[0]):
        carried = interpreter.run_region(op, carried + extras, "braze.yield", 1)
    return carried
