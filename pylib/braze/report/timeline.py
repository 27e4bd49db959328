"""The collective schedule of one function as a timeline: a compute lane
and one communication lane per process group, for the IR before and after
braze-overlap, drawn as SVG.

Positions come from the IR (the order the executor runs the ops in);
durations from the cost estimates (report/cost.py) on the configured
`Machine`. The model: the compute lane runs one op after another; a start
issues its collective at once (it costs the compute lane nothing), the
collective runs on its group's lane when that lane is free (a group's
collectives run one after another, groups in parallel); a `braze.wait`
holds the compute lane until its collective has ended. So a start and
its wait next to each other leave the compute lane waiting, and compute
between them hides the collective.

The SVG is written here, not by a library: a timeline is a few rows of
rectangles on a time axis. Graphviz lays out graphs (a timeline would
need every coordinate pinned by hand) and a plotting library (matplotlib)
would be a heavy dependency for a chart that is ~60 lines of SVG.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from html import escape

from braze.errors import format_location
from braze.machine import Machine
from braze.op_kinds import GENERATED_OPS
from braze.report import cost

# Dynamic dims count as this many elements in the estimate.
DYNAMIC = 1
# Ops the executor calls a library for (the rest that computes is a
# kernel, an extern call, control flow, or runs through torch).
_LIBRARY = {"braze.matmul", "braze.bmm", "braze.addmm", "braze.convolution", "braze.attention",
            "braze.fused_gemm", "braze.flash_attention"}


@dataclass
class Span:
    lane: str  # "compute", or "group <name>"
    name: str
    kind: str  # kernel, library, extern, control, host, collective, wait
    start: float  # seconds from the call's start
    end: float
    detail: str  # the tooltip


@dataclass
class Schedule:
    title: str
    spans: list[Span] = field(default_factory=list)
    lanes: list[str] = field(default_factory=lambda: ["compute"])
    seconds: float = 0.0  # the estimated call
    waiting: float = 0.0  # seconds the compute lane waits for collectives
    communicating: float = 0.0  # seconds collectives run

    @property
    def collectives(self) -> int:
        return sum(span.kind == "collective" for span in self.spans)


def _microseconds(seconds: float) -> str:
    return f"{seconds * 1e6:,.2f} µs"


def _label(op, names: dict[str, list[str]]) -> str:
    """A generated kernel's name (a combo's: its sub-kernels'), an
    extern call's aten overload, else the op."""
    name = op.operation.name
    if name in GENERATED_OPS:  # named in one sequence (function_kernels)
        queue = names.get(str(op.operation.location))
        return queue.pop(0) if queue else "kernel"
    if name == "braze.combo":
        return " + ".join(_label(region.blocks[0].operations[0], names) for region in op.regions)
    if name == "braze.extern":
        return op.attributes["target"].value
    return name.removeprefix("braze.")


def _region_seconds(op, machine: Machine) -> float:
    """A control-flow op's estimate: a switch its costliest branch, a while
    loop one condition and one body."""
    per_region = [sum(_compute_seconds(inner, machine) for inner in region.blocks[0].operations
                      if inner.operation.name != "braze.yield") for region in op.regions]
    return max(per_region, default=0.0) if op.operation.name == "braze.switch" else sum(per_region)


def _compute_seconds(op, machine: Machine) -> float:
    if len(op.regions) and op.operation.name in ("braze.switch", "braze.while"):
        return _region_seconds(op, machine)
    bytes_, flops = cost.op_estimate(op, DYNAMIC)
    return machine.compute_seconds(bytes_ or 0, flops or 0)


def _kind(name: str) -> str:
    if name in ("braze.kernel", "braze.combo"):
        return "kernel"
    if name in _LIBRARY:
        return "library"
    if name == "braze.extern":
        return "extern"
    if name in ("braze.switch", "braze.while"):
        return "control"
    return "host"


