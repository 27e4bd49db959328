"""The HTML compile report (docs/observability.md): one self-contained page
per compile with the function's graph before and after fusion as pictures
(Graphviz), the refused fusions and why, each kernel's generated source
with its estimated bytes and flops, the pass times and the kernel cache's
answer.

It reads only what a compile produces anyway (the pipeline's record, the
final function, the emitted unit, the build's result), so asking for a
report never changes what is compiled.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from braze.errors import BrazeError
from braze.passes.pipeline import PassRun, PipelineRecord
from braze.report import graph as graphs
from braze.report.kernels import KernelFacts, kernel_facts
from braze.report.page import render

ENVIRONMENT_VARIABLE = "BRAZE_REPORT_DIR"
# The passes whose input IR the report draws: before fusion, and after it
# (the input of the lowering to kernels).
FUSION_PASS, LOWERING_PASS = "braze-fuse-pointwise", "braze-lower-kernels"


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
    return PipelineRecord(keep_ir_before=(FUSION_PASS, LOWERING_PASS))


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
    refusals: list = field(default_factory=list)
    pictures: list = field(default_factory=list)  # (anchor, title, svg or None, dot)
    graph_problem: str | None = None


def collect(record: PipelineRecord, func_op, unit, built, stats: dict) -> CompileFacts:
    """The report's facts of one compile: `record` from run_pipeline, the
    compiled `func_op` (kernel form), the target's emitted `unit`, what
    `build` returned (None without kernels) and the compile's stats."""
    function = func_op.attributes["sym_name"].value
    operations = list(func_op.regions[0].blocks[0].operations)
    kernel_ops = [op for op in operations if op.operation.name == "braze.kernel"]
    facts = CompileFacts(
        function=function, target=stats["target"], compile_seconds=stats["compile_seconds"],
        cache_hit=None if built is None else built.cache_hit,
        source_path=None if built is None else str(built.source_path),
        library_calls=stats["gemms"] + stats["convolutions"] + stats["attentions"],
        extern_ops=stats["extern_ops"], passes=list(record.passes),
        kernels=kernel_facts(kernel_ops, unit) if kernel_ops else [],
        fused=sum(" fused with its producer " in m and " not fused " not in m for _, m in record.remarks)
        if FUSION_PASS in record.ir_before else None)
    kept = {op.operation.name for op in operations}
    kernels = [(kernel.name, str(op.operation.location)) for kernel, op in zip(facts.kernels, kernel_ops)]
    drawn = []
    if FUSION_PASS in record.ir_before:
        before = graphs.function_graph(record.ir_before[FUSION_PASS], function)
        facts.refusals = graphs.mark_refusals(before, record.remarks)
        drawn.append(("before-fusion", "Before fusion", before))
    if LOWERING_PASS in record.ir_before:
        after = graphs.function_graph(record.ir_before[LOWERING_PASS], function)
        graphs.name_kernels(after, kernels, kept)
        graphs.mark_refusals(after, record.remarks)  # the refused edges join two kernels here
        drawn.append(("after-fusion", "After fusion: kernels", after))
    for anchor, title, graph in drawn:
        dot = graphs.to_dot(graph, title)
        svg, problem = graphs.render_svg(dot)
        facts.graph_problem = facts.graph_problem or problem
        facts.pictures.append((anchor, title, svg, dot))
    return facts


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
