"""Code generators: each prints the kernel form for one target.

`emit(module, target)` prints every `braze.kernel` of a module for one of
`LANGUAGES` (captured IR is first taken to the kernel form by the default
kernel-form pipeline); `renderer_class(target)` is the renderer class behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from braze.codegen.analysis import function_kernels
from braze.errors import BrazeError

# Target name -> the module and class of its renderer.
_RENDERERS = {
    "cpu": ("braze.codegen.cpp.emitter", "CppRenderer"),
    "cuda": ("braze.codegen.cuda", "CudaRenderer"),
    "hip": ("braze.codegen.cuda", "HipRenderer"),
    "opencl": ("braze.codegen.opencl", "OpenCLRenderer"),
    "metal": ("braze.codegen.metal", "MetalRenderer"),
    "triton": ("braze.codegen.triton", "TritonRenderer"),
}
LANGUAGES = tuple(_RENDERERS)


@dataclass
class Emitted:
    """The source of every kernel of a function, and their launch ABI."""

    source: str
    kernels: dict  # kernel name -> KernelSpec, in program order
    extension: str
    launches: dict = field(default_factory=dict)  # combo launch function -> its sub-kernels
    # C-like GPU renderers: combo launch function -> (sub-kernel, buffer) of
    # each buffer parameter (codegen/gpu_combo.py).
    launch_buffers: dict = field(default_factory=dict)


def renderer_class(target: str):
    if target not in _RENDERERS:
        raise BrazeError(f"no renderer for target {target!r} (renderers: {', '.join(LANGUAGES)})")
    import importlib

    module, name = _RENDERERS[target]
    return getattr(importlib.import_module(module), name)


def function_operations(func) -> list:
    """The ops of `func` in program order, the ops of each braze.switch and
    braze.while region right after the op (in region order): the order the
    executor builds steps in, so the n-th kernel here is the n-th it meets.
    A region's ops never join a run of kernels outside it (the op itself
    stands between them)."""
    operations = []

    def visit(block):
        for op in block.operations:
            operations.append(op)
            if op.operation.name in ("braze.switch", "braze.while"):
                for region in op.operation.regions:
                    visit(region.blocks[0])

    visit(func.regions[0].blocks[0])
    return operations


def emit_kernels(operations: list, target: str, threads: int | None = None) -> Emitted:
    """The source of the braze.kernel ops among `operations` (one function's
    ops in order) for `target`; `threads` per block on GPUs."""
    kernels, combos = function_kernels(operations)
    chosen = renderer_class(target)
    if target == "cpu":
        from braze.codegen.cpp.emitter import emit

        unit = emit(kernels, combos)
        return Emitted(unit.source, unit.kernels, chosen.extension, unit.launches)
    if target == "triton":
        from braze.codegen.triton import render_unit

        source, specs, launches = render_unit(kernels, combos, threads)
        return Emitted(source, specs, chosen.extension, launches)
    from braze.codegen.gpu import DEFAULT_THREADS, render_unit

    unit = render_unit(chosen, kernels, combos, threads=threads or DEFAULT_THREADS)
    return Emitted(unit.source, unit.kernels, chosen.extension, unit.launches, unit.launch_buffers)


def emit(module, target: str, threads: int | None = None) -> dict[str, Emitted]:
    """Per function of `module` (a braze.Module, an mlir.ir.Module or IR
    text), its kernels' source for `target`. IR not yet in the kernel form
    goes through `kernel_form_pipeline()` first, on a copy."""
    from braze.ir import Module, parse
    from braze.passes import kernel_form_pipeline, run_pipeline

    renderer_class(target)  # an unknown target fails before any work
    if isinstance(module, str):
        copy = parse(module)
    elif isinstance(module, Module):
        copy = parse(module.operation.get_asm(enable_debug_info=True))
    else:
        copy = parse(module.operation.get_asm(enable_debug_info=True))
    text = str(copy)
    if "braze.kernel" not in text:
        run_pipeline(copy, kernel_form_pipeline())
    emitted = {}
    for func in copy.mlir_module.body.operations:
        if func.operation.name == "func.func":
            name = func.attributes["sym_name"].value
            emitted[name] = emit_kernels(function_operations(func), target, threads)
    return emitted
