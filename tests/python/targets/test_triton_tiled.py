"""The Triton target's tiled kernels without a GPU: fused GEMMs
(codegen/triton/gemm.py) and flash attention (codegen/triton/attention.py)
run in Triton's interpreter (TRITON_INTERPRET=1, set for the session by
tests/python/conftest.py) against eager, compile ahead of time for sm_90
and gfx942, and the autotuner weighs a fused GEMM against its unfused
alternative. Shapes are small: the interpreter runs a tl.dot per program."""

import pytest
import torch
import torch.nn.functional as F
from conftest import need
from gemm_cases import INTEGER_GEMM, QUANTISED, SCALED, SCALED_RESIDUAL, quantised

import braze
import braze.reference
from braze import target as targets
from braze.codegen.triton.emitter import render_module
from braze.runtime import autotune
from braze.runtime.autotune import Tuner, config_space
from braze.target.triton import aot_compile
from braze.testing.kernels import kernel_form
from braze.testing.modules import Apply, attention_for_projection, window_attention_for_projection

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    need("the triton target", targets.get("triton").compiler_missing())


def _check(function, args, dtype=torch.float32, fused_gemms=0, flash_attentions=0, **compile_options):
    compiled = braze.compile(Apply(function), args, target="triton", **compile_options)
    assert compiled.stats["fused_gemms"] == fused_gemms and compiled.stats["flash_attentions"] == flash_attentions
    _compare(compiled(*args), function(*args), dtype)
    return compiled


def _compare(actual, expected, dtype):
    actual = actual if isinstance(actual, (tuple, list)) else (actual,)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    for a, e in zip(actual, expected, strict=True):
        assert a.dtype == e.dtype
        assert torch.equal(torch.isnan(a), torch.isnan(e)), "NaN rows differ"
        torch.testing.assert_close(a.double().nan_to_num(), e.double().nan_to_num(),
                                   rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


def _random(*shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# -- fused GEMMs ----------------------------------------------------------------
def _linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b))


def _linear_residual(x, w, r):
    return F.linear(x, w) + r


def _batched(a, b, c):
    return torch.bmm(a, b) * 0.5 + c


def _transposed(x, w, b):
    return torch.relu(x.mT @ w + b)


