"""Index-set splitting of a pointwise kernel: the ranges of its dims over
which every comparison of an index (times and plus constants) with a
constant keeps one value.

A concatenation read inside a kernel is a chain of selects, one per input,
each on `index < offset`, over loads at clamped positions: every point loads
from every input and keeps one. DenseNet's blocks concatenate up to 32
inputs, so each point cost 32 loads, 64 clamps and 32 selects. Within one
input's range of the concatenated dim each comparison is known, each select
takes one side, and each clamp is the identity: what is left is one load at
a position linear in the index (a contiguous vector load along the SIMD
loop). A padded window (pooling, F.pad) is the same along its outer dims:
inside the padding's borders every tap is in range. `segments(analysis)`
computes the ranges and what the body is on each, by interval arithmetic on
the body's integer values: every range of the innermost dim, and for the
outer dims the box of their longest ranges against everything else (a
border's rows are few points, not worth a loop each). A renderer spells one
loop per range. The numbers are unchanged: the same loads and arithmetic,
without the ones whose results a select dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mlir import ir

from braze.codegen.analysis import KernelAnalysis

# An innermost dim with more ranges than this is not split (each range is
# one more loop to compile).
MAX_SEGMENTS = 64

_DIVISIONS = ("arith.divsi", "arith.divui", "arith.remsi", "arith.remui")

# arith.cmpi predicates: eq, ne, slt, sle, sgt, sge, ult, ule, ugt, uge.
_SWAPPED = {0: 0, 1: 1, 2: 4, 3: 5, 4: 2, 5: 3, 6: 8, 7: 9, 8: 6, 9: 7}


@dataclass
class Segment:
    """One range [start, end) of the innermost dim (`end` None: to its
    extent; the whole dim when it is not split): the results that equal one
    of their operands there (`aliases`), or one minus a constant
    (`offsets`), and the ops the stores need there, in block order
    (`ops`)."""

    start: int
    end: int | None
    aliases: dict = field(default_factory=dict)
    ops: list = field(default_factory=list)
    # result -> (operand, k): the result is `operand - k` there (a
    # remainder whose quotient the range fixes: the place in one piece).
    offsets: dict = field(default_factory=dict)


@dataclass
class SegmentPlan:
    """`inner_dim`: the innermost dim when it is split (None otherwise);
    `interior`: each split outer dim's longest range (a window's or a
    padding's inside), whose box takes `inside`, one segment per range of
    the innermost dim; elsewhere `outside` (empty without an interior box).
    The outer dims' other ranges (a padded border's rows) are no loops of
    their own: each would be one more vectorised loop to compile for a few
    points."""

    inner_dim: int | None
    interior: dict[int, tuple]
    inside: list[Segment]
    outside: list[Segment]
    resolved_selects: int


def _split_points(predicate: int, scale: int, bound: int) -> list[int]:
    """Where `scale * index <predicate> bound` may change value (scale > 0)."""
    below = -(-bound // scale)  # the first index with scale * index >= bound
    above = bound // scale + 1  # the first index with scale * index > bound
    if predicate in (0, 1):
        return [bound // scale, above] if bound % scale == 0 else []
    return [above if predicate in (3, 4, 7, 8) else below]


def _constant(value: ir.Value) -> int | None:
    owner = value.owner
    if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
        owner = owner.operation
    if isinstance(owner, ir.Operation) and owner.name == "arith.constant":
        attribute = owner.attributes["value"]
        if isinstance(attribute, (ir.IntegerAttr, ir.BoolAttr)):
            return int(attribute.value)
    return None


def _affine_index(a: KernelAnalysis, value: ir.Value) -> tuple[int, int, int] | None:
    """(dim, scale, offset) when `value` is a domain index times a positive
    constant plus a constant (a strided window's tap, a padding's shift)."""
    dim = a.index_dim(value)
    if dim is not None:
        return dim, 1, 0
    owner = value.owner
    name = getattr(owner, "name", None)
    if name not in ("arith.addi", "arith.subi", "arith.muli"):
        return None
    lhs, rhs = owner.operands
    inner, constant = _affine_index(a, lhs), _constant(rhs)
    if inner is None and name != "arith.subi":
        inner, constant = _affine_index(a, rhs), _constant(lhs)
    if inner is None or constant is None:
        return None
    dim, scale, offset = inner
    if name == "arith.muli":
        return (dim, scale * constant, offset * constant) if constant > 0 else None
    return dim, scale, offset + (constant if name == "arith.addi" else -constant)


def _quotient(a: KernelAnalysis, value: ir.Value) -> tuple[int, int, int, int] | None:
    """(dim, scale, offset, divisor) when `value` is a non-negative affine
    index divided by a positive constant: the piece number of a
    concatenation of equal pieces."""
    owner = value.owner
    if getattr(owner, "name", None) not in ("arith.divsi", "arith.divui"):
        return None
    index, divisor = _affine_index(a, owner.operands[0]), _constant(owner.operands[1])
    if index is None or divisor is None or divisor <= 0 or index[2] < 0:
        return None
    return (*index, divisor)


def _comparison_points(a: KernelAnalysis, value: ir.Value, predicate: int, constant: int) -> tuple | None:
    """(dim, the points of its index where `value <predicate> constant`
    may change value), when `value` is an affine index or its quotient."""
    index = _affine_index(a, value)
    if index is not None:
        dim, scale, offset = index
        return dim, _split_points(predicate, scale, constant - offset)
    quotient = _quotient(a, value)
    if quotient is None:
        return None
    # floor(y / d) against b changes where y crosses b * d or (b + 1) * d.
    dim, scale, offset, divisor = quotient
    return dim, [point for bound in (constant * divisor, (constant + 1) * divisor)
                 for point in _split_points(2, scale, bound - offset)]


def _compared_dims(a: KernelAnalysis) -> dict[int, set[int]]:
    """Dim -> the points where a comparison of its index (times and plus
    constants, or that divided by a constant) with a constant may change
    value."""
    points: dict[int, set[int]] = {}
    for op in a.ops:
        if op.operation.name != "arith.cmpi":
            continue
        lhs, rhs = op.operation.operands
        predicate = op.attributes["predicate"].value
        found = None
        if _constant(rhs) is not None:
            found = _comparison_points(a, lhs, predicate, _constant(rhs))
        if found is None and _constant(lhs) is not None:
            found = _comparison_points(a, rhs, _SWAPPED[predicate], _constant(lhs))
        if found is None:
            continue
        dim, dim_points = found
        extent = a.domain[dim]
        for point in dim_points:
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

    def __init__(self, a: KernelAnalysis, box: dict[int, tuple]):
        self.interval: dict[ir.Value, tuple] = {}
        self.aliases: dict[ir.Value, ir.Value] = {}
        self.offsets: dict[ir.Value, tuple] = {}
        for d in range(a.rank):
            top = math.inf if a.domain[d] is None else a.domain[d] - 1
            start, end = box.get(d, (0, None))
            self.interval[a.arguments[d]] = (start, top if end is None else end - 1)
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
        elif name in _DIVISIONS and known[0][0] >= 0 and known[1][0] == known[1][1] > 0:
            # A non-negative value divided by a positive constant (a piece
            # of equal pieces, and the place within it).
            (lo, hi), divisor = known[0], known[1][0]
            quotients = (lo // divisor, hi if math.isinf(hi) else hi // divisor)
            if name in ("arith.divsi", "arith.divui"):
                self.interval[result] = quotients
            elif quotients[0] == quotients[1]:
                self.interval[result] = (lo % divisor, hi % divisor)
                if quotients[0] == 0:
                    self.aliases[result] = operands[0]
                else:
                    self.offsets[result] = (operands[0], quotients[0] * divisor)
            else:
                self.interval[result] = (0, divisor - 1)
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


def _ranges(points: set[int]) -> list[tuple]:
    bounds = [0, *sorted(points), None]
    return list(zip(bounds, bounds[1:]))


def _longest(ranges: list[tuple], extent: int | None) -> tuple:
    return max(ranges, key=lambda r: (math.inf if extent is None else extent) - r[0] if r[1] is None else r[1] - r[0])


def segments(a: KernelAnalysis) -> SegmentPlan | None:
    """The split of a pointwise kernel by the comparisons of its indices
    with constants, when it resolves a select; None otherwise (a reduction,
    no such comparison)."""
    if a.reduce:
        return None
    compared = _compared_dims(a)
    last = a.rank - 1
    inner = compared.pop(last, None)
    if inner is not None and len(inner) + 1 > MAX_SEGMENTS:
        inner = None
    if inner is None and not compared:
        return None
    interior = {dim: _longest(_ranges(points), a.domain[dim]) for dim, points in sorted(compared.items())}
    plan = SegmentPlan(None if inner is None else last, interior, [], [], 0)
    ranges = _ranges(inner) if inner is not None else [(0, None)]
    for box, segments_of in [(interior, plan.inside)] + ([({}, plan.outside)] if interior else []):
        for start, end in ranges:
            evaluation = _Evaluation(a, {**box, last: (start, end)})
            plan.resolved_selects += evaluation.resolved
            segments_of.append(Segment(start, end, evaluation.aliases, _live_ops(a, evaluation),
                                       evaluation.offsets))
    return plan if plan.resolved_selects else None


def reduction_segments(a: KernelAnalysis) -> list[Segment] | None:
    """The split of a row reduction's innermost reduced dim by the
    comparisons of its index with constants, when it resolves a select;
    None otherwise. A normalisation over a concatenation along the reduced
    dim (Swin's patch merging: a LayerNorm over four strided views joined
    along the channels) reads every input at every point of the row, once
    per pass over it; within one input's range each pass reads that input
    alone. Each segment's `aliases` say which values equal an operand
    there; its `ops` are left empty (a reduction's stages each need a part
    of the body, `KernelAnalysis.needed_full_ops`). A column reduction
    (its innermost dim parallel, in SIMD lanes) is not split."""
    if not a.reduce or a.lane_dim is not None:
        return None
    dim = a.reduce[-1]
    points = _compared_dims(a).get(dim)
    if not points or len(points) + 1 > MAX_SEGMENTS:
        return None
    split, resolved = [], 0
    for start, end in _ranges(points):
        evaluation = _Evaluation(a, {dim: (start, end)})
        resolved += evaluation.resolved
        split.append(Segment(start, end, evaluation.aliases, offsets=evaluation.offsets))
    return split if resolved else None
