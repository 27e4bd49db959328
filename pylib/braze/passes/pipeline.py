"""`run_pipeline`: one pipeline string, C++ and Python passes interleaved.

The string uses MLIR's textual pipeline syntax. Top-level elements that name a
registered Python pass run in Python on the module op; runs of the other
elements go to MLIR's PassManager as they are. The whole string is checked
before any pass runs, so a typo never leaves a module half-transformed.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlir import ir, passmanager

from braze import logs
from braze.errors import BrazeError, format_location
from braze.ir import Module
from braze.machine import Machine
from braze.passes.registry import PythonPass, lookup, registered_passes

_ELEMENT_NAME = re.compile(r"^\s*([A-Za-z0-9_.\-]+)")


def _split_top_level(text: str, pipeline: str) -> list[str]:
    """Splits `text` at the commas outside any (...) or {...}."""
    parts, start = [], 0
    closing = {")": "(", "}": "{"}
    stack: list[str] = []
    for i, ch in enumerate(text):
        if ch in "({":
            stack.append(ch)
        elif ch in ")}":
            if not stack or stack.pop() != closing[ch]:
                raise BrazeError(f"unbalanced '{ch}' in pass pipeline {pipeline!r}")
        elif ch == "," and not stack:
            parts.append(text[start:i].strip())
            start = i + 1
    if stack:
        raise BrazeError(f"unclosed '{stack[-1]}' in pass pipeline {pipeline!r}")
    parts.append(text[start:].strip())
    if any(not p for p in parts):
        raise BrazeError(f"empty element in pass pipeline {pipeline!r}")
    return parts


def _strip_module_anchor(pipeline: str) -> str:
    text = pipeline.strip()
    match = re.fullmatch(r"builtin\.module\((.*)\)", text, flags=re.S)
    return match.group(1) if match else text


def _parse_options(pass_: PythonPass, text: str) -> dict[str, str]:
    """`{a=1 b=x}` to {"a": "1", "b": "x"}, checked against the pass's signature."""
    options = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BrazeError(f"option {item!r} of pass '{pass_.name}' is not of the form key=value")
        options[key] = value
    accepted = pass_.option_names()
    if accepted is not None:
        unknown = sorted(set(options) - accepted)
        if unknown:
            known = ", ".join(sorted(accepted)) or "none"
            raise BrazeError(
                f"pass '{pass_.name}' has no option(s) {', '.join(unknown)} (options: {known})"
            )
    return options


def _nested_python_pass(element: str) -> str | None:
    """A registered Python pass named anywhere inside `element`'s (...) nest."""
    python_names = registered_passes()
    for name in re.findall(r"[A-Za-z0-9_.\-]+", element.partition("(")[2]):
        if name in python_names:
            return name
    return None


@dataclass
class _NativeStep:
    elements: list[str] = field(default_factory=list)
    manager: passmanager.PassManager | None = None

    @property
    def text(self) -> str:
        return ",".join(self.elements)

    def prepare(self, context: ir.Context) -> None:
        try:
            self.manager = passmanager.PassManager.parse(
                f"builtin.module({self.text})", context=context
            )
        except ValueError as error:
            for element in self.elements:
                nested = _nested_python_pass(element)
                if nested:
                    raise BrazeError(
                        f"Python pass '{nested}' runs on the whole module and cannot be "
                        f"nested in '{element}'; name it at the top level of the pipeline"
                    ) from None
            raise BrazeError(f"invalid pass pipeline '{self.text}': {error}") from None

    def run(self, module: Module) -> None:
        try:
            self.manager.run(module.operation)
        except ir.MLIRError as error:
            raise BrazeError.from_mlir(f"pass pipeline '{self.text}' failed", error) from None


