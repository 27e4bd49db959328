"""The renderer family without compilers: every renderer has a rule for
every op the kernel form allows, renders every capture-suite kernel, and
spells the GPU structure (threads, block trees, barriers, failure flags)
as its target expects."""

import re
from pathlib import Path

import pytest
from kernels import MODEL_NAMES, model_kernels

import braze
import braze.codegen
from braze.codegen.analysis import KERNEL_BODY_OPS, KernelAnalysis
from braze.codegen.cpp.emitter import CppRenderer
from braze.codegen.cuda import CudaRenderer, HipRenderer
from braze.codegen.gpu import STRATEGIES, render_source
from braze.codegen.gpu_attention import STRATEGY as ATTENTION_STRATEGY
from braze.codegen.gpu_gemm import STRATEGIES as GEMM_STRATEGIES
from braze.codegen.metal import MetalRenderer
from braze.codegen.opencl import OpenCLRenderer
from braze.codegen.triton import TritonRenderer, render_module
from braze.codegen.triton.emitter import STRATEGIES as TRITON_STRATEGIES
from braze.runtime.autotune import TILED
from braze.testing.kernels import kernel_form

RENDERERS = [CppRenderer, CudaRenderer, HipRenderer, OpenCLRenderer, MetalRenderer]
GPU_RENDERERS = RENDERERS[1:]
# Every renderer with a rule table, the Triton one (blocks, not scalars) included.
RULE_TABLES = RENDERERS + [TritonRenderer]
LOWER_KERNELS = Path(__file__).parents[3] / "cxx" / "Transforms" / "LowerKernels.cpp"


def _mlir_name(dialect: str, class_name: str) -> str:
    """arith::MaximumFOp -> arith.maximumf (ODS class to op name)."""
    special = {"IndexCast": "index_cast", "ConstantIndex": "constant"}
    stem = class_name[:-2]
    return f"{dialect}.{special.get(stem, stem.lower())}"


def test_the_kernel_body_ops_cover_what_lower_kernels_creates():
    created = {_mlir_name(d, c) for d, c in re.findall(r"\b(arith|math|tensor)::(\w+Op)\b", LOWER_KERNELS.read_text())}
    created.discard("tensor.dim")  # an extent operand, made outside the kernel body
    assert created and created <= KERNEL_BODY_OPS, sorted(created - KERNEL_BODY_OPS)


@pytest.mark.parametrize("renderer", RULE_TABLES, ids=lambda r: r.__name__)
def test_every_renderer_has_a_rule_for_every_kernel_body_op(renderer):
    assert renderer.missing_rules() == []


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_every_capture_suite_kernel_renders_as_triton(model):
    _, kernels = model_kernels(model)
    source, specs = render_module(kernels)
    compile(source, model, "exec")  # valid Python
    assert len(specs) == len(kernels) and source.count("@triton.jit\ndef ") >= len(kernels)
    for name, spec in specs.items():
        assert spec.strategy in TRITON_STRATEGIES + TILED and f"def {name}(" in source


@pytest.mark.parametrize("model", MODEL_NAMES)
@pytest.mark.parametrize("renderer", GPU_RENDERERS, ids=lambda r: r.__name__)
def test_every_capture_suite_kernel_renders(renderer, model):
    _, kernels = model_kernels(model)
    source, specs = render_source(renderer, kernels, threads=128)  # the schedule attribute wins
    assert len(specs) == len(kernels)
    for name, spec in specs.items():
        assert f" {name}(" in source
        if spec.strategy == ATTENTION_STRATEGY:  # a thread per query row: q_block threads
            assert 1 <= spec.threads <= 32
        else:
            assert spec.strategy in STRATEGIES + GEMM_STRATEGIES and 32 <= spec.threads <= 256


SUM_ROWS = """
func.func @f(%x: tensor<?x300xbf16>) -> (tensor<?xbf16>, tensor<?xi64>) {
  %s = braze.sum %x dims [1] : tensor<?x300xbf16> -> tensor<?xbf16>
  %a = braze.argmax %x dims [1] : tensor<?x300xbf16> -> tensor<?xi64>
  return %s, %a : tensor<?xbf16>, tensor<?xi64>
}"""

POINTWISE = """
func.func @f(%a: tensor<8x16xi64>, %b: tensor<16xi64>) -> tensor<8x16xi64> {
  %q = braze.div %a, %b : tensor<8x16xi64>, tensor<16xi64> -> tensor<8x16xi64>
  return %q : tensor<8x16xi64>
}"""


def _render(renderer, text, threads=256):
    _, kernels = kernel_form(braze.parse(text), "func.func(braze-fuse-pointwise,braze-lower-kernels),cse")
    return render_source(renderer, kernels, threads=threads)


