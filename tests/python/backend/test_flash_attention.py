"""braze.flash_attention on the CPU (braze-lower-attention, then the
generated kernel of codegen/cpp/attention.py) against eager PyTorch: every
mask kind, causal with L below and above S, grouped-query heads, broadcast
and strided operands, f32/bf16/f16/f64, one and several blocks of keys
(the online softmax's rescaling), decode rows (the dot-product path),
dynamic lengths, and fully masked rows (zeros as SDPA gives, NaN where the
attention was spelled out)."""

import pytest
import torch
import torch.nn.functional as F

import braze
import braze.reference
from braze.errors import BrazeError
from braze.testing.modules import Apply, attention_for_projection, window_attention_for_projection

TOLERANCE = {torch.float32: 3e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float64: 1e-12}


def _sdpa(**options):
    def attention(q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[0] if mask else None, **options)

    return attention


def _check(function, args, dtype=torch.float32, **compile_options):
    # f16/bf16 attentions are the library's by default where the CPU has AMX.
    options = {"flash_attention_halves": True, **compile_options.pop("options", {})}
    compiled = braze.compile(function, args, options=options, **compile_options)
    assert compiled.stats["flash_attentions"] == 1 and compiled.stats["gemms"] == 0
    out, expected = compiled(*args), function(*args)
    assert out.dtype == expected.dtype
    assert torch.equal(torch.isnan(out), torch.isnan(expected)), "NaN rows differ"
    torch.testing.assert_close(out.double().nan_to_num(), expected.double().nan_to_num(),
                               atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])
    return compiled


def _qkv(b, h, l, s, e, ev=None, dtype=torch.float32, kv_heads=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, l, e, generator=g).to(dtype)
    k = torch.randn(b, kv_heads or h, s, e, generator=g).to(dtype)
    v = torch.randn(b, kv_heads or h, s, ev or e, generator=g).to(dtype)
    return q, k, v


# (batch, heads, L, S, E, Ev): one key block, several (S > 512, with a short
# last block), one query row (decode), L not a multiple of the query block.
SHAPES = [(2, 3, 9, 9, 8, 8), (1, 2, 1, 300, 16, 16), (2, 2, 130, 600, 32, 24), (1, 1, 129, 1100, 64, 64)]


@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mask", ["none", "causal", "additive", "boolean"])
def test_matches_eager(dtype, shape, mask):
    b, h, l, s, e, ev = shape
    q, k, v = _qkv(b, h, l, s, e, ev, dtype, seed=l + s)
    g = torch.Generator().manual_seed(1)
    if mask == "none":
        _check(_sdpa(), (q, k, v), dtype)
    elif mask == "causal":
        _check(_sdpa(is_causal=True), (q, k, v), dtype)
    elif mask == "additive":  # broadcast over heads, minus infinity here and there
        m = torch.randn(b, 1, l, s, generator=g).masked_fill(torch.rand(b, 1, l, s, generator=g) < 0.2,
                                                             float("-inf")).to(dtype)
        _check(_sdpa(), (q, k, v, m), dtype)
    else:  # a [L, S] mask shared by the batch, one row with no key: zeros, as SDPA gives
        m = torch.rand(l, s, generator=g) < 0.7
        m[0] = False
        _check(_sdpa(scale=0.3), (q, k, v, m), dtype)


@pytest.mark.parametrize("shape", [(1, 2, 12, 600, 33, 24), (2, 1, 130, 600, 32, 24)],
                         ids=["16_rows_odd_depth", "blocks_of_32_rows"])