@dataclass
class _PythonStep:
    pass_: PythonPass
    options: dict[str, str]

    def run(self, module: Module) -> None:
        name = self.pass_.name
        try:
            self.pass_.run(module.operation, **self.options)
        except BrazeError as error:
            raise BrazeError(f"Python pass '{name}' failed: {error.message}", error.diagnostics) from error
        except Exception as error:
            raise BrazeError(
                f"Python pass '{name}' raised {type(error).__name__}: {error}"
            ) from error
        try:
            module.operation.verify()
        except ir.MLIRError as error:
            raise BrazeError.from_mlir(
                f"Python pass '{name}' produced invalid IR", error
            ) from None


_ANCHORED = re.compile(r"^([A-Za-z0-9_.\-]+)\((.*)\)$", flags=re.S)


def _single_passes(element: str, pipeline: str) -> list[str]:
    """`func.func(a,b)` as ["func.func(a)", "func.func(b)"]: one pass each, under
    its anchors. (The same passes in the same order on each op: the passes
    braze nests are local to the op they anchor on.)"""
    match = _ANCHORED.match(element)
    if not match:
        return [element]
    anchor, inner = match.groups()
    return [f"{anchor}({single})" for part in _split_top_level(inner, pipeline)
            for single in _single_passes(part, pipeline)]


def _plan(pipeline: str, context: ir.Context, one_pass_per_step: bool = False) -> list[_NativeStep | _PythonStep]:
    steps: list[_NativeStep | _PythonStep] = []
    for element in _split_top_level(_strip_module_anchor(pipeline), pipeline):
        match = _ELEMENT_NAME.match(element)
        python_pass = lookup(match.group(1)) if match else None
        if python_pass is None:
            if one_pass_per_step:
                steps.extend(_NativeStep([single]) for single in _single_passes(element, pipeline))
                continue
            if not steps or not isinstance(steps[-1], _NativeStep):
                steps.append(_NativeStep())
            steps[-1].elements.append(element)
            continue
        rest = element[match.end():].strip()
        if rest.startswith("{") and rest.endswith("}"):
            options = _parse_options(python_pass, rest[1:-1])
        elif not rest:
            options = {}
        else:
            raise BrazeError(
                f"Python pass '{python_pass.name}' takes options in {{key=value}} form, "
                f"got {rest!r}"
            )
        steps.append(_PythonStep(python_pass, options))
    for step in steps:
        if isinstance(step, _NativeStep):
            step.prepare(context)
    return steps


@dataclass
class PassRun:
    """One pass as an observed run saw it (see `PipelineRecord`)."""

    pipeline: str  # the element that ran, e.g. "func.func(braze-lower-kernels)"
    name: str  # its innermost pass, e.g. "braze-lower-kernels"
    seconds: float
    ops_before: int
    ops_after: int
    started_ns: int = 0  # time.perf_counter_ns() when it started


@dataclass(frozen=True)
class Remark:
    """A decision a pass explained (an MLIR remark)."""

    pass_name: str  # the pass that emitted it, e.g. "braze-combo-kernels"
    location: str  # as messages print it (file:line:col)
    message: str


@dataclass
class PipelineRecord:
    """What `run_pipeline(..., record=...)` collects for a compile report
    or a trace: each pass with its time and op counts, every remark the
    passes emit (each pass that declares a `remarks` option is asked for
    them), and the IR (text with locations) just before each pass named in
    `keep_ir_before` and just after each named in `keep_ir_after`, under
    that pass's name (its first run)."""

    keep_ir_before: tuple[str, ...] = ()
    keep_ir_after: tuple[str, ...] = ()
    passes: list[PassRun] = field(default_factory=list)
    remarks: list[Remark] = field(default_factory=list)
    ir_before: dict[str, str] = field(default_factory=dict)
    ir_after: dict[str, str] = field(default_factory=dict)

    def remarks_of(self, pass_name: str) -> list[Remark]:
        return [remark for remark in self.remarks if remark.pass_name == pass_name]