def test_argmax_source_is_valid_ir():
    _render(CudaRenderer, SUM_ROWS)  # the IR above parses and lowers


@pytest.mark.parametrize("renderer, shared, barrier, thread", [
    (CudaRenderer, "__shared__", "__syncthreads();", "threadIdx.x"),
    (HipRenderer, "__shared__", "__syncthreads();", "threadIdx.x"),
    (OpenCLRenderer, "__local", "barrier(CLK_LOCAL_MEM_FENCE);", "get_local_id(0)"),
    (MetalRenderer, "threadgroup", "threadgroup_barrier(mem_flags::mem_threadgroup);", "bz_tid"),
], ids=lambda v: getattr(v, "__name__", None))
def test_a_row_reduction_is_a_block_tree_through_shared_memory(renderer, shared, barrier, thread):
    source, specs = _render(renderer, SUM_ROWS, threads=64)
    assert len(specs) == 2  # the sum and the argmax are siblings: one kernel each
    for spec in specs.values():
        assert spec.one_block_per_row and spec.threads == 64 and spec.static_domain == [None, 300]
    assert f"{shared} float v" in source and "[64];" in source
    assert f"{shared} int64_t v" in source  # argmax keeps the index of each thread's best
    assert source.count(barrier) == 4  # two trees, each: one barrier before, one per level
    assert "for (int s = 32; s > 0; s >>= 1)" in source
    assert f"const int64_t tid = {thread};" in source
    assert "for (int64_t r = tid; r < reduce_points; r += 64)" in source
    assert "bz_bf16_to_f32(in0[" in source and "bz_f32_to_bf16(" in source  # bf16 in, bf16 out
    assert "if (tid == 0) {" in source
    assert "#include <cuda_fp16.h>" not in source  # NVRTC has no headers


def test_a_pointwise_kernel_is_one_thread_per_point_and_reports_division_by_zero():
    source, specs = _render(OpenCLRenderer, POINTWISE)
    (spec,) = specs.values()
    assert not spec.one_block_per_row and spec.can_fail
    assert "const int64_t point = (int64_t)get_group_id(0) * 256 + get_local_id(0);" in source
    assert "if (point >= n0 * n1) return;" in source
    assert "failed[0] = 1" in source
    assert "__global const int64_t* in1" in source  # the broadcast input, read at [i1]
    assert re.search(r"in1\[i1\]", source)


def test_metal_refuses_double_and_names_the_type():
    text = """
    func.func @f(%x: tensor<4xf64>) -> tensor<4xf64> {
      %y = braze.exp %x : tensor<4xf64>
      return %y : tensor<4xf64>
    }"""
    with pytest.raises(braze.BrazeError, match="the Metal renderer has no type for f64"):
        _render(MetalRenderer, text)


def test_threads_must_be_a_power_of_two():
    _, kernels = kernel_form(braze.parse(POINTWISE), "func.func(braze-lower-kernels)")
    with pytest.raises(braze.BrazeError, match="power of two, got 96"):
        CudaRenderer(KernelAnalysis(kernels[0], "k"), threads=96)


def test_codegen_emit_takes_captured_ir_and_names_unknown_targets():
    emitted = braze.codegen.emit(POINTWISE, "hip", threads=64)
    (function,) = emitted.values()
    assert list(emitted) == ["f"] and function.extension == ".hip" and len(function.kernels) == 1
    assert "__launch_bounds__(64)" in function.source
    with pytest.raises(braze.BrazeError, match="no renderer for target 'tpu'"):
        braze.codegen.emit(POINTWISE, "tpu")


def test_the_schedule_attribute_chooses_one_thread_per_short_row():
    text = """
    func.func @f(%x: tensor<?x10xf32>) -> tensor<?xi64> {
      %a = braze.argmax %x dims [1] : tensor<?x10xf32> -> tensor<?xi64>
      return %a : tensor<?xi64>
    }"""
    _, kernels = kernel_form(braze.parse(text), "func.func(braze-lower-kernels,braze-gpu-schedule{target=opencl threads=64})")
    source, specs = render_source(OpenCLRenderer, kernels, threads=256)
    (spec,) = specs.values()
    assert spec.strategy == "row_per_thread" and spec.threads == 64 and not spec.one_block_per_row
    assert "barrier(" not in source and "__local" not in source
    assert "const int64_t point = (int64_t)get_group_id(0) * 64 + get_local_id(0);" in source
    assert "if (point >= n0) return;" in source
    assert "for (int64_t r = 0; r < reduce_points; ++r) {" in source
    assert spec.blocks([130, 10]) == 3  # ceil(130 rows / 64 threads)
