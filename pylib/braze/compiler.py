"""The CPU compiler driver: braze IR -> passes -> kernel form -> C++ ->
native library -> `Program`.

`compile_mlir(module_or_text, target="cpu")` compiles IR; `compile(model,
example_args, ...)` captures a PyTorch model with `braze.export` first.
"""

from __future__ import annotations

import time
from typing import Any

from braze.errors import BrazeError
from braze.ir import Module, parse
from braze.passes import run_pipeline

TARGETS = ("cpu",)

DEFAULT_OPTIONS = {
    # Fuse pointwise chains and reductions into one kernel each.
    "fuse": True,
    # Groups a cheap shared pointwise op may be recomputed in (see
    # braze-fuse-pointwise).
    "recompute_limit": 2,
    # Run 2-D convolutions, and the pointwise kernels between them, on
    # channels-last memory (braze-channels-last).
    "channels_last": True,
    # Merge a kernel's short trailing dims into one loop (braze-collapse-dims).
    "collapse_dims": True,
    # Measure each static convolution in both memory formats and run it in
    # the faster (braze-tune-convolutions): an alternative to channels_last
    # for networks that mix layouts; its choice depends on the machine's load.
    "tune_convolutions": False,
    # Directory of the compiled-library cache (default: BRAZE_CACHE_DIR).
    "cache_dir": None,
}


def _options(options: dict | None) -> dict:
    merged = dict(DEFAULT_OPTIONS)
    for key, value in (options or {}).items():
        if key not in DEFAULT_OPTIONS:
            known = ", ".join(sorted(DEFAULT_OPTIONS))
            raise BrazeError(f"unknown compile option {key!r} (known: {known})")
        merged[key] = value
    return merged


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise BrazeError(f"unknown target {target!r}; this build compiles for: {', '.join(TARGETS)}")


def pipeline(options: dict) -> str:
    """The pass pipeline that takes captured IR to the kernel form."""
    fuse = f"braze-fuse-pointwise{{recompute-limit={int(options['recompute_limit'])}}}," if options["fuse"] else ""
    layout = ",braze-channels-last" if options["channels_last"] else ""
    collapse = ",braze-collapse-dims" if options["collapse_dims"] else ""
    tune = ",braze-tune-convolutions" if options["tune_convolutions"] else ""
    return f"braze-simplify,func.func({fuse}braze-lower-kernels{layout}{collapse}),cse{tune}"


class CompiledProgram:
    """A compiled module's entry function; call it like `braze.reference.run`
    (tensors or numpy arrays in, a list of results out)."""

    def __init__(self, module: Module, program, stats: dict):
        self.module = module
        self.program = program
        self.stats = stats

    def __call__(self, *arguments):
        return self.program(*arguments)


def compile_mlir(module_or_text, target: str = "cpu", *, parameters: dict[str, Any] | None = None,
                 entry: str | None = None, options: dict | None = None) -> CompiledProgram:
    """Compiles IR (a `braze.Module`, an `mlir.ir.Module` or its text) for
    `target`. The caller's module is not modified."""
    from mlir import ir

    from braze.codegen.cpp.emitter import COMPILE_FLAGS, emit, plan_launches
    from braze.reference.interpreter import _functions, select_entry
    from braze.runtime.executor import Program
    from braze.runtime.native_cache import DEFAULT_FLAGS, NativeCache

    _check_target(target)
    options = _options(options)
    started = time.perf_counter()
    # A private copy, locations kept, for the passes to rewrite.
    if isinstance(module_or_text, str):
        module = parse(module_or_text)
    elif isinstance(module_or_text, (Module, ir.Module)):
        module = parse(module_or_text.operation.get_asm(enable_debug_info=True))
    else:
        raise BrazeError(f"compile_mlir expects a braze.Module, an mlir.ir.Module or IR text, "
                         f"got {type(module_or_text).__name__}")
    run_pipeline(module, pipeline(options))
    module_op = module.mlir_module.operation
    func = select_entry(_functions(module_op), entry)
    operations = list(func.regions[0].blocks[0].operations)
    kernels = [op for op in operations if op.operation.name == "braze.kernel"]
    unit = emit(kernels, plan_launches(operations))
    cache = NativeCache(directory=options["cache_dir"], flags=DEFAULT_FLAGS + COMPILE_FLAGS)
    compilations = cache.compilations
    library = cache.load(unit.source) if kernels else None
    program = Program(module_op, func, library, list(unit.kernels.values()), unit.launches, parameters)
    stats = {
        "kernels": program.kernel_count,
        "gemms": sum(program.library_calls[name] for name in ("braze.matmul", "braze.bmm", "braze.addmm")),
        "convolutions": program.library_calls["braze.convolution"],
        "attentions": program.library_calls["braze.attention"],
        # aten ops run through torch because braze does not lower them.
        "externs": sum(program.extern_calls.values()),
        "extern_ops": dict(program.extern_calls),
        "cache_hit": bool(kernels) and cache.compilations == compilations,
        "compile_seconds": time.perf_counter() - started,
        "source": cache.entry(unit.source) / "source.cpp" if kernels else None,
    }
    return CompiledProgram(module, program, stats)


