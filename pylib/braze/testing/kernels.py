"""Kernel-form modules to render and compile in target tests: the functions
of captured models after a target's pipeline."""

from __future__ import annotations

from braze.ir import parse


def kernel_form(module, pipeline: str):
    """A copy of `module` (a braze.Module, or its text) taken to the kernel
    form by `pipeline`, and the generated ops of its functions (braze.kernel,
    braze.fused_gemm, braze.flash_attention; a combo's sub-kernels included)."""
    from braze.codegen import function_operations
    from braze.codegen.analysis import GENERATED_OPS, combo_kernels
    from braze.passes import run_pipeline

    text = module if isinstance(module, str) else module.operation.get_asm(enable_debug_info=True)
    copy = parse(text)
    run_pipeline(copy, pipeline)
    kernels = []
    for func in copy.mlir_module.body.operations:
        if func.operation.name != "func.func":
            continue
        for op in function_operations(func):  # with the kernels inside control-flow regions
            if op.operation.name in GENERATED_OPS:
                kernels.append(op)
            elif op.operation.name == "braze.combo":  # its sub-kernels, each renderable alone too
                kernels.extend(combo_kernels(op))
    return copy, kernels


def emitted_operations(module) -> list:
    """What a target's `emit` takes for the functions of `module` (in the
    kernel form): their kernels and combos in program order."""
    from braze.codegen import function_operations
    from braze.codegen.analysis import GENERATED_OPS

    return [op for func in module.mlir_module.body.operations if func.operation.name == "func.func"
            for op in function_operations(func) if op.operation.name in (*GENERATED_OPS, "braze.combo")]