def run_pipeline(module: Module, pipeline: str, *, dump_dir: str | Path | None = None,
                 record: PipelineRecord | None = None) -> Module:
    """Runs `pipeline` on `module` in place and returns the module.

    Example: `run_pipeline(m, "braze-simplify,my-py-pass{factor=2},cse")`.

    With `dump_dir`, the IR before the passes (`000-input.mlir`) and after
    each pass (`001-braze-simplify.mlir`, ...) is written there; each file
    names the pipeline that takes the previous one to it (see
    docs/observability.md). The `passes` log topic reports each pass's time
    and op counts; the remarks the passes emit go to the `fusion` topic.
    A `record` collects the same (see `PipelineRecord`).
    """
    if not isinstance(module, Module):
        raise TypeError(f"run_pipeline expects a braze.Module, got {type(module).__name__}")
    if not isinstance(pipeline, str):
        raise TypeError(f"the pipeline must be a str, got {type(pipeline).__name__}")
    observed = dump_dir is not None or record is not None or logs.enabled("passes")
    log = logs.logger("fusion")
    listening = _RemarkListener(log if log.isEnabledFor(logging.INFO) else None, record)
    if listening.wanted:
        pipeline = explaining(pipeline, module.context)
    steps = _plan(pipeline, module.context, one_pass_per_step=observed)
    handler = module.context.attach_diagnostic_handler(listening) if listening.wanted else None
    try:
        if observed:
            _run_observed(module, steps, Path(dump_dir) if dump_dir is not None else None, record, listening)
        else:
            for step in steps:
                step.run(module)
    finally:
        if handler is not None:
            handler.detach()
    return module


# A pass option as MLIR prints a parsed pipeline (every option, with its value).
_REMARKS_OPTION = re.compile(r"[{\s]remarks=")
# Per pass (with its anchors): whether it declares a `remarks` option.
_explains: dict[str, bool] = {}


def _declares_remarks(nested: str, context: ir.Context) -> bool:
    """Whether the one pass in `nested` (`func.func(name)`, `name{...}`)
    has a `remarks` option: MLIR prints a parsed pass with all its options."""
    key = re.sub(r"\{[^{}]*\}", "", nested)
    if key not in _explains:
        try:
            printed = str(passmanager.PassManager.parse(f"builtin.module({key})", context=context))
        except ValueError:  # not a C++ pass (a Python pass, a typo: _plan names it)
            printed = ""
        _explains[key] = bool(_REMARKS_OPTION.search(printed))
    return _explains[key]


def _with_remarks(element: str, anchors: list[str], context: ir.Context) -> str:
    match = _ANCHORED.match(element)
    if match:
        anchor, inner = match.groups()
        parts = _split_top_level(inner, element)
        return f"{anchor}({','.join(_with_remarks(part, anchors + [anchor], context) for part in parts)})"
    nested = element
    for anchor in reversed(anchors):
        nested = f"{anchor}({nested})"
    if not _declares_remarks(nested, context) or _REMARKS_OPTION.search(element):
        return element  # no such option, or the pipeline chose already
    if element.endswith("}"):
        return element[:-1].rstrip() + " remarks=true}"
    return element + "{remarks=true}"


def explaining(pipeline: str, context: ir.Context) -> str:
    """`pipeline` with `remarks=true` on every pass that declares a
    `remarks` option and does not set it: each then explains its
    decisions (remarks never change what a pass does). run_pipeline asks
    for them when someone listens: a record (the compile report) or the
    `fusion` log topic."""
    return ",".join(_with_remarks(element, [], context)
                    for element in _split_top_level(_strip_module_anchor(pipeline), pipeline))


class _RemarkListener:
    """A diagnostic handler that logs remarks to `log` and keeps them in
    `record` under the pass that runs (`pass_name`, set by an observed
    run), and leaves the rest (errors become BrazeErrors) to the pass
    manager."""

    def __init__(self, log: logging.Logger | None, record: PipelineRecord | None):
        self.log, self.record = log, record
        self.wanted = log is not None or record is not None
        self.pass_name = ""

    def __call__(self, diagnostic) -> bool:
        if diagnostic.severity != ir.DiagnosticSeverity.REMARK:
            return False
        location = format_location(diagnostic.location)
        if self.log is not None:
            self.log.info("%s: %s", location, diagnostic.message)
        if self.record is not None:
            self.record.remarks.append(Remark(self.pass_name, location, diagnostic.message))
        return True