class CompiledModel:
    """`braze.compile`'s result: called with the model's inputs, returns
    what the model returns."""

    def __init__(self, exported, compiled: CompiledProgram):
        from torch.utils import _pytree as pytree

        self.exported = exported
        self.compiled = compiled
        self.stats = compiled.stats
        in_spec, out_spec = exported._in_spec, exported._out_spec
        # A model called with positional tensors only, returning one tensor,
        # needs no pytree work per call.
        arity = len(compiled.program.argument_types)
        flat_spec = pytree.tree_flatten(((0,) * arity, {}))[1]
        self._flat_inputs = arity if in_spec == flat_spec else None
        # Outputs: one tensor, a flat tuple, or a structure pytree rebuilds.
        self._single_output = out_spec is not None and out_spec.is_leaf()
        self._flat_outputs = out_spec is not None and out_spec.type is tuple and all(
            child.is_leaf() for child in out_spec.children())

    @property
    def module(self) -> Module:
        return self.compiled.module

    def __call__(self, *args, **kwargs):
        from torch.utils import _pytree as pytree

        if kwargs or self._flat_inputs is None or len(args) != self._flat_inputs:
            flat, spec = pytree.tree_flatten((args, kwargs))
            if self.exported._in_spec is not None and spec != self.exported._in_spec:
                raise BrazeError(f"inputs do not match the compiled signature:\n got {spec}\n"
                                 f" expected {self.exported._in_spec}")
            flat = self.exported.imported.arguments(flat)
        else:
            flat = args  # the signature is a flat tuple of tensors; the program checks each
        outputs = self.exported.imported.outputs(self.compiled(*flat))
        if self._single_output:
            return outputs[0]
        if self._flat_outputs:
            return tuple(outputs)
        return pytree.tree_unflatten(outputs, self.exported._out_spec)


def compile(model, example_args, *, kwargs: dict | None = None, dynamic_shapes=None, target: str = "cpu",
            options: dict | None = None) -> CompiledModel:
    """Captures `model(*example_args, **kwargs)` (see `braze.export`) and compiles it
    for `target`. Dims marked in `dynamic_shapes` stay symbolic: one compile
    serves every size in their ranges."""
    from braze.frontend import export

    _check_target(target)
    _options(options)
    exported = export(model, example_args, kwargs, dynamic_shapes=dynamic_shapes)
    compiled = compile_mlir(exported.module, target, parameters=exported.parameters, options=options)
    # The aten ops torch.export captured, against which externs are counted.
    compiled.stats["captured_ops"] = exported.imported.op_count
    return CompiledModel(exported, compiled)


def _compile_imported(imported):
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # AOTAutograd calls this under its fake mode; the program evaluates
    # constants with real tensors.
    with unset_fake_temporarily():
        return compile_mlir(imported.module, "cpu")


def dynamo_backend(graph_module, example_inputs, **kwargs):
    """`torch.compile(model, backend="braze")`: every graph is compiled for
    the CPU (registered as the torch_dynamo_backends entry point "braze")."""
    from braze.frontend.dynamo import make_backend

    return make_backend(_compile_imported)(graph_module, example_inputs, **kwargs)