def schedule(func, title: str, machine: Machine, kernel_names: dict[str, list[str]]) -> Schedule:
    """The timeline of `func`'s top-level ops. `kernel_names`: per kernel
    location (as printed), the names of the final kernels there in order
    (the IR drawn here may come before the kernels got their names)."""
    names = {location: list(found) for location, found in kernel_names.items()}
    timeline = Schedule(title)
    now = 0.0
    lane_free: dict[str, float] = defaultdict(float)
    in_flight: dict = {}  # work value -> (its span, the start's name)
    for op in func.regions[0].blocks[0].operations:
        name = op.operation.name
        where = format_location(op.operation.location)
        if name in cost.COLLECTIVE_STARTS:
            group = op.attributes["group"].value
            lane = f"group {group}"
            if lane not in timeline.lanes:
                timeline.lanes.append(lane)
            sent = cost.wire_bytes(op, DYNAMIC)
            begin = max(now, lane_free[lane])
            span = Span(lane, name.removeprefix("braze.").removesuffix("_start"), "collective", begin,
                        begin + machine.link_seconds(sent), f"{name} at {where}: {sent:,} bytes sent per rank")
            lane_free[lane] = span.end
            timeline.spans.append(span)
            timeline.communicating += span.end - span.start
            in_flight[op.operation.results[0]] = span
        elif name == "braze.wait":
            span = in_flight.pop(op.operation.operands[0], None)
            if span is not None and span.end > now:
                timeline.spans.append(Span("compute", f"wait: {span.name}", "wait", now, span.end,
                                           f"waiting for {span.name} ({span.lane}) at {where}"))
                timeline.waiting += span.end - now
                now = span.end
        elif name not in cost.FREE and name != "func.return":
            seconds = _compute_seconds(op, machine)
            label = _label(op, names)
            detail = f"{label} at {where}: {_microseconds(seconds)}"
            if name not in ("braze.switch", "braze.while"):
                detail += " ({:,} bytes, {:,} flops)".format(*(n or 0 for n in cost.op_estimate(op, DYNAMIC)))
            timeline.spans.append(Span("compute", label, _kind(name), now, now + seconds, detail))
            now += seconds
    timeline.seconds = max([now, *lane_free.values()])
    return timeline


# Layout of the picture, in pixels.
_LABELS, _WIDTH, _ROW, _BAR, _AXIS = 96, 860, 26, 18, 24


def _tick(span: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving about 6 ticks."""
    if span <= 0:
        return 1e-6
    raw = span / 6
    power = 10 ** math.floor(math.log10(raw))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= raw)


def to_svg(timeline: Schedule, anchor: str, scale_seconds: float) -> str:
    """The timeline as an SVG element (id `anchor`), `scale_seconds` across
    its width (the same for the pictures compared)."""
    scale = _WIDTH / (scale_seconds or 1.0)
    height = _ROW * len(timeline.lanes) + _AXIS
    parts = [f'<svg id="{anchor}" class="timeline" xmlns="http://www.w3.org/2000/svg" '
             f'width="{_LABELS + _WIDTH + 12}" height="{height}" role="img" aria-label="{escape(timeline.title)}">']
    for row, lane in enumerate(timeline.lanes):
        y = row * _ROW
        parts.append(f'<rect class="lane" x="{_LABELS}" y="{y + 2}" width="{_WIDTH}" height="{_ROW - 4}"/>')
        parts.append(f'<text class="lane-label" x="{_LABELS - 6}" y="{y + _ROW / 2 + 4}">{escape(lane)}</text>')
    rows = {lane: row for row, lane in enumerate(timeline.lanes)}
    for span in timeline.spans:
        x = _LABELS + span.start * scale
        width = max((span.end - span.start) * scale, 0.5)
        y = rows[span.lane] * _ROW + (_ROW - _BAR) / 2
        parts.append(f'<rect class="span {span.kind}" x="{x:.2f}" y="{y:.1f}" width="{width:.2f}" height="{_BAR}">'
                     f"<title>{escape(span.detail)}</title></rect>")
        if width > 7 * len(span.name):  # the name when it fits
            parts.append(f'<text class="span-label" x="{x + 3:.2f}" y="{y + _BAR - 5:.1f}">{escape(span.name)}</text>')
    axis = _ROW * len(timeline.lanes)
    parts.append(f'<line class="axis" x1="{_LABELS}" y1="{axis + 2}" x2="{_LABELS + _WIDTH}" y2="{axis + 2}"/>')
    step = _tick(scale_seconds)
    for number in range(int(scale_seconds / step) + 1):
        x = _LABELS + number * step * scale
        parts.append(f'<line class="axis" x1="{x:.2f}" y1="{axis + 2}" x2="{x:.2f}" y2="{axis + 6}"/>'
                     f'<text class="tick" x="{x:.2f}" y="{axis + 18}">{number * step * 1e6:g} µs</text>')
    parts.append("</svg>")
    return "".join(parts)
