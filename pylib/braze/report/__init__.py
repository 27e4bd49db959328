"""The HTML compile report (docs/observability.md): one self-contained page
per compile with the function's graph before and after fusion as pictures
(Graphviz; kernels, combos, fused GEMMs and control-flow regions as
boxes), the decisions every pass explained (fusions refused, kernels
grouped into combos or not, collectives moved), the collective schedule
as a timeline before and after braze-overlap, each kernel's generated
source with its estimated bytes and flops, the pass times and the kernel
cache's answer.

It reads only what a compile produces anyway (the pipeline's record, the
final function, the emitted unit, the build's result), so asking for a
report never changes what is compiled.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from braze.errors import BrazeError, format_location
from braze.ir import parse
from braze.passes.pipeline import PassRun, PipelineRecord, Remark
from braze.report import graph as graphs
from braze.report import timeline as timelines
from braze.machine import Machine
from braze.report.kernels import ComboFacts, KernelFacts, combo_facts, kernel_facts
from braze.report.page import render

ENVIRONMENT_VARIABLE = "BRAZE_REPORT_DIR"
# The passes whose input IR the report draws: before fusion (the first of
# the fusion passes that runs), and after it (the input of the lowering to
# kernels); the collective timeline's IR before and after braze-overlap;
# the kernels braze-combo-kernels numbers.
EPILOGUE_PASS, FUSION_PASS = "braze-epilogue-fusion", "braze-fuse-pointwise"
LOWERING_PASS = "braze-lower-kernels"
OVERLAP_PASS, COMBO_PASS = "braze-overlap", "braze-combo-kernels"


def destination(option: str | None) -> str | None:
    """Where a compile's report goes: the `report` option, else
    BRAZE_REPORT_DIR, else nowhere (None)."""
    if option is not None:
        if not isinstance(option, (str, os.PathLike)):
            raise BrazeError(f"the report option must be a path (a .html file or a directory), "
                             f"got {type(option).__name__}")
        return os.fspath(option)
    return os.environ.get(ENVIRONMENT_VARIABLE) or None


def pipeline_record() -> PipelineRecord:
    """The record `run_pipeline` fills for a report."""
    return PipelineRecord(keep_ir_before=(EPILOGUE_PASS, FUSION_PASS, LOWERING_PASS, OVERLAP_PASS, COMBO_PASS),
                          keep_ir_after=(OVERLAP_PASS,))


@dataclass
class CompileFacts:
    function: str
    target: str
    compile_seconds: float
    cache_hit: bool | None  # None: nothing to build
    source_path: str | None
    library_calls: int
    extern_ops: dict
    passes: list[PassRun]
    kernels: list[KernelFacts]
    fused: int | None  # merges braze-fuse-pointwise reported (None: it did not run)
    # Both fusion passes' refusals: (pass, location, consumer, producer, reason, drawn).
    # braze-epilogue-fusion's fused GEMMs and the ops they took (None: it did not run).
    epilogues: tuple[int, int] | None = None
    refusals: list = field(default_factory=list)
    pictures: list = field(default_factory=list)  # (anchor, title, svg or None, dot)
    graph_problem: str | None = None
    combos: list[ComboFacts] = field(default_factory=list)
    # braze-combo-kernels' decisions per kernel: (kernel, its combo or None,
    # what the pass said); None when the pass did not run.
    combo_decisions: list | None = None
    # Every other pass's remarks, per pass in the order they ran.
    decisions: dict[str, list[Remark]] = field(default_factory=dict)
    timelines: list = field(default_factory=list)  # (anchor, Schedule, svg)
    timeline_note: str = ""
    machine: Machine = field(default_factory=Machine)


def _kernel_names(kernel_ops: list, names: list[str]) -> dict[str, list[str]]:
    """Per location (as printed), the names of the kernels there, in order."""
    by_location: dict[str, list[str]] = {}
    for op, name in zip(kernel_ops, names):
        by_location.setdefault(str(op.operation.location), []).append(name)
    return by_location


def collect(record: PipelineRecord, func_op, unit, built, stats: dict, machine: Machine | None = None) -> CompileFacts:
    """The report's facts of one compile: `record` from run_pipeline, the
    compiled `func_op` (kernel form), the target's emitted `unit`, what
    `build` returned (None without kernels), the compile's stats and the
    machine the timeline assumes."""
    from braze.codegen import function_operations
    from braze.codegen.analysis import function_kernels

    function = func_op.attributes["sym_name"].value
    kernel_ops, combo_ops = function_kernels(function_operations(func_op))
    fusion_remarks = record.remarks_of(EPILOGUE_PASS) + record.remarks_of(FUSION_PASS)
    facts = CompileFacts(
        function=function, target=stats["target"], compile_seconds=stats["compile_seconds"],
        cache_hit=None if built is None else built.cache_hit,
        source_path=None if built is None else str(built.source_path),
        library_calls=stats["gemms"] + stats["convolutions"] + stats["attentions"],
        extern_ops=stats["extern_ops"], passes=list(record.passes),
        kernels=kernel_facts(kernel_ops, unit) if kernel_ops else [],
        fused=sum(" fused with its producer " in r.message and " not fused " not in r.message
                  for r in record.remarks_of(FUSION_PASS)) if FUSION_PASS in record.ir_before else None,
        epilogues=_epilogues(record.remarks_of(EPILOGUE_PASS)) if EPILOGUE_PASS in record.ir_before else None,
        combos=combo_facts(combo_ops, unit), machine=machine or Machine())
    names = _kernel_names(kernel_ops, list(unit.kernels))
    _draw(facts, record, func_op, kernel_ops, fusion_remarks)
    if COMBO_PASS in record.ir_before:
        facts.combo_decisions = _combo_decisions(record, function, facts, names)
    for remark in record.remarks:
        if remark.pass_name not in (EPILOGUE_PASS, FUSION_PASS, COMBO_PASS):
            facts.decisions.setdefault(remark.pass_name, []).append(remark)
    _schedule(facts, record, func_op, names)
    return facts


def _draw(facts: CompileFacts, record: PipelineRecord, func_op, kernel_ops: list, fusion_remarks: list) -> None:
    function = facts.function
    kept = {op.operation.name for op in _walk(func_op)}
    kernels = [(kernel.name, str(op.operation.location), op.operation.name)
               for kernel, op in zip(facts.kernels, kernel_ops)]
    drawn = []
    first_fusion = next((name for name in (EPILOGUE_PASS, FUSION_PASS) if name in record.ir_before), None)
    if first_fusion is not None:
        before = graphs.function_graph(record.ir_before[first_fusion], function)
        facts.refusals = graphs.mark_refusals(before, fusion_remarks)
        drawn.append(("before-fusion", "Before fusion", before))
    if LOWERING_PASS in record.ir_before:
        after = graphs.function_graph(record.ir_before[LOWERING_PASS], function)
        graphs.name_kernels(after, kernels, kept)
        graphs.group_combos(after, facts.combos)
        graphs.mark_refusals(after, fusion_remarks)  # here they join two kernels, or a fused GEMM and a kernel
        drawn.append(("after-fusion", "After fusion: kernels and combos", after))
    for anchor, title, graph in drawn:
        dot = graphs.to_dot(graph, title)
        svg, problem = graphs.render_svg(dot)
        facts.graph_problem = facts.graph_problem or problem
        facts.pictures.append((anchor, title, svg, dot))


# braze-epilogue-fusion's remark for each fused GEMM it made.
_EPILOGUE_MADE = re.compile(r"^'[^']+' fused with (\d+) op\(s\) into braze\.fused_gemm ")


def _epilogues(remarks: list[Remark]) -> tuple[int, int]:
    """(fused GEMMs made, ops they took) from braze-epilogue-fusion's remarks."""
    taken = [int(match.group(1)) for match in map(_EPILOGUE_MADE.match, (r.message for r in remarks)) if match]
    return len(taken), sum(taken)


