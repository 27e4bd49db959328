"""Flash attention in the C-like GPU renderers (codegen/gpu_attention.py):
one thread per query row, keys and values staged through shared memory, an
online softmax; run on OpenCL (PoCL) and Metal (the C++ shim) against
eager PyTorch; the CUDA, HIP and OpenCL sources built by NVRTC and nvcc (no
spills), hipcc and ocloc (no GPU needed)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import torch
import torch.nn.functional as F
from conftest import (assert_builds_for_every_gpu, assert_close_with_nans, emitted_unit, need, need_program,
                      torch_compile_without_fallback)
from conftest import random_tensor as _random

import braze
import braze.codegen
from braze import target as targets
from braze.ir import parse
from braze.testing.modules import Apply, attention_for_projection, window_attention_for_projection

# f16: eager rounds q k^T and the softmax to f16 on the way; braze keeps f32 to the end.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 3e-2}
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(params=["opencl", "metal"])
def target(request):
    need(f"the {request.param} target", targets.get(request.param).compiler_missing())
    return request.param


def _check(function, args, target, dtype=torch.float32, **compile_options):
    compiled = braze.compile(Apply(function), args, target=target, **compile_options)
    assert compiled.stats["flash_attentions"] == 1
    assert "v_tile[" in compiled.stats["source"].read_text()
    assert_close_with_nans(compiled(*args), function(*args), TOLERANCE[dtype])
    return compiled


def _plain(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def _additive(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)


def _gqa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def _boolean(L, S, seed=5):
    """A boolean [L, S] mask keeping about 3 keys in 4, every row one key at least."""
    keep = torch.rand(L, S, generator=torch.Generator().manual_seed(seed)) < 0.75
    keep[:, 0] = True
    return keep


# (function, shapes [q, k, v, mask?], mask kind): L of 37 (two blocks of 32
# query rows, the second partly empty) and S of 45 (three blocks of 16 keys,
# the last partly empty); additive masks per batch and broadcast over heads;
# causal with L below S and above it (top-left aligned: query i keeps keys
# 0..i); GQA with groups of 2 and 4; a decode step (L = 1); a single key
# (S = 1); no heads, and no batch either.
CASES = {
    "plain": (_plain, [(2, 3, 37, 16), (2, 3, 45, 16), (2, 3, 45, 24)], None),
    "additive_mask": (_additive, [(2, 3, 37, 16), (2, 3, 45, 16), (2, 3, 45, 16), (2, 1, 37, 45)], "float"),
    "boolean_mask": (_additive, [(2, 3, 37, 16), (2, 3, 45, 16), (2, 3, 45, 16), (37, 45)], "bool"),
    "causal": (_causal, [(1, 2, 37, 32), (1, 2, 50, 32), (1, 2, 50, 32)], None),
    "gqa_2": (_gqa, [(1, 4, 20, 16), (1, 2, 45, 16), (1, 2, 45, 16)], None),
    "gqa_4": (_gqa, [(2, 8, 20, 16), (2, 2, 45, 16), (2, 2, 45, 16)], None),
    "decode": (_plain, [(2, 4, 1, 64), (2, 4, 45, 64), (2, 4, 45, 64)], None),
    "one_key": (_plain, [(2, 4, 9, 16), (2, 4, 1, 16), (2, 4, 1, 16)], None),
    "causal_more_queries": (_causal, [(1, 2, 40, 8), (1, 2, 17, 8), (1, 2, 17, 8)], None),
    "rank_3": (_plain, [(3, 7, 8), (3, 11, 8), (3, 11, 8)], None),
    "rank_2": (_plain, [(7, 8), (11, 8), (11, 8)], None),
}


def _arguments(case: str, dtype):
    function, shapes, mask = CASES[case]
    args = [_random(*shape, dtype=dtype, seed=n) for n, shape in enumerate(shapes[:3])]
    if mask == "float":
        args.append(_random(*shapes[3], dtype=dtype, seed=3))
    elif mask == "bool":
        args.append(_boolean(*shapes[3]))
    return function, tuple(args)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_flash_attentions_match_eager(target, case, dtype):
    dtype = DTYPES[dtype]
    function, args = _arguments(case, dtype)
    _check(function, args, target, dtype)


def test_bf16_matches_eager(target):
    function, args = _arguments("additive_mask", torch.bfloat16)
    _check(function, args, target, torch.bfloat16)


def test_a_fully_masked_row_is_what_eager_gives(target):
    """A boolean mask with no key kept in row 3: SDPA's value for it (0)."""
    keep = _boolean(37, 45)
    keep[3] = False
    args = (_random(2, 3, 37, 16), _random(2, 3, 45, 16, seed=1), _random(2, 3, 45, 16, seed=2), keep)
    _check(_additive, args, target)