def _step_text(step: _NativeStep | _PythonStep) -> str:
    if isinstance(step, _NativeStep):
        return step.text
    options = " ".join(f"{key}={value}" for key, value in step.options.items())
    return step.pass_.name + (f"{{{options}}}" if options else "")


def _op_count(module: Module) -> int:
    count = 0

    def visit(_op):
        nonlocal count
        count += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count - 1  # the module itself


def _dump(directory: Path, number: int, name: str, header: list[str], module: Module) -> str:
    """Writes the module as `NNN-name.mlir` under `header`; returns the file's name."""
    # As braze-opt prints it (with --mlir-print-debuginfo), so that `diff`
    # compares a replay with the next dump.
    text = module.operation.get_asm(enable_debug_info=True) + "\n"
    lines = "".join(f"// {line}\n" for line in header)
    file_name = f"{number:03d}-{name}.mlir"
    (directory / file_name).write_text(lines + text)
    return file_name


def _run_observed(module: Module, steps: list, dump_dir: Path | None, record: PipelineRecord | None,
                  listening: _RemarkListener) -> None:
    """Runs one pass per step, timing each and counting ops around it, and
    dumps the IR after each into `dump_dir` and records each in `record`."""
    log = logs.logger("passes")
    if dump_dir is not None:
        dump_dir.mkdir(parents=True, exist_ok=True)
        previous = _dump(dump_dir, 0, "input", ["The IR before the passes."], module)
    ops_before = _op_count(module)
    for number, step in enumerate(steps, start=1):
        text = _step_text(step)
        name = _ELEMENT_NAME.match(text.rsplit("(", 1)[-1]).group(1)  # the innermost pass
        if record is not None and name in record.keep_ir_before and name not in record.ir_before:
            record.ir_before[name] = module.operation.get_asm(enable_debug_info=True)
        listening.pass_name = name
        started = time.perf_counter_ns()
        step.run(module)
        seconds = (time.perf_counter_ns() - started) / 1e9
        ops_after = _op_count(module)
        log.info("%s: %.2f ms, %d -> %d ops", text, seconds * 1e3, ops_before, ops_after)
        if record is not None:
            record.passes.append(PassRun(text, name, seconds, ops_before, ops_after, started))
            if name in record.keep_ir_after and name not in record.ir_after:
                record.ir_after[name] = module.operation.get_asm(enable_debug_info=True)
        ops_before = ops_after
        if dump_dir is None:
            continue
        if isinstance(step, _NativeStep):
            replay = f"braze-opt {previous} --pass-pipeline='builtin.module({text})'"
        else:
            replay = f"braze.run_pipeline(braze.parse(<{previous}>), {text!r}) (a Python pass)"
        previous = _dump(dump_dir, number, name, [f"After pass {number}: {text}", f"Replay: {replay}"], module)


