"""Ops with a callee or a region: `func.call` and `braze.group`."""

from __future__ import annotations

from braze.reference.registry import handles


@handles("func.call")
def call(op, operands, interpreter):
    callee = op.attributes["callee"].value
    return interpreter.call(callee, operands, caller=op)


@handles("braze.group")
def group(op, operands, interpreter):
    # A fusion group computes exactly what its body's ops compute.
    return interpreter.run_region(op, operands, "braze.yield")