def test_strided_and_broadcast_operands(target):
    """q a transposed view; k and v shared by every batch and head (size-1
    dims read at 0)."""

    def attention(x, k, v):
        return F.scaled_dot_product_attention(x.transpose(1, 2), k, v)

    _check(attention, (_random(2, 33, 4, 16), _random(1, 1, 50, 16, seed=1), _random(1, 1, 50, 16, seed=2)), target)


@pytest.mark.parametrize("case", ["projection", "windows"])
def test_a_result_read_in_another_order_is_written_so(target, case):
    """The output projection's order ([B, L, H * E]) written by the kernel
    itself (result_order): no other kernel, eager's values."""
    function, shapes = {"projection": (attention_for_projection, [(2, 3, 37, 16), (2, 3, 45, 16), (2, 3, 45, 24)]),
                        "windows": (window_attention_for_projection, [(2, 4, 3, 7, 8)] * 3)}[case]
    compiled = _check(function, tuple(_random(*shape, seed=n) for n, shape in enumerate(shapes)), target)
    assert "result_order" in str(compiled.module) and compiled.stats["kernels"] == 1


def test_empty_head_dims(target):
    """E = 0 (every score 0: each row the mean of the values it keeps) and Ev = 0 (an empty result)."""
    for e, ev in ((0, 8), (8, 0)):
        _check(_causal, (_random(1, 2, 5, e), _random(1, 2, 7, e, seed=1), _random(1, 2, 7, ev, seed=2)), target)


def test_nan_inputs_give_nan_rows_as_in_eager(target):
    """A NaN in a query row makes that row NaN; a NaN key every row of its head."""
    q, k, v = _random(1, 2, 40, 16), _random(1, 2, 70, 16, seed=1), _random(1, 2, 70, 16, seed=2)
    q[0, 1, 5] = float("nan")
    k[0, 0, 65] = float("nan")
    _check(_plain, (q, k, v), target)


def test_dynamic_lengths_serve_every_length(target):
    """L and S dynamic (a prefill and a decode step from one compile)."""
    length, keys = torch.export.Dim("length", min=1, max=4096), torch.export.Dim("keys", min=1, max=4096)
    args = (_random(1, 2, 37, 16), _random(1, 2, 45, 16, seed=1), _random(1, 2, 45, 16, seed=2))
    compiled = _check(_plain, args, target, dynamic_shapes=(({2: length}, {2: keys}, {2: keys}),))
    for l, s in ((1, 70), (64, 3), (33, 33)):
        q, k, v = _random(1, 2, l, 16, seed=l), _random(1, 2, s, 16, seed=s), _random(1, 2, s, 16, seed=s + 1)
        assert_close_with_nans(compiled(q, k, v), _plain(q, k, v), TOLERANCE[torch.float32])


class SpelledOut(torch.nn.Module):
    """softmax(q k^T * s + mask) @ v written out, as older models do:
    braze-form-attention makes one attention of it."""

    def forward(self, q, k, v, mask):
        scores = q @ k.transpose(-2, -1) * 0.125 + mask
        return torch.softmax(scores, dim=-1) @ v


def test_a_spelled_out_attention_runs_end_to_end_on_opencl():
    """The written-out attention with an additive mask of -inf for some
    keys and every key of row 5 (the softmax's NaN row, kept NaN)."""
    need("the opencl target", targets.get("opencl").compiler_missing())
    mask = torch.zeros(1, 1, 40, 40)
    mask[..., 30:] = float("-inf")
    mask[..., 5, :] = float("-inf")
    args = (_random(2, 4, 40, 64), _random(2, 4, 40, 64, seed=1), _random(2, 4, 40, 64, seed=2), mask)
    compiled = braze.compile(SpelledOut(), args, target="opencl")
    assert compiled.stats["flash_attentions"] == 1
    expected = SpelledOut()(*args)
    assert expected[:, :, 5].isnan().all()
    assert_close_with_nans(compiled(*args), expected, TOLERANCE[torch.float32])