# (function, argument shapes): nn.Linear's transposed weight, a residual
# read at (m, n), a batch on the grid's second axis, one row (decode), K not
# a multiple of BLOCK_K, a transposed left operand.
GEMMS = {
    "linear_bias_gelu": (_linear_gelu, [(10, 40), (24, 40), (24,)]),
    "linear_residual": (_linear_residual, [(10, 40), (24, 40), (10, 24)]),
    "batched": (_batched, [(3, 9, 20), (3, 20, 18), (3, 9, 18)]),
    "one_row": (_linear_gelu, [(1, 40), (24, 40), (24,)]),
    "odd_k": (_linear_gelu, [(10, 70), (24, 70), (24,)]),
    "transposed_lhs": (_transposed, [(40, 10), (40, 24), (24,)]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("case", sorted(GEMMS))
def test_fused_gemms_match_eager(interpreter, case, dtype):
    function, shapes = GEMMS[case]
    args = tuple(_random(*shape, dtype=dtype, seed=n) for n, shape in enumerate(shapes))
    compiled = _check(function, args, dtype, fused_gemms=1)
    assert "tl.dot(a, b, acc" in compiled.stats["source"].read_text()


def test_a_dynamic_m_serves_every_row_count(interpreter):
    rows = torch.export.Dim("rows", min=1, max=4096)
    args = (_random(10, 40), _random(24, 40, seed=1), _random(24, seed=2))
    compiled = _check(_linear_gelu, args, fused_gemms=1, dynamic_shapes=(({0: rows}, None, None),))
    for m in (1, 7, 33, 130):
        x = _random(m, 40, seed=m)
        _compare(compiled(x, *args[1:]), _linear_gelu(x, *args[1:]), torch.float32)


def test_row_statistics_walk_whole_rows(interpreter):
    """The residual stream's row max (a softmax's) and sum of squares (an
    RMSNorm's) fused as statistics, N over several tiles of BLOCK_N."""
    def function(x, w, r):
        y = F.linear(x, w) + r
        return torch.softmax(y, -1), y * torch.rsqrt((y * y).mean(-1, keepdim=True) + 1e-6)

    args = (_random(12, 32), _random(200, 32, seed=1), _random(12, 200, seed=2))
    compiled = _check(function, args, fused_gemms=1)
    source = compiled.stats["source"].read_text()
    assert "for n_start in range(0, n1, BLOCK_N):" in source and "stat0" in source

    def batched(a, b, c):  # the row max of a batched product
        return torch.softmax(torch.bmm(a, b) + c, -1)

    _check(batched, (_random(2, 9, 20), _random(2, 20, 70, seed=1), _random(2, 9, 70, seed=2)), fused_gemms=1)


def test_the_unfused_alternative_matches_eager(interpreter, monkeypatch):
    """torch's GEMM, then the epilogue as a kernel over its product: what
    the autotuner runs where timing says it is the faster."""
    monkeypatch.setattr(autotune, "interpreter_choice", lambda space: next(c for c in space if c.unfused))
    for dtype in (torch.float32, torch.bfloat16):
        for case in ("linear_bias_gelu", "batched", "transposed_lhs"):
            function, shapes = GEMMS[case]
            args = tuple(_random(*shape, dtype=dtype, seed=n) for n, shape in enumerate(shapes))
            _check(function, args, dtype, fused_gemms=1)


def test_hand_written_scales_extras_and_statistics_match_the_reference(interpreter):
    """A per-tensor lhs scale and per-column rhs scales with a scalar extra
    and both statistics; per-row lhs scales on a batched bf16 product with a
    transposed lhs and (m, n), m and scalar extras."""
    f32, bf16 = torch.float32, torch.bfloat16
    for text, shapes in ((SCALED, [((5, 19), f32), ((19, 21), f32), ((), f32), ((21,), f32), ((), f32)]),
                         (SCALED_RESIDUAL, [((2, 4, 8), bf16), ((2, 4, 16), bf16), ((8,), f32), ((), f32),
                                            ((2, 8, 16), bf16), ((8,), f32), ((), f32)])):
        inputs = [_random(*shape, dtype=dtype, seed=n) for n, (shape, dtype) in enumerate(shapes)]
        compiled = braze.compile_mlir(text, target="triton")
        assert compiled.stats["fused_gemms"] == 1
        for out, expected in zip(compiled(*inputs), braze.reference.run(braze.parse(text), *inputs), strict=True):
            _compare(out, expected, expected.dtype)


def test_unsupported_operand_types_are_refused_by_name():
    with pytest.raises(braze.BrazeError, match="no tl.dot of i8 x i8 operands"):
        braze.codegen.emit(braze.parse(INTEGER_GEMM), "triton")


@pytest.mark.parametrize("case", QUANTISED)
@pytest.mark.parametrize("unfused", [False, True], ids=["fused", "unfused"])
def test_quantised_gemms_match_eager(interpreter, monkeypatch, case, unfused):
    """The narrow operand read in place and widened exactly as it is loaded
    (an int8 weight to the activations' type, 8-bit floats to bf16), the
    scales on the accumulator; the unfused alternative widens for torch's
    GEMM. M of 9 and of 1 (decode)."""
    if unfused:
        monkeypatch.setattr(autotune, "interpreter_choice", lambda space: next(c for c in space if c.unfused))
    for m in (9, 1):
        function, args = quantised(case, m)
        compiled = braze.compile(Apply(function), args, target="triton")
        assert compiled.stats["fused_gemms"] == 1
        got, expected = compiled(*args), function(*args)
        # Relative to the largest value: eager rounds the scaled weight to bf16 before its
        # product, braze scales the f32 accumulator.
        tolerance = TOLERANCE[expected.dtype] * max(expected.float().abs().max().item(), 1.0)
        assert got.dtype == expected.dtype and (got.float() - expected.float()).abs().max().item() <= tolerance


# -- flash attention ------------------------------------------------------------
def _sdpa(**options):
    def attention(q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[0] if mask else None, **options)

    return attention


def _qkv(b, h, l, s, e, dtype=torch.float32, kv_heads=None, seed=0):
    return (_random(b, h, l, e, dtype=dtype, seed=seed), _random(b, kv_heads or h, s, e, dtype=dtype, seed=seed + 1),
            _random(b, kv_heads or h, s, e, dtype=dtype, seed=seed + 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("mask", ["none", "additive", "boolean", "causal"])
def test_attention_matches_eager(interpreter, mask, dtype):
    """Three blocks of keys (the online softmax's rescaling); an additive
    mask broadcast over heads with -inf here and there, a boolean [L, S]
    mask shared by the batch."""
    b, h, l, s = 1, 2, 9, 150
    q, k, v = _qkv(b, h, l, s, 16, dtype)
    g = torch.Generator().manual_seed(3)
    if mask == "none":
        _check(_sdpa(), (q, k, v), dtype, flash_attentions=1)
    elif mask == "causal":
        _check(_sdpa(is_causal=True), (q, k, v), dtype, flash_attentions=1)
    elif mask == "additive":
        m = torch.randn(b, 1, l, s, generator=g).masked_fill(torch.rand(b, 1, l, s, generator=g) < 0.2,
                                                             float("-inf")).to(dtype)
        _check(_sdpa(), (q, k, v, m), dtype, flash_attentions=1)
    else:
        _check(_sdpa(scale=0.3), (q, k, v, torch.rand(l, s, generator=g) < 0.7), dtype, flash_attentions=1)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_heads(interpreter, kv_heads):
    _check(_sdpa(enable_gqa=True), _qkv(1, 4, 9, 20, 16, kv_heads=kv_heads), flash_attentions=1)


@pytest.mark.parametrize("case", ["projection", "windows"])
def test_a_result_read_in_another_order_is_written_so(interpreter, case):
    """The output projection's order ([B, L, H * E]) stored by the kernel
    itself (result_order): no other kernel, eager's values."""
    function, args = {"projection": (attention_for_projection, _qkv(1, 2, 9, 40, 16)),
                      "windows": (window_attention_for_projection,
                                  tuple(_random(2, 2, 3, 7, 16, seed=n) for n in range(3)))}[case]
    compiled = _check(function, args, flash_attentions=1)
    assert "result_order" in str(compiled.module) and compiled.stats["kernels"] == 1


def test_fully_masked_rows_are_zero_or_nan_as_in_eager(interpreter):
    """A row with no key: zeros from SDPA with a boolean mask, NaN from a
    spelled-out softmax (masked_rows_nan)."""
    q, k, v = _qkv(1, 2, 6, 20, 16)
    keep = torch.rand(6, 20, generator=torch.Generator().manual_seed(4)) < 0.7
    keep[0] = False
    _check(_sdpa(), (q, k, v, keep), flash_attentions=1)
    additive = torch.zeros(1, 1, 6, 20)
    additive[..., 2, :] = float("-inf")

    def spelled_out(q, k, v, mask):
        return torch.softmax(q @ k.transpose(-1, -2) * 0.25 + mask, -1) @ v

    compiled = _check(spelled_out, (q, k, v, additive), flash_attentions=1)
    assert torch.isnan(compiled(q, k, v, additive)[0, :, 2]).all()


def test_a_soft_capped_attention(interpreter):
    """Gemma 2's soft cap (`softcap`, spelled with libdevice.tanh) before an
    additive mask, against eager."""
    from braze.testing.modules import SoftCappedAttention

    q, k, v = _qkv(1, 2, 6, 20, 16)
    mask = _random(1, 1, 6, 20, seed=5)
    compiled = _check(SoftCappedAttention(), (q, k, v, mask), flash_attentions=1)
    assert "libdevice.tanh" in compiled.stats["source"].read_text()


def test_strided_broadcast_low_rank_and_nan_operands(interpreter):
    """q a transposed view, k and v shared by every batch and head (size-1
    dims read with stride 0); rank 2 and 3; a NaN query (its row NaN) and a
    NaN key (every row NaN) as in eager."""
    def transposed(x, k, v):
        return F.scaled_dot_product_attention(x.transpose(1, 2), k, v)

    _check(transposed, (_random(2, 33, 4, 16), _random(1, 1, 50, 16, seed=1), _random(1, 1, 50, 16, seed=2)),
           flash_attentions=1)
    for batch in ([], [3]):
        _check(_sdpa(), tuple(_random(*batch, n, 8, seed=n) for n in (7, 11, 11)), flash_attentions=1)
    q, k, v = _qkv(1, 2, 30, 70, 16)
    q[0, 1, 5] = float("nan")
    k[0, 0, 65] = float("nan")
    _check(_sdpa(), (q, k, v), flash_attentions=1)


def test_dynamic_lengths_and_a_decode_row(interpreter):
    """One compile serves every L and S; a static L = 1 (a decode step)
    takes a block of 16 rows, 15 of them masked."""
    rows, keys = torch.export.Dim("L", min=1, max=2048), torch.export.Dim("S", min=1, max=2048)
    q, k, v = _qkv(1, 2, 20, 30, 16)
    compiled = _check(_sdpa(), (q, k, v), flash_attentions=1, dynamic_shapes=(({2: rows}, {2: keys}, {2: keys}),))
    for l, s in ((1, 1), (5, 130), (40, 3)):
        args = _qkv(1, 2, l, s, 16, seed=l + s)
        _compare(compiled(*args), _sdpa()(*args), torch.float32)
    q, k, v = _qkv(1, 2, 1, 20, 16)
    compiled = _check(_sdpa(), (q, k, v), flash_attentions=1, dynamic_shapes=((None, {2: keys}, {2: keys}),))
    for s in (1, 63, 130):
        args = _qkv(1, 2, 1, s, 16, seed=s)
        _compare(compiled(*args), _sdpa()(*args), torch.float32)


# -- autotuning: fused against unfused --------------------------------------------
def _tiled_specs(function, args=None):
    """The module and tiled kernels of `function` on `args` (or of IR text)."""
    triton = targets.get("triton")
    module = braze.parse(function) if isinstance(function, str) else braze.export(Apply(function), args).module
    _, kernels = kernel_form(module, triton.pipeline(triton.options({"combo_kernels": False})))
    source, specs = render_module(kernels)
    return source, [spec for spec in specs.values() if spec.strategy in ("gemm", "attention")]


def test_the_gemm_space_has_tiles_and_the_unfused_alternative():
    _, (spec,) = _tiled_specs(_linear_gelu, (_random(1, 40), _random(24, 40), _random(24)))
    space = config_space(spec)
    assert 4 <= len(space) <= 12 and len(set(space)) == len(space)
    assert [c.unfused for c in space].count(True) == 1
    for config in space:  # one row, 24 columns, 40 deep: no tile larger than needed
        assert config.block_m == 16 and config.block_n <= 32 and config.block_k <= 64
    _, (attention,) = _tiled_specs(_sdpa(), _qkv(1, 2, 1, 300, 16))
    first, *rest = config_space(attention)
    assert (first.block_m, first.block_n) == (16, 64)  # the schedule's: a decode row, 64 keys
    assert all(c.block_k is None and not c.unfused for c in rest)


@pytest.mark.parametrize("fastest", ["unfused", "fused"])
def test_the_tuner_takes_the_faster_of_fused_and_unfused(tmp_path, fastest):
    _, (spec,) = _tiled_specs(_linear_gelu, (_random(10, 40), _random(24, 40), _random(24)))
    space = config_space(spec)
    timings = {config: (0.5 if config.unfused else 1.0 + n) for n, config in enumerate(space)}
    if fastest == "fused":
        timings[space[2]] = 0.25
    measured = []

    def measure(run):
        run()
        return timings[measured[-1]]

    tuner = Tuner(tmp_path, measure=measure)
    chosen = tuner.choose(spec, "hash", (), "cuda:test", measured.append)
    assert chosen.unfused == (fastest == "unfused") and tuner.benchmarks == len(space)
    again = Tuner(tmp_path, measure=measure)  # another process reads the TileConfig back
    assert again.choose(spec, "hash", (), "cuda:test", measured.append) == chosen and again.benchmarks == 0


# -- ahead of time ----------------------------------------------------------------
@pytest.mark.parametrize("gpu", ["cuda:90", "hip:gfx942"])
def test_every_tiled_kernel_compiles_ahead_of_time(gpu):
    """At GPU sizes: an f32 fused GEMM and an f32 attention in every
    configuration of their spaces; bf16, batched, row-statistics and scaled
    GEMMs in their first and unfused ones; attentions with each mask kind, bf16
    and grouped heads in their schedule's."""
    need("the triton target", targets.get("triton").compiler_missing())

    def statistics(x, w, r):
        return torch.softmax(F.linear(x, w) + r, -1)

    bf16 = torch.bfloat16
    mask = torch.zeros(1, 1, 256, 256)
    programs = [(_linear_gelu, (_random(512, 256), _random(384, 256), _random(384)), "every"),
                (_linear_gelu, (_random(512, 256, dtype=bf16), _random(384, 256, dtype=bf16),
                                _random(384, dtype=bf16)), "first"),
                (_batched, (_random(4, 256, 128), _random(4, 128, 256), _random(4, 256, 256)), "first"),
                (statistics, (_random(256, 128), _random(512, 128), _random(256, 512)), "first"),
                (_sdpa(), _qkv(2, 4, 256, 256, 64), "every"),
                (_sdpa(is_causal=True), _qkv(2, 4, 256, 256, 64, dtype=bf16), "first"),
                (_sdpa(), _qkv(2, 4, 256, 256, 64) + (mask,), "first"),
                (_sdpa(), _qkv(2, 4, 256, 256, 64) + (mask > -1,), "first"),
                (_sdpa(enable_gqa=True), _qkv(2, 8, 256, 256, 64, kv_heads=2), "first"),
                (SCALED, None, "first"), (SCALED_RESIDUAL, None, "first"),
                *((*quantised(case, 256), "first") for case in QUANTISED)]
    jobs = []
    for function, args, which in programs:
        source, (spec,) = _tiled_specs(function, args)
        space = config_space(spec)
        chosen = space if which == "every" else [space[0]] + [c for c in space if getattr(c, "unfused", False)]
        jobs.append((source, [(spec, config) for config in chosen]))
    binaries = aot_compile(jobs, gpu)  # a refused kernel fails here, naming each
    assert sum(len(kernels) for _, kernels in jobs) >= 37
    assert all(b[:4] == b"\x7fELF" for module in binaries for b in module)
