"""Per-kernel facts for the compile report: name, combo, domain,
estimated bytes and flops, and the kernel's own lines of the generated source."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlir import ir

from braze.report.cost import op_estimate


@dataclass
class KernelFacts:
    name: str
    launch: str | None  # the launch function that starts it with others, if any
    domain: str  # e.g. "16x?x32, reduce [2]"
    bytes: int | None  # None: a dynamic dim
    flops: int | None
    inputs: list[str]
    results: list[str]
    location: str
    source: str


@dataclass
class ComboFacts:
    launch: str  # the launch function's name
    dispatch: str
    members: list[tuple[str, str]]  # per sub-kernel: its kernel's name, its schedule ("block 1024 · cost 64")


_FILE_LINE_COL = re.compile(r'"([^"]*)":(\d+):(\d+)')


def location_text(location: ir.Location) -> str:
    """Where an op came from, for people: `file:line:col`; a fused location
    (a kernel of several ops) as its first place and how many more."""
    places = [f"{file}:{line}:{col}" for file, line, col in _FILE_LINE_COL.findall(str(location))]
    if not places:
        return str(location)
    return places[0] + (f" (+{len(places) - 1} more)" if len(places) > 1 else "")


def _type_text(type_: ir.Type) -> str:
    return str(type_).removeprefix("tensor<").removesuffix(">")


def kernel_source(source: str, name: str, extension: str) -> str:
    """The definition of function `name` in the generated `source` (a
    C-like language, or Triton's Python); the whole source when it cannot
    be found."""
    if extension == ".py":
        match = re.search(rf"^def {re.escape(name)}\(", source, flags=re.M)
        if not match:
            return source
        start = match.start()
        while True:  # the decorators above it
            previous = source.rfind("\n", 0, max(start - 1, 0))
            line = source[previous + 1:start - 1] if start else ""
            if not line.startswith("@"):
                break
            start = previous + 1
        body = source.find("\n", match.end()) + 1 or len(source)
        end = re.compile(r"^(?:@|[A-Za-z_])", flags=re.M).search(source, body)  # the next top-level statement
        return source[start:end.start() if end else len(source)].rstrip() + "\n"
    for match in re.finditer(rf"\b{re.escape(name)}\s*\(", source):
        opening = source.find("{", match.end())
        semicolon = source.find(";", match.end())
        if opening < 0 or (0 <= semicolon < opening):
            continue  # a call or a declaration, not the definition
        start = source.rfind("\n", 0, match.start()) + 1
        depth = 0
        for index in range(opening, len(source)):
            depth += {"{": 1, "}": -1}.get(source[index], 0)
            if depth == 0:
                return source[start:index + 1] + "\n"
    return source


def kernel_facts(kernel_ops: list, unit) -> list[KernelFacts]:
    """The facts of each kernel of `unit` (a target's emitted Unit), with
    `kernel_ops` the function's braze.kernel ops in the same order."""
    launch_of = {member: launch for launch, members in unit.launches.items() for member in members}
    facts = []
    for op, (name, spec) in zip(kernel_ops, unit.kernels.items()):
        domain = "x".join("?" if d is None else str(d) for d in spec.static_domain) or "scalar"
        if spec.reduce:
            domain += f", reduce {list(spec.reduce)}"
        bytes_, flops = op_estimate(op)  # a kernel, or a fused GEMM (its product and its operands)
        facts.append(KernelFacts(
            name=name, launch=launch_of.get(name), domain=domain, bytes=bytes_,
            flops=flops, inputs=[_type_text(t) for t in spec.input_types],
            results=[_type_text(t) for t in spec.result_types], location=location_text(op.operation.location),
            source=kernel_source(unit.source, name, unit.extension)))
    return facts


def combo_facts(combo_ops: list, unit) -> list[ComboFacts]:
    """Each braze.combo of `combo_ops` (in program order, as `unit`'s
    launches are): its launch, dispatch and each sub-kernel's schedule."""
    facts = []
    for op, (launch, names) in zip(combo_ops, unit.launches.items()):
        schedules = [ir.DictAttr(entry) for entry in ir.ArrayAttr(op.attributes["schedules"])]
        members = [(name, " · ".join(f"{key} {ir.IntegerAttr(schedule[key]).value}"
                                     for key in ("block", "rblock", "cost") if key in schedule))
                   for name, schedule in zip(names, schedules)]
        facts.append(ComboFacts(launch, ir.StringAttr(op.attributes["dispatch"]).value, members))
    return facts
