"""Index-set splitting of a pointwise kernel: the ranges of one domain dim
over which every comparison of its index with a constant keeps one value.

A concatenation read inside a kernel is a chain of selects, one per input,
each on `index < offset`, over loads at clamped positions: every point loads
from every input and keeps one. DenseNet's blocks concatenate up to 32
inputs, so each point cost 32 loads, 64 clamps and 32 selects. Within one
input's range of the concatenated dim each comparison is known, each select
takes one side, and each clamp is the identity: what is left is one load at
a position linear in the index (a contiguous vector load along the SIMD
loop). `segments(analysis)` computes those ranges and what the body is on
each, by interval arithmetic on the body's integer values; a renderer then
spells one loop (or one branch) per range. The numbers are unchanged: the
same loads and arithmetic, without the ones whose results a select dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mlir import ir

from braze.codegen.analysis import KernelAnalysis

# More ranges than this are not split (the code grows with the ranges).
MAX_SEGMENTS = 64

# arith.cmpi predicates: eq, ne, slt, sle, sgt, sge, ult, ule, ugt, uge.
_SWAPPED = {0: 0, 1: 1, 2: 4, 3: 5, 4: 2, 5: 3, 6: 8, 7: 9, 8: 6, 9: 7}


@dataclass
class Segment:
    """Indices [start, end) of the split dim (`end` None: to its extent):
    the results that equal one of their operands there (`aliases`) and the
    ops the stores need there, in block order (`ops`)."""

    start: int
    end: int | None
    aliases: dict = field(default_factory=dict)
    ops: list = field(default_factory=list)


@dataclass
class SegmentPlan:
    dim: int
    segments: list[Segment]
    resolved_selects: int  # over all segments


def _split_points(predicate: int, constant: int) -> list[int]:
    """Where `index <predicate> constant` may change value."""
    if predicate in (0, 1):
        return [constant, constant + 1]
    return [constant + 1 if predicate in (3, 4, 7, 8) else constant]


def _constant(value: ir.Value) -> int | None:
    owner = value.owner
    if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
        owner = owner.operation
    if isinstance(owner, ir.Operation) and owner.name == "arith.constant":
        attribute = owner.attributes["value"]
        if isinstance(attribute, (ir.IntegerAttr, ir.BoolAttr)):
            return int(attribute.value)
    return None


def _compared_dims(a: KernelAnalysis) -> dict[int, set[int]]:
    """Parallel dim -> the points where a comparison of its index with a
    constant may change value."""
    points: dict[int, set[int]] = {}
    for op in a.ops:
        if op.operation.name != "arith.cmpi":
            continue
        lhs, rhs = op.operation.operands
        predicate = op.attributes["predicate"].value
        dim, constant = a.index_dim(lhs), _constant(rhs)
        if dim is None:
            dim, constant, predicate = a.index_dim(rhs), _constant(lhs), _SWAPPED[predicate]
        if dim is None or constant is None or dim in a.reduce:
            continue
        extent = a.domain[dim]
        for point in _split_points(predicate, constant):
            if 0 < point and (extent is None or point < extent):
                points.setdefault(dim, set()).add(point)
    return points


def _decide(predicate: int, a: tuple, b: tuple) -> bool | None:
    """The comparison of two integers in the intervals `a` and `b`, when the
    intervals decide it."""
    if predicate >= 6:  # unsigned: as signed where both are non-negative
        if a[0] < 0 or b[0] < 0:
            return None
        predicate -= 4
    (alo, ahi), (blo, bhi) = a, b
    if predicate in (0, 1):
        if alo == ahi == blo == bhi:
            return predicate == 0
        if ahi < blo or bhi < alo:
            return predicate == 1
        return None
    if predicate in (4, 5):  # a > b is b < a
        (alo, ahi), (blo, bhi), predicate = b, a, predicate - 2
    if predicate == 2:
        return True if ahi < blo else False if alo >= bhi else None
    return True if ahi <= blo else False if alo > bhi else None


class _Evaluation:
    """The body over one segment: intervals of the integer values, and the
    results that equal an operand."""

    def __init__(self, a: KernelAnalysis, dim: int, start: int, end: int | None):
        self.interval: dict[ir.Value, tuple] = {}
        self.aliases: dict[ir.Value, ir.Value] = {}
        for d in range(a.rank):
            top = math.inf if a.domain[d] is None else a.domain[d] - 1
            self.interval[a.arguments[d]] = (start, top if end is None else end - 1) if d == dim else (0, top)
        self.resolved = 0
        for op in a.ops:
            self.visit(op)

    def value(self, value: ir.Value) -> ir.Value:
        return self.aliases.get(value, value)

    def visit(self, op) -> None:
        name = op.operation.name
        results = list(op.operation.results)
        if not results:
            return
        result = results[0]
        operands = [self.value(v) for v in op.operation.operands]
        known = [self.interval.get(v) for v in operands]
        if name == "arith.select":
            condition = known[0]
            if condition is not None and condition[0] == condition[1]:
                self.aliases[result] = operands[1] if condition[0] else operands[2]
                self.resolved += 1
            elif known[1] is not None and known[2] is not None:
                self.interval[result] = (min(known[1][0], known[2][0]), max(known[1][1], known[2][1]))
        elif str(result.type) not in ("index", "i1"):
            return  # integers of a width wrap: no interval holds them
        elif name == "arith.constant":
            constant = _constant(result)
            if constant is not None:
                self.interval[result] = (constant, constant)
        elif name in ("arith.andi", "arith.ori") and str(result.type) == "i1":
            # false absorbs an and, true an or; the other value is neutral.
            absorbing = (0, 0) if name == "arith.andi" else (1, 1)
            neutral = (1 - absorbing[0],) * 2
            if absorbing in known:
                self.interval[result] = absorbing
            elif known[0] == neutral:
                self.aliases[result] = operands[1]
            elif known[1] == neutral:
                self.aliases[result] = operands[0]
        elif None in known:
            return
        elif name == "arith.cmpi":
            decided = _decide(op.attributes["predicate"].value, *known)
            if decided is not None:
                self.interval[result] = (int(decided),) * 2
        elif name == "arith.addi":
            self.interval[result] = (known[0][0] + known[1][0], known[0][1] + known[1][1])
        elif name == "arith.subi":
            self.interval[result] = (known[0][0] - known[1][1], known[0][1] - known[1][0])
        elif name == "arith.muli" and all(math.isfinite(x) for bound in known for x in bound):
            products = [x * y for x in known[0] for y in known[1]]
            self.interval[result] = (min(products), max(products))
        elif name in ("arith.maxsi", "arith.minsi"):
            larger = name == "arith.maxsi"
            (alo, ahi), (blo, bhi) = known
            if (alo >= bhi) if larger else (ahi <= blo):
                self.aliases[result] = operands[0]
            elif (blo >= ahi) if larger else (bhi <= alo):
                self.aliases[result] = operands[1]
            else:
                pick = max if larger else min
                self.interval[result] = (pick(alo, blo), pick(ahi, bhi))


def _live_ops(a: KernelAnalysis, evaluation: _Evaluation) -> list:
    """The ops the stores need on the segment, in block order (a result
    that equals an operand there is that operand, and its op is not
    needed)."""
    live: set = set()
    needed: list = []
    for op in reversed(a.ops):
        results = list(op.operation.results)
        if op.operation.name == "braze.store" or any(r in live for r in results):
            needed.append(op)
            live.update(evaluation.value(v) for v in op.operation.operands)
    needed.reverse()
    return needed


def segments(a: KernelAnalysis) -> SegmentPlan | None:
    """The split of the parallel dim whose index the most comparisons
    with constants read, when it resolves a select; None otherwise (a
    reduction, no such comparison, or more than MAX_SEGMENTS ranges)."""
    if a.reduce:
        return None
    compared = _compared_dims(a)
    if not compared:
        return None
    dim = max(compared, key=lambda d: (len(compared[d]), d))
    points = sorted(compared[dim])
    if len(points) + 1 > MAX_SEGMENTS:
        return None
    bounds = [0, *points, None]
    plan = SegmentPlan(dim, [], 0)
    for start, end in zip(bounds, bounds[1:]):
        evaluation = _Evaluation(a, dim, start, end)
        plan.resolved_selects += evaluation.resolved
        plan.segments.append(Segment(start, end, evaluation.aliases, _live_ops(a, evaluation)))
    return plan if plan.resolved_selects else None


def unresolved_selects(plan: SegmentPlan) -> bool:
    """Whether a select is left on some segment (its condition does not
    depend on the split dim alone)."""
    return any(op.operation.name == "arith.select" and op.operation.results[0] not in segment.aliases
               for segment in plan.segments for op in segment.ops)