def test_a_soft_capped_attention_matches_eager(target):
    """Gemma 2's soft cap (braze-form-attention's `softcap`) in the target's
    tanh, before an additive mask."""
    from braze.testing.modules import SoftCappedAttention

    args = (_random(2, 3, 37, 16), _random(2, 3, 45, 16, seed=1), _random(2, 3, 45, 16, seed=2),
            _random(2, 1, 37, 45, seed=3))
    compiled = braze.compile(SoftCappedAttention(), args, target=target)
    assert compiled.stats["flash_attentions"] == 1 and "tanh" in compiled.stats["source"].read_text()
    assert_close_with_nans(compiled(*args), SoftCappedAttention()(*args), TOLERANCE[torch.float32])


def test_the_report_and_the_trace_name_the_attention_kernel(tmp_path):
    """The compile report boxes the flash attention under the kernel name
    its source and the profiler's trace use."""
    need("the opencl target", targets.get("opencl").compiler_missing())
    need_program("dot")
    args = (_random(1, 2, 20, 16), _random(1, 2, 20, 16, seed=1), _random(1, 2, 20, 16, seed=2))
    compiled = braze.compile(Apply(_plain), args, target="opencl", options={"report": str(tmp_path / "r.html")})
    (name,) = re.findall(r"__kernel void (\w+)\(", compiled.stats["source"].read_text())
    html = compiled.stats["report"].read_text()
    after = html[html.index('id="after-fusion"'):]
    assert f'id="kernel&#45;{name}"' in after[:after.index("</svg>")]
    with braze.profile() as tracer:
        compiled(*args)
    assert [e["name"] for e in tracer.trace()["traceEvents"] if e.get("cat") == "kernel"] == [name]


def test_torch_compile_runs_a_transformer_block_with_no_fallback(target):
    """RMSNorm, q/k/v projections, causal GQA attention, the output
    projection and residual through torch.compile(backend="braze"): the
    attention a generated kernel beside a fused GEMM, no graph in eager."""
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.kv, self.o = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)

        def forward(self, x):
            b, l, _ = x.shape
            h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
            q = self.q(h).view(b, l, 4, 16).transpose(1, 2)
            k, v = self.kv(h).view(b, l, 2, 2, 16).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            return x + self.o(y.transpose(1, 2).reshape(b, l, 64))

    model = Block().eval()
    x = torch.randn(2, 37, 64)
    with torch.no_grad():
        assert braze.compile(model, (x,), target=target).stats["flash_attentions"] == 1
    actual, expected = torch_compile_without_fallback(model, x, target)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)


def test_the_pipelines_lower_attention():
    for name in ("opencl", "cuda", "hip", "metal"):
        target = targets.get(name)
        assert target.flash_attention_missing() is None
        assert "braze-lower-attention{halves=true q-block=32 kv-block=16" in target.pipeline(
            target.options({"flash_attention": True}))
    # CUDA and HIP keep PyTorch's attention unless asked (docs/targets.md: their library is untimed against it).
    for name, lowered in (("opencl", True), ("metal", True), ("cuda", False), ("hip", False)):
        target = targets.get(name)
        assert ("braze-lower-attention" in target.pipeline(target.options())) == lowered, name


FLASH = """
func.func @f(%q: tensor<1x2x8x{e}x{t}>, %k: tensor<1x2x8x{e}x{t}>, %v: tensor<1x2x8x{e}x{t}>)
    -> tensor<1x2x8x{e}x{t}> {{
  %o = braze.flash_attention %q, %k, %v scale 0.25 q_block {q} kv_block 16
      : tensor<1x2x8x{e}x{t}>, tensor<1x2x8x{e}x{t}>, tensor<1x2x8x{e}x{t}> -> tensor<1x2x8x{e}x{t}>
  return %o : tensor<1x2x8x{e}x{t}>
}}"""


def test_what_is_refused_is_refused_by_name():
    with pytest.raises(braze.BrazeError, match=r"E = 256 and Ev = 256 with q_block 32 and kv_block 16 need 65536 "
                                               r"bytes of shared memory in float, more than the 32768"):
        braze.codegen.emit(parse(FLASH.format(e=256, t="f32", q=32)), "cuda")
    with pytest.raises(braze.BrazeError, match="the Metal renderer has no type for f64"):
        braze.codegen.emit(parse(FLASH.format(e=16, t="f64", q=8)), "metal")
    dynamic = FLASH.format(e=16, t="f32", q=8).replace("8x16", "8x?")
    with pytest.raises(braze.BrazeError, match="the OpenCL C renderer needs static head dims"):
        braze.codegen.emit(parse(dynamic), "opencl")


