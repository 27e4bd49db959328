"""The compiler driver: braze IR -> the target's passes -> kernel form ->
the target's source -> its binary (cached) -> `Program` (see braze.target).

`compile_mlir(module_or_text, target="cpu")` compiles IR; `compile(model,
example_args, ...)` captures a PyTorch model with `braze.export` first.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from braze import logs, progress, report
from braze.errors import BrazeError
from braze.ir import Module, parse
from braze.passes import run_pipeline
from braze.passes.pipeline import PipelineRecord
from braze.machine import Machine
from braze.runtime import trace
from braze.target import TargetOptions
from braze.target import get as get_target

# The options every target takes, with their defaults (see
# braze.target.TargetOptions; a target may add its own).
DEFAULT_OPTIONS = {f.name: f.default for f in dataclasses.fields(TargetOptions)}


def pipeline(options: dict, target: str = "cpu") -> str:
    """The pass pipeline that takes captured IR to the kernel form."""
    chosen = get_target(target)
    return chosen.pipeline(chosen.options(options))


class CompiledProgram:
    """A compiled module's entry function; call it like `braze.reference.run`
    (tensors or numpy arrays in, a list of results out)."""

    def __init__(self, module: Module, program, stats: dict, replay=None):
        """`replay`: what runs a call instead of `program` (a CUDA graph of
        it: the `cuda_graph` option)."""
        self.module = module
        self.program = program
        self.stats = stats
        self.call = replay or program

    def __call__(self, *arguments):
        return self.call(*arguments)


def compile_mlir(module_or_text, target: str = "cpu", *, parameters: dict[str, Any] | None = None,
                 entry: str | None = None, options: dict | None = None) -> CompiledProgram:
    """Compiles IR (a `braze.Module`, an `mlir.ir.Module` or its text) for
    `target`. The caller's module is not modified."""
    from mlir import ir

    from braze.codegen import function_operations
    from braze.hostops.signature import functions, select_entry
    from braze.runtime.executor import Program

    chosen = get_target(target)
    chosen.require()
    options = chosen.options(options)
    report_to = report.destination(options.report)
    if report_to is not None and options.report is None:
        options = dataclasses.replace(options, report=report_to)  # BRAZE_REPORT_DIR
    machine = Machine.from_option(options.report_machine)
    started = time.perf_counter()
    # A private copy, locations kept, for the passes to rewrite.
    if isinstance(module_or_text, str):
        module = parse(module_or_text)
    elif isinstance(module_or_text, (Module, ir.Module)):
        module = parse(module_or_text.operation.get_asm(enable_debug_info=True))
    else:
        raise BrazeError(f"compile_mlir expects a braze.Module, an mlir.ir.Module or IR text, "
                         f"got {type(module_or_text).__name__}")
    dump_dir = _fresh_dump_dir(Path(options.dump_dir)) if options.dump_dir is not None else None
    # A report reads the passes' record; an open braze.profile shows each pass.
    tracer = trace.tracer
    record = report.pipeline_record() if report_to is not None else (PipelineRecord() if tracer else None)
    traced = {"target": chosen.name}
    with progress.compiling(f"for {chosen.name}", ["passes", "codegen", "build"]) as bar, \
            trace.compile_stage(f"compile for {chosen.name}", traced):
        with _stage(bar, "passes"):
            run_pipeline(module, chosen.pipeline(options), dump_dir=dump_dir, record=record)
        if tracer is not None:
            tracer.passes(record.passes)
        module_op = module.mlir_module.operation
        func = select_entry(functions(module_op), entry)
        traced["function"] = func.attributes["sym_name"].value
        operations = function_operations(func)
        with _stage(bar, "codegen"):
            unit = chosen.emit(operations, options)
        if dump_dir is not None:
            # Written from the emitted source, so a cache hit dumps it too.
            (dump_dir / f"{chosen.name}-kernels{unit.extension}").write_text(unit.source)
        with _stage(bar, "build"):
            built = chosen.build(unit, options) if unit.kernels else None
        traced["cache_hit"] = bool(built) and built.cache_hit
    _log_codegen(chosen.name, unit, built)
    program = Program(module_op, func, built.kernels if built else None, list(unit.kernels.values()),
                      unit.launches, parameters, chosen.run_device())
    generated = Counter(op.operation.name for op in operations)
    stats = {
        "kernels": program.kernel_count,
        # Kernel launches per call (a combo's sub-kernels start as one).
        "launches": program.launch_count,
        "gemms": sum(program.library_calls[name]
                     for name in ("braze.matmul", "braze.bmm", "braze.addmm", "braze.scaled_mm")),
        # GEMMs with their epilogue, generated (braze-epilogue-fusion).
        "fused_gemms": generated["braze.fused_gemm"],
        "convolutions": program.library_calls["braze.convolution"],
        # Library attentions and generated ones (braze-lower-attention).
        "attentions": program.library_calls["braze.attention"] + generated["braze.flash_attention"],
        "flash_attentions": generated["braze.flash_attention"],
        # aten ops run through torch because braze does not lower them.
        "externs": sum(program.extern_calls.values()),
        "extern_ops": dict(program.extern_calls),
        # braze-plan-memory's arena and planned peak (None when it did not run).
        "arena_bytes": program.arena.bytes,
        "planned_peak_bytes": program.arena.planned_peak,
        "cache_hit": bool(built) and built.cache_hit,
        "compile_seconds": time.perf_counter() - started,
        "source": built.source_path if built else None,
        "target": chosen.name,
        "cuda_graph": options.cuda_graph,
    }
    if report_to is not None:
        stats["report"] = report.write(report_to, report.collect(record, func, unit, built, stats, machine))
    replay = None
    if options.cuda_graph:
        from braze.runtime.cuda_graph import GraphedProgram

        replay = GraphedProgram(program, [op.operation.name for op in operations])
    return CompiledProgram(module, program, stats, replay)