def _walk(op):
    """Every op nested in `op` (a function), regions included."""
    for region in op.regions:
        for block in region:
            for inner in block.operations:
                yield inner
                yield from _walk(inner)


def _combo_decisions(record: PipelineRecord, function: str, facts: CompileFacts,
                     names: dict[str, list[str]]) -> list:
    """braze-combo-kernels' remarks per kernel, in the order the pass saw
    the kernels (it numbers them, #0, #1, ..., in its input's order; the
    numbers of the function's own block become kernel names here)."""
    module = parse(record.ir_before[COMBO_PASS])
    before = graphs.find_function(module, function)
    remaining = {location: list(found) for location, found in names.items()}
    numbered = []  # the top-level block's kernels in the pass's order: (location, name)
    for op in before.regions[0].blocks[0].operations:
        if op.operation.name == "braze.kernel":
            location = str(op.operation.location)
            queue = remaining.get(location)
            numbered.append((format_location(location), queue.pop(0) if queue else None))
    launch_of = {kernel.name: kernel.launch for kernel in facts.kernels}
    said: dict[str, list[str]] = {}
    for remark in record.remarks_of(COMBO_PASS):
        said.setdefault(remark.location, []).append(_named(remark.message, numbered))
    decisions = []
    for location, name in numbered:
        if location in said:
            decisions.append((name or location, launch_of.get(name), said.pop(location)))
    decisions += [(location, None, messages) for location, messages in said.items()]  # in regions
    return decisions