def kernel_form_pipeline(fuse: bool = True, recompute_limit: int = 2, channels_last: bool = True,
                         collapse_dims: bool = True, overlap: bool = True, fold_layouts: bool = True,
                         epilogue_fusion: bool = False, form_attention: bool = True,
                         flash_attention: bool | str = False, bucket_bytes: int = 0,
                         overlap_mode: str = "simple", overlap_machine: dict | None = None,
                         overlap_max_inflight_bytes: int = 0,
                         attention_blocks: tuple[int, int] | None = None, decode_rows: int = 0,
                         half_products: bool = True, split_dims: bool = True,
                         group_heads: bool = False, convolution_gemm_work: int = 0,
                         order_attention: bool = True) -> str:
    """The passes that take captured IR to the kernel form (every target
    starts with them; a target may append its own). The collective order
    is recorded first and checked after the passes that may move
    collectives. (run_pipeline asks the passes to explain their decisions
    when a report or the fusion log topic listens.) `epilogue_fusion`:
    braze-epilogue-fusion before braze-fuse-pointwise (for targets whose
    emitters spell braze.fused_gemm), taking also the lone GEMMs whose M
    is static and at most `decode_rows`, and (`half_products` off) leaving
    f16/bf16 GEMMs above that M to the library. `form_attention`: braze-form-attention
    first, before any fusion takes the softmax's ops; `order_attention`:
    braze-order-attention after it (each attention in the order its reader
    permutes it to); `flash_attention`:
    braze-lower-attention after it (for targets whose emitters spell
    braze.flash_attention; "halves": f16/bf16 attentions too), with
    `attention_blocks` = (q-block, kv-block) when given, and `group_heads`
    (a decode step's query heads of one key/value head in one work item).
    `convolution_gemm_work`: braze-convolution-gemms first, computing 1x1
    convolutions of at most that many multiply-adds as GEMMs (0: none). `split_dims`:
    braze-split-dims before braze-collapse-dims.
    `bucket_bytes`: merge small all_reduces into buckets of at most that
    many bytes (braze-bucket-collectives, before fusion, so the concat and
    the slices fuse like any other op); 0 leaves each one alone.
    `overlap_mode`: braze-overlap's mode, "simple" or "cost" (on
    `overlap_machine`, a dict of braze.machine.Machine's fields);
    `overlap_max_inflight_bytes`: its bound on the bytes of collectives in
    flight at once (0: none)."""
    fusion = f"braze-fuse-pointwise{{recompute-limit={int(recompute_limit)}}}," if fuse else ""
    if fuse and epilogue_fusion:
        epilogue_options = ([f"decode-rows={int(decode_rows)}"] if decode_rows else []) + \
            ([] if half_products else ["half-products=false"])
        fusion = (f"braze-epilogue-fusion{{{' '.join(epilogue_options)}}}," if epilogue_options
                  else "braze-epilogue-fusion,") + fusion
    layout = ",braze-channels-last" if channels_last else ""
    collapse = (",braze-split-dims" if split_dims else "") + (",braze-collapse-dims" if collapse_dims else "")
    # braze-inline-kernels computes a kernel inside its reader where a folded
    # layout op had kept braze-fuse-pointwise from fusing them (fusion too).
    fold = (",braze-fold-layouts" + (",braze-inline-kernels" if fuse else "")) if fold_layouts else ""
    verify = "braze-verify-collective-order"
    buckets = f"braze-bucket-collectives{{bucket-bytes={bucket_bytes}}}," if bucket_bytes else ""
    overlap_options = []
    if overlap_mode == "cost":
        overlap_options.append(f"mode=cost {Machine.from_option(overlap_machine, 'overlap_machine').overlap_options()}")
    if overlap_max_inflight_bytes:
        overlap_options.append(f"max-inflight-bytes={int(overlap_max_inflight_bytes)}")
    overlap_pass = f"braze-overlap{{{' '.join(overlap_options)}}}" if overlap_options else "braze-overlap"
    moves = f",{overlap_pass},{verify}" if overlap else ""
    lower_options = ["halves=true"] if flash_attention == "halves" else []
    if attention_blocks:
        lower_options += [f"q-block={int(attention_blocks[0])}", f"kv-block={int(attention_blocks[1])}"]
    if group_heads:
        lower_options.append("group-heads=true")
    lower = f"braze-lower-attention{{{' '.join(lower_options)}}}," if lower_options else "braze-lower-attention,"
    attention = (("braze-form-attention," if form_attention else "") + ("braze-order-attention," if order_attention else "")
                 + (lower if flash_attention else ""))
    convolutions = (f"braze-convolution-gemms{{max-work={int(convolution_gemm_work)}}},"
                    if convolution_gemm_work else "")
    return (f"braze-simplify,func.func({verify},{convolutions}{buckets}{attention}{fusion}braze-lower-kernels{fold}{layout}{collapse}),cse,"
            f"func.func({verify}{moves})")


def combo_kernels_pass(max_arguments: int = 250) -> str:
    """braze-combo-kernels for a target taking `max_arguments` buffer
    arguments per launch."""
    return f"func.func(braze-combo-kernels{{max-arguments={int(max_arguments)}}})"