@contextmanager
def _stage(bar, name: str):
    """One stage of a compile: on the progress bar, and in an open braze.profile."""
    bar.stage(name)
    with trace.compile_stage(name):
        yield


def _fresh_dump_dir(root: Path) -> Path:
    """`root/compile-NNN`, the first number not taken: every compile (torch.compile
    makes one per graph) keeps its own dumps."""
    root.mkdir(parents=True, exist_ok=True)
    number = 0
    while True:
        directory = root / f"compile-{number:03d}"
        try:
            directory.mkdir()
            return directory
        except FileExistsError:
            number += 1


def _log_codegen(target: str, unit, built) -> None:
    if not logs.enabled("codegen"):
        return
    log = logs.logger("codegen")
    if built is None:
        log.info("%s: no kernels to emit", target)
        return
    log.info("%s: %d kernel(s) %s; source %s (cache %s)", target, len(unit.kernels), ", ".join(unit.kernels),
             built.source_path, "hit" if built.cache_hit else "miss")
    for launch, names in unit.launches.items():
        log.debug("%s: combo %s runs %s", target, launch, ", ".join(names))


class CompiledModel:
    """`braze.compile`'s result: called with the model's inputs, returns
    what the model returns."""

    def __init__(self, exported, compiled: CompiledProgram):
        from braze.runtime.tree import TreePlan

        self.exported = exported
        self.compiled = compiled
        self.stats = compiled.stats
        self._imported = exported.imported
        self._program = compiled.call
        in_spec, out_spec = exported._in_spec, exported._out_spec
        # Nested inputs and outputs through prepared plans (None: pytree).
        self._inputs = TreePlan.of(in_spec) if in_spec is not None else None
        self._outputs = TreePlan.of(out_spec) if out_spec is not None else None

    @property
    def module(self) -> Module:
        return self.compiled.module

    def __call__(self, *args, **kwargs):
        flat = []
        if self._inputs is None or not self._inputs.flatten_call(args, kwargs, flat):
            flat = self._flatten(args, kwargs)
        outputs = self._imported.outputs(self._program(*self._imported.arguments(flat)))
        if self._outputs is not None:
            return self._outputs.build(outputs)
        from torch.utils import _pytree as pytree

        return pytree.tree_unflatten(outputs, self.exported._out_spec)

    def _flatten(self, args: tuple, kwargs: dict) -> list:
        """The inputs' leaves through pytree, which says how their structure
        differs from the captured one."""
        from torch.utils import _pytree as pytree

        flat, spec = pytree.tree_flatten((args, kwargs))
        if self.exported._in_spec is not None and spec != self.exported._in_spec:
            raise BrazeError(f"inputs do not match the compiled signature:\n got {spec}\n"
                             f" expected {self.exported._in_spec}")
        return flat


def compile(model, example_args, *, kwargs: dict | None = None, dynamic_shapes=None, dynamic_spec=None,
            target: str = "cpu", options: dict | None = None) -> CompiledModel:
    """Captures `model(*example_args, **kwargs)` (see `braze.export`) and compiles it
    for `target`. Dims marked in `dynamic_shapes` or `dynamic_spec` stay
    symbolic: one compile serves every size in their ranges."""
    from braze.frontend import export

    chosen = get_target(target)
    chosen.options(options)
    chosen.require()
    title = getattr(model, "__name__", None) or type(model).__name__  # a function's name, or a module's class
    with progress.compiling(title, ["capture", "passes", "codegen", "build"]) as bar:
        with _stage(bar, "capture"):
            exported = export(model, example_args, kwargs, dynamic_shapes=dynamic_shapes, dynamic_spec=dynamic_spec)
        compiled = compile_mlir(exported.module, target, parameters=exported.parameters, options=options)
    # The aten ops torch.export captured, against which externs are counted.
    compiled.stats["captured_ops"] = exported.imported.op_count
    return CompiledModel(exported, compiled)


def _target_of(example_inputs) -> str:
    """The target serving the example inputs' device (the CPU without tensors)."""
    import torch

    from braze.target import for_device

    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if len(devices) > 1:
        raise BrazeError(f"the graph's inputs are on several devices ({', '.join(sorted(devices))})")
    return for_device(devices.pop() if devices else "cpu")


def dynamo_backend(graph_module, example_inputs, options: dict | None = None, **kwargs):
    """`torch.compile(model, backend="braze")`: every graph is compiled for
    the target of its example inputs' device; `options={"target": "opencl"}`
    forces one (registered as the torch_dynamo_backends entry point "braze").
    Other entries of `options` are compile options."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from braze.frontend.dynamo import make_backend

    compile_options = dict(options or {})
    if "dynamic_spec" in compile_options:
        # Dynamo has decided which dims are dynamic before a backend sees a graph.
        raise BrazeError("torch.compile does not take a dynamic_spec: mark dims with torch._dynamo.mark_dynamic("
                         "x, dim, min=..., max=...), or capture with braze.compile(model, args, dynamic_spec=...)")
    target = compile_options.pop("target", None) or _target_of(example_inputs)
    get_target(target).options(compile_options)  # unknown options fail here, not per graph

    def compile_imported(imported):
        # AOTAutograd calls this under its fake mode; the program evaluates
        # constants with real tensors.
        with unset_fake_temporarily():
            return compile_mlir(imported.module, target, options=compile_options)

    return make_backend(compile_imported)(graph_module, example_inputs, **kwargs)