def _named(message: str, numbered: list) -> str:
    """`kernel #3` in a combo remark as the kernel's name."""
    def name(match):
        number = int(match.group(1))
        return numbered[number][1] or match.group(0) if number < len(numbered) else match.group(0)

    return re.sub(r"(?<!sub-)kernel #(\d+)", name, message)


def _schedule(facts: CompileFacts, record: PipelineRecord, func_op, names: dict[str, list[str]]) -> None:
    """The collective timelines: before and after braze-overlap, or the
    compiled order when the pass did not run; none without collectives."""
    if not any(op.operation.name in graphs.COLLECTIVES for op in _walk(func_op)):
        return
    if OVERLAP_PASS in record.ir_before and OVERLAP_PASS in record.ir_after:
        modules = [parse(record.ir_before[OVERLAP_PASS]), parse(record.ir_after[OVERLAP_PASS])]
        drawn = [("timeline-before", "Before braze-overlap", graphs.find_function(modules[0], facts.function)),
                 ("timeline-after", "After braze-overlap", graphs.find_function(modules[1], facts.function))]
    else:
        facts.timeline_note = f"{OVERLAP_PASS} did not run: the order as compiled."
        drawn = [("timeline-compiled", "As compiled", func_op)]
    schedules = [(anchor, timelines.schedule(func, title, facts.machine, names)) for anchor, title, func in drawn]
    scale = max(schedule.seconds for _, schedule in schedules)
    facts.timelines = [(anchor, schedule, timelines.to_svg(schedule, anchor, scale)) for anchor, schedule in schedules]


def _fresh_file(directory: Path) -> Path:
    """`directory/compile-NNN.html`, the first number not taken."""
    directory.mkdir(parents=True, exist_ok=True)
    number = 0
    while True:
        path = directory / f"compile-{number:03d}.html"
        try:
            with path.open("x"):
                return path
        except FileExistsError:
            number += 1


def write(where: str, facts: CompileFacts) -> Path:
    """Writes the page: to `where` when it names a .html file, else to a
    fresh `compile-NNN.html` in the directory `where`. Returns its path."""
    target = Path(where)
    try:
        if target.suffix == ".html":
            target.parent.mkdir(parents=True, exist_ok=True)
        else:
            target = _fresh_file(target)
        target.write_text(render(facts), encoding="utf-8")
    except OSError as error:
        raise BrazeError(f"cannot write the compile report to {where!r}: {error}") from None
    return target