def test_f64_accumulates_in_double():
    need("the opencl target", targets.get("opencl").compiler_missing())
    args = (_random(1, 2, 37, 16, dtype=torch.float64), _random(1, 2, 45, 16, dtype=torch.float64, seed=1),
            _random(1, 2, 45, 16, dtype=torch.float64, seed=2))
    compiled = braze.compile(Apply(_causal), args, target="opencl")
    assert compiled.stats["flash_attentions"] == 1
    torch.testing.assert_close(compiled(*args), _causal(*args), rtol=1e-12, atol=1e-12)


# -- ahead-of-time builds ------------------------------------------------------
# Every form at real head dims: f32 with head dim 128 and a boolean mask
# (the largest tiles that fit), bf16 causal GQA at 64 with a soft cap, f16
# with an additive mask and dynamic L and S.
AOT = """
func.func @f(%q: tensor<2x8x?x128xf32>, %k: tensor<2x8x?x128xf32>, %v: tensor<2x8x?x128xf32>, %m: tensor<?x?xi1>,
             %hq: tensor<1x8x?x64xbf16>, %hk: tensor<1x2x?x64xbf16>, %hv: tensor<1x2x?x64xbf16>,
             %fq: tensor<1x4x?x64xf16>, %fk: tensor<1x4x?x64xf16>, %fv: tensor<1x4x?x64xf16>,
             %fm: tensor<1x1x?x?xf16>)
    -> (tensor<2x8x?x128xf32>, tensor<1x8x?x64xbf16>, tensor<1x4x?x64xf16>) {
  %a = braze.attention %q, %k, %v mask %m : tensor<2x8x?x128xf32>, tensor<2x8x?x128xf32>, tensor<2x8x?x128xf32>,
      tensor<?x?xi1> -> tensor<2x8x?x128xf32>
  %b = braze.attention %hq, %hk, %hv softcap 50.0 causal gqa : tensor<1x8x?x64xbf16>, tensor<1x2x?x64xbf16>,
      tensor<1x2x?x64xbf16> -> tensor<1x8x?x64xbf16>
  %c = braze.attention %fq, %fk, %fv mask %fm : tensor<1x4x?x64xf16>, tensor<1x4x?x64xf16>, tensor<1x4x?x64xf16>,
      tensor<1x1x?x?xf16> -> tensor<1x4x?x64xf16>
  return %a, %b, %c : tensor<2x8x?x128xf32>, tensor<1x8x?x64xbf16>, tensor<1x4x?x64xf16>
}"""


def _aot_unit(target_name: str, **options):
    target, chosen, unit = emitted_unit(target_name, AOT, flash_attention=True, **options)
    assert sum(spec.strategy == "attention_rows" for spec in unit.kernels.values()) == 3
    return target, chosen, unit


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_the_cuda_attentions_build_an_sm90_cubin_without_spills_or_stack(compiler):
    if compiler == "nvcc":
        need_program("nvcc")
    _, options, unit = _aot_unit("cuda", compiler=compiler)
    assert_builds_for_every_gpu("cuda", unit, options, stack_frames=True)


@pytest.mark.parametrize("target_name", ["hip", "opencl"])
def test_the_hip_and_ocloc_builds(target_name):
    """gfx90a through hipcc, pvc through ocloc."""
    _, options, unit = _aot_unit(target_name)
    assert_builds_for_every_gpu(target_name, unit, options)


def test_the_hip_attentions_use_no_scratch(tmp_path):
    """hipcc's resource remarks for gfx90a, the toolchain's flags: every
    kernel keeps its accumulator and scores in registers."""
    need_program("hipcc")
    _, _, unit = _aot_unit("hip")
    source = tmp_path / "source.hip"
    source.write_text(unit.source)
    run = subprocess.run(["hipcc", "--genco", "--offload-arch=gfx90a", "-x", "hip",
                          "-Rpass-analysis=kernel-resource-usage", str(source), "-o", str(tmp_path / "kernels.hsaco")],
                         env={**os.environ, "HIP_PLATFORM": "amd"}, capture_output=True, text=True, check=True)
    scratch = re.findall(r"ScratchSize \[bytes/lane\]: (\d+)", run.stderr)
    assert scratch == ["0"] * len(unit.kernels), run.stderr