def test_bf16_products_with_and_without_amx(shape, monkeypatch):
    """bf16 attention's two products take bz_gemm_bf16_pairs where the CPU
    has AVX512-BF16 and no AMX and MKL's half GEMM otherwise (the flags the
    render reads set both ways), against eager: several key blocks (the
    second product accumulating), an additive mask, an odd depth E for the
    scores (a pair of E with a zero), items of at most 16 query rows and of
    more; and the pairs form built without AVX512-BF16. On a CPU without
    AVX512-BF16 every build is the library's form."""
    import braze.codegen.cpp.gemm as gemm

    b, h, l, s, e, ev = shape
    q, k, v = _qkv(b, h, l, s, e, ev, torch.bfloat16, seed=e)
    m = torch.randn(b, 1, l, s, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    for flags, compiler, pairs in (({"avx512_bf16"}, None, True), ({"avx512_bf16", "amx_bf16"}, None, False),
                                   ({"avx512_bf16"}, "g++ -mno-avx512bf16", True)):
        monkeypatch.setattr(gemm, "cpu_flags", lambda flags=flags: frozenset(flags))
        if compiler:  # the pairs form built without AVX512-BF16: its #else, the library
            monkeypatch.setenv("CXX", compiler)
        compiled = _check(_sdpa(), (q, k, v, m), torch.bfloat16)
        assert ("bz_gemm_bf16, true);" in compiled.stats["source"].read_text()) == pairs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("keys", [49, 600], ids=["one_block", "short_last_block"])
@pytest.mark.parametrize("mask_shape", ["rows", "keys"])
def test_masks_broadcast_along_rows_or_keys(dtype, keys, mask_shape):
    """A padding mask [B, 1, 1, S] (one row for every query) and a mask
    [B, H, L, 1] (one value for every key), S not a multiple of the 16
    columns a score row is padded to."""
    q, k, v = _qkv(2, 3, 20, keys, 16, dtype=dtype, seed=keys)
    g = torch.Generator().manual_seed(2)
    shape = (2, 1, 1, keys) if mask_shape == "rows" else (2, 3, 20, 1)
    _check(_sdpa(), (q, k, v, torch.randn(*shape, generator=g).to(dtype)), dtype)


def test_causal_with_more_queries_than_keys():
    """is_causal is top-left aligned: query i keeps keys 0..i."""
    _check(_sdpa(is_causal=True), _qkv(1, 2, 40, 17, 8))


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_grouped_query_heads(kv_heads):
    _check(_sdpa(enable_gqa=True), _qkv(2, 8, 33, 40, 16, kv_heads=kv_heads))


@pytest.mark.parametrize("dtype", ["f32", "bf16", "bf16_pairs"])
@pytest.mark.parametrize("kv_heads", [1, 2, 4], ids=lambda h: f"groups_of_{8 // h}")
@pytest.mark.parametrize("mask", ["none", "additive", "boolean", "all_masked"])
def test_grouped_heads_of_a_decode_step(dtype, kv_heads, mask, monkeypatch):
    """One query row: a work item takes the query heads of a key/value head
    (grouped_heads), with a mask the same for every head; several key
    blocks; a query read in place as a slice (head stride 2E); a boolean
    mask that keeps no key gives the rows SDPA gives (NaN). bf16_pairs: the
    flags of a CPU with AVX512-BF16 and no AMX, where more than 4 rows (8
    heads per key/value head) take their scores from bz_gemm_bf16_pairs."""
    import braze.codegen.cpp.gemm as gemm

    if dtype == "bf16_pairs":
        monkeypatch.setattr(gemm, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    dtype = torch.float32 if dtype == "f32" else torch.bfloat16
    q, k, v = _qkv(3, 8, 1, 600, 32, dtype=dtype, kv_heads=kv_heads)
    q = torch.cat([q, -q], dim=-1)[..., :32]
    g = torch.Generator().manual_seed(2)
    masks = {"none": (), "additive": (torch.randn(3, 1, 1, 600, generator=g).to(dtype),),
             "boolean": (torch.rand(1, 600, generator=g) > 0.4,), "all_masked": (torch.zeros(3, 1, 1, 600, dtype=torch.bool),)}
    compiled = _check(_sdpa(enable_gqa=True), (q, k, v, *masks[mask]), dtype)
    assert "grouped_heads" in str(compiled.module), "the query heads of a key/value head are one work item"


def test_strided_and_broadcast_operands():
    """q a transposed view (read in place, row stride H*E); k and v shared by
    every batch and head (size-1 dims read with stride 0)."""
    x = torch.randn(2, 33, 4, 16)

    def attention(x, k, v):
        return F.scaled_dot_product_attention(x.transpose(1, 2), k, v)

    _check(attention, (x, torch.randn(1, 1, 50, 16), torch.randn(1, 1, 50, 16)))


@pytest.mark.parametrize("rank", [2, 3])
def test_lower_ranks(rank):
    shape = [3][: rank - 2]
    q, k, v = (torch.randn(*shape, n, 8) for n in (7, 11, 11))
    _check(_sdpa(), (q, k, v))


def test_dynamic_lengths():
    q, k, v = _qkv(2, 2, 20, 30, 16)
    length, keys = torch.export.Dim("L", max=2048), torch.export.Dim("S", max=2048)
    compiled = _check(_sdpa(), (q, k, v), dynamic_shapes=({2: length}, {2: keys}, {2: keys}))
    for l, s in [(1, 1), (5, 700), (300, 3), (257, 1029)]:
        args = _qkv(2, 2, l, s, 16, seed=l)
        torch.testing.assert_close(compiled(*args), _sdpa()(*args), atol=3e-5, rtol=3e-5)


def test_spelled_out_attention_keeps_nan_rows():
    """The attention braze-form-attention makes from softmax(...) @ v is NaN
    where eager's softmax is: a row whose keys are all masked."""
    q, k, v = _qkv(2, 2, 6, 9, 8)
    mask = torch.zeros(2, 1, 1, 9)
    mask[1] = float("-inf")

    def spelled_out(q, k, v, mask):
        return torch.softmax(q @ k.transpose(-1, -2) * 0.5 + mask, -1) @ v

    compiled = _check(spelled_out, (q, k, v, mask))
    assert torch.isnan(compiled(q, k, v, mask)[1]).all()


@pytest.mark.parametrize("flags,flash", [({"avx512_bf16", "amx_bf16"}, 0), ({"avx512_bf16"}, 1)],
                         ids=["amx", "no_amx"])
def test_halves_stay_the_library_by_default_where_the_cpu_has_amx(flags, flash, monkeypatch):
    import braze.target.cpu

    monkeypatch.setattr(braze.target.cpu, "cpu_flags", lambda: frozenset(flags))
    args = _qkv(2, 3, 9, 9, 8, dtype=torch.bfloat16)
    compiled = braze.compile(_sdpa(), args)
    assert compiled.stats["flash_attentions"] == flash and compiled.stats["attentions"] == 1
    torch.testing.assert_close(compiled(*args), _sdpa()(*args), atol=1e-2, rtol=1e-2)


def test_library_attention_when_switched_off():
    args = _qkv(2, 3, 9, 9, 8)
    compiled = braze.compile(_sdpa(), args, options={"flash_attention": False})
    assert compiled.stats["flash_attentions"] == 0 and compiled.stats["attentions"] == 1
    torch.testing.assert_close(compiled(*args), _sdpa()(*args))


def test_reference_interpreter_runs_the_kernel_form():
    text = """
func.func @f(%q: tensor<2x9x8xf32>, %k: tensor<2x600x8xf32>, %v: tensor<2x600x8xf32>) -> tensor<2x9x8xf32> {
  %o = braze.flash_attention %q, %k, %v scale 0.5 causal q_block 4 kv_block 256 : tensor<2x9x8xf32>, tensor<2x600x8xf32>, tensor<2x600x8xf32> -> tensor<2x9x8xf32>
  return %o : tensor<2x9x8xf32>
}"""
    q, k, v = torch.randn(2, 9, 8), torch.randn(2, 600, 8), torch.randn(2, 600, 8)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
    torch.testing.assert_close(braze.reference.run(braze.parse(text), q, k, v)[0], expected)
    torch.testing.assert_close(braze.compile_mlir(text)(q, k, v)[0], expected, atol=3e-5, rtol=3e-5)


def test_nan_inputs_give_nan_rows_as_in_eager():
    """A NaN in a query row makes its scores NaN in every block (no block of
    it may be skipped as fully masked); a NaN key makes every row NaN."""
    q, k, v = _qkv(1, 2, 300, 700, 16)
    q[0, 1, 5] = float("nan")
    k[0, 0, 650] = float("nan")
    _check(_sdpa(), (q, k, v))


def _grouped_decode_for_projection(q, k, v):
    b, h, l, e = q.shape
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True).transpose(1, 2).reshape(b, l, h * e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("case", ["projection", "grouped_decode", "windows"])
def test_the_projection_order_is_written_by_the_kernel(case, dtype):
    """An attention read rows before heads is written in that order by the
    kernel (result_order): no permute and no copy kernel is left, and the
    values are eager's. Three query blocks and two key blocks (projection),
    reshapes of the batch dims between attention and permute (windows). A
    decode step's transpose is a reshape and needs no result_order."""
    function, args = {
        "projection": (attention_for_projection, _qkv(2, 3, 300, 700, 16, dtype=dtype)),
        "grouped_decode": (_grouped_decode_for_projection, _qkv(3, 8, 1, 600, 32, dtype=dtype, kv_heads=2)),
        "windows": (window_attention_for_projection, tuple(torch.randn(2, 4, 3, 7, 8).to(dtype) for _ in range(3))),
    }[case]
    compiled = _check(function, args, dtype)
    text = str(compiled.module)
    assert "braze.permute" not in text
    assert compiled.stats["kernels"] == 1, "the attention is the only kernel: no copy for the transpose"
    # One query row: the transpose moves a dim of size 1, a reshape that braze-simplify makes.
    assert ("grouped_heads" if case == "grouped_decode" else "result_order") in text


def test_the_projection_order_of_dynamic_lengths():
    args = _qkv(2, 2, 20, 20, 16)
    length = torch.export.Dim("L", max=2048)
    compiled = _check(attention_for_projection, args, dynamic_shapes=({2: length}, {2: length}, {2: length}))
    assert "result_order [0, 2, 1, 3]" in str(compiled.module)
    for l in (1, 77, 700):
        args = _qkv(2, 2, l, l, 16, seed=l)
        torch.testing.assert_close(compiled(*args), attention_for_projection(*args), atol=3e-5, rtol=3e-5)


def test_torch_multi_head_attention_is_written_sequence_first():
    """torch.nn.MultiheadAttention reads its attention as [L, B, H, E]
    (`permute(2, 0, 1, 3)`): the kernel writes that order."""
    torch.manual_seed(0)
    attention = torch.nn.MultiheadAttention(64, 4).eval()
    module = Apply(lambda x: attention(x, x, x, need_weights=False)[0])
    x = torch.randn(150, 2, 64)
    with torch.no_grad():
        compiled = braze.compile(module, (x,))
        torch.testing.assert_close(compiled(x), module(x), atol=3e-5, rtol=3e-5)
    text = str(compiled.module)
    assert compiled.stats["flash_attentions"] == 1 and "result_order [2, 0, 1, 3]" in text
    assert "braze.kernel" not in text.split("braze.flash_attention")[1], "a copy after the attention"


def _hand_written(query: str, key: str, result: str, attributes: str) -> str:
    return f"""
func.func @f(%q: tensor<{query}xf32>, %k: tensor<{key}xf32>) -> tensor<{result}xf32> {{
  %o = braze.flash_attention %q, %k, %k scale 0.5 {attributes} : tensor<{query}xf32>, tensor<{key}xf32>, tensor<{key}xf32> -> tensor<{result}xf32>
  return %o : tensor<{result}xf32>
}}"""


@pytest.mark.parametrize("query,key,attributes,order", [
    ((2, 3, 9, 8), (2, 3, 9, 8), "q_block 4 kv_block 4", [0, 2, 1, 3]),
    ((2, 3, 9, 8), (2, 3, 9, 8), "q_block 4 kv_block 4", [2, 0, 1, 3]),
    ((2, 8, 1, 8), (2, 2, 300, 8), "gqa q_block 1 kv_block 128 grouped_heads", [0, 2, 1, 3]),
    ((2, 8, 1, 8), (2, 2, 300, 8), "gqa q_block 1 kv_block 128 grouped_heads", [2, 0, 1, 3]),
    ((2, 8, 1, 8), (2, 2, 300, 8), "gqa q_block 1 kv_block 128 grouped_heads", [1, 0, 2, 3]),
], ids=["rows_first", "sequence_first", "grouped_rows_first", "grouped_sequence_first", "grouped_heads_first"])
def test_a_result_order_in_the_interpreter_and_the_kernel(query, key, attributes, order):
    """braze.flash_attention written by hand with a result_order: the
    reference interpreter and the CPU kernel both give eager's attention
    permuted, grouped heads (a decode step's, whose rows are its heads)
    included."""
    q, k = torch.randn(*query), torch.randn(*key)
    expected = F.scaled_dot_product_attention(q, k, k, scale=0.5, enable_gqa="gqa" in attributes).permute(*order)
    shape = "x".join(map(str, expected.shape))
    text = _hand_written("x".join(map(str, query)), "x".join(map(str, key)), shape,
                         f"{attributes} result_order [{', '.join(map(str, order))}]")
    torch.testing.assert_close(braze.reference.run(braze.parse(text), q, k)[0], expected)
    torch.testing.assert_close(braze.compile_mlir(text)(q, k)[0], expected, atol=3e-5, rtol=3e-5)
