"""braze-form-attention end to end: attention spelled out as products and a
softmax, as models write it (BERT's additive mask, a causal masked_fill with
minus infinity, HF's f32 softmax of bf16 scores, a dynamic sequence length),
becomes one braze.attention whose results match eager PyTorch, fully masked
rows included (NaN, as eager's softmax gives; uniform weights for a fill
of finfo.min). Forms the pass must refuse (returned weights, a fill a
score would move) stay spelled out and match eager too."""

import pytest
import torch
import torch.nn.functional as F

import braze
import braze.reference


class _Attention(torch.nn.Module):
    """softmax(q k^T / sqrt(d) (masked) ) v over [B, H, L, D] projections."""

    def __init__(self, d=32, heads=4, mask="additive", return_weights=False, fill=float("-inf"),
                 f32_softmax=False):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
        self.mask, self.return_weights, self.fill, self.f32_softmax = mask, return_weights, fill, f32_softmax

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = (f(x).view(b, t, self.heads, self.head_dim).transpose(1, 2) for f in (self.q, self.k, self.v))
        scores = q @ k.transpose(-1, -2) / self.head_dim**0.5
        if self.mask == "additive":
            scores = scores + mask
        elif self.mask == "boolean":  # mask: True where attending
            scores = scores.masked_fill(~mask, self.fill)
        weights = (torch.softmax(scores, -1, dtype=torch.float32).to(q.dtype) if self.f32_softmax
                   else torch.softmax(scores, -1))
        y = (weights @ v).transpose(1, 2).reshape(b, t, c)
        return (y, weights) if self.return_weights else y


def _inputs(mask, batch=2, seq=9, d=32, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq, d, generator=g).to(dtype)
    if mask == "additive":
        m = torch.where(torch.rand(batch, 1, 1, seq, generator=g) < 0.3, float("-inf"), 0.0).to(dtype)
    else:
        m = torch.ones(seq, seq, dtype=torch.bool).tril()
    return x, m


def _assert_matches(out, expected, tolerance):
    assert torch.equal(torch.isnan(out), torch.isnan(expected)), "NaN rows differ from eager"
    torch.testing.assert_close(out.float().nan_to_num(), expected.float().nan_to_num(), atol=tolerance, rtol=tolerance)


def _compile(model, args, **kwargs):
    torch.manual_seed(1)
    compiled = braze.compile(model, args, **kwargs)
    control = braze.compile(model, args, options={"form_attention": False}, **kwargs)
    return compiled, control


@pytest.mark.parametrize("mask", ["additive", "boolean"])
def test_spelled_out_attention_becomes_one_op(mask):
    torch.manual_seed(0)
    model = _Attention(mask=mask).eval()
    args = _inputs(mask)
    compiled, control = _compile(model, args)
    assert compiled.stats["attentions"] == 1 and control.stats["attentions"] == 0
    assert compiled.stats["gemms"] == control.stats["gemms"] - 2  # both bmms gone
    with torch.no_grad():
        expected = model(*args)
    _assert_matches(compiled(*args), expected, 2e-5)
    _assert_matches(control(*args), expected, 2e-5)


def test_fully_masked_rows_are_nan_as_in_eager():
    """A key-padding mask that masks every key of one batch row: eager's
    softmax gives NaN there, and so does the formed attention (SDPA alone
    would give zeros)."""
    torch.manual_seed(0)
    model = _Attention(mask="additive").eval()
    x, m = _inputs("additive", seed=3)
    m[1] = float("-inf")
    compiled, _ = _compile(model, (x, m))
    assert compiled.stats["attentions"] == 1
    with torch.no_grad():
        expected = model(x, m)
    assert torch.isnan(expected[1]).all() and not torch.isnan(expected[0]).any()
    _assert_matches(compiled(x, m), expected, 2e-5)


def test_boolean_rows_masked_by_a_row_of_false():
    """masked_fill(~mask, -inf) with a query row that attends to nothing."""
    torch.manual_seed(0)
    model = _Attention(mask="boolean").eval()
    x, m = _inputs("boolean")
    m[4] = False
    compiled, _ = _compile(model, (x, m))
    with torch.no_grad():
        expected = model(x, m)
    assert torch.isnan(expected[:, 4]).all()
    _assert_matches(compiled(x, m), expected, 2e-5)


def test_bf16_with_an_f32_softmax():
    """HF's softmax(scores, dtype=float32).to(bf16): the casts are taken,
    the attention accumulates in f32 (closer to float64 than eager's)."""
    torch.manual_seed(0)
    model = _Attention(mask="additive", f32_softmax=True).to(torch.bfloat16).eval()
    args = _inputs("additive", dtype=torch.bfloat16)
    compiled, _ = _compile(model, args)
    assert compiled.stats["attentions"] == 1
    with torch.no_grad():
        expected = model(*args)
    _assert_matches(compiled(*args), expected, 3e-2)


def test_dynamic_sequence_length():
    torch.manual_seed(0)
    model = _Attention(mask="boolean").eval()
    seq = torch.export.Dim("seq", min=2, max=64)
    compiled = braze.compile(model, _inputs("boolean"), dynamic_shapes=({1: seq}, {0: seq, 1: seq}))
    assert compiled.stats["attentions"] == 1
    for length in (2, 17, 64):
        args = _inputs("boolean", seq=length, seed=length)
        with torch.no_grad():
            expected = model(*args)
        _assert_matches(compiled(*args), expected, 2e-5)


def test_returned_weights_stay_spelled_out():
    """Returned weights (they are written anyway) keep both products."""
    torch.manual_seed(0)
    model = _Attention(mask="additive", return_weights=True).eval()
    args = _inputs("additive")
    compiled, _ = _compile(model, args)
    assert compiled.stats["attentions"] == 0
    with torch.no_grad():
        expected = model(*args)
    for out, want in zip(compiled(*args), expected):
        _assert_matches(out, want, 2e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_finite_fill_is_an_additive_mask(dtype):
    """masked_fill(~mask, finfo.min) (HF's eager attention): formed, with the
    mask read as where(mask, 0, finfo.min); the row that keeps no key gets
    uniform weights (the mean of v), as in eager, not NaN."""
    torch.manual_seed(0)
    model = _Attention(mask="boolean", fill=torch.finfo(dtype).min).to(dtype).eval()
    x, m = _inputs("boolean", dtype=dtype)
    m[4] = False
    compiled, control = _compile(model, (x, m))
    assert compiled.stats["attentions"] == 1 and control.stats["attentions"] == 0
    with torch.no_grad():
        expected = model(x, m)
    assert not torch.isnan(expected).any()
    tolerance = 2e-5 if dtype == torch.float32 else 3e-2
    _assert_matches(compiled(x, m), expected, tolerance)


def test_a_fill_scores_move_is_refused():
    """f16's finfo.min (-65504) is no absorbing fill: a score added to it
    would change it, so the product stays spelled out."""
    torch.manual_seed(0)
    model = _Attention(mask="boolean", fill=-65504.0).eval()
    args = _inputs("boolean")
    compiled, _ = _compile(model, args)
    assert compiled.stats["attentions"] == 0
    with torch.no_grad():
        _assert_matches(compiled(*args), model(*args), 2e-5)


def test_reference_interpreter_agrees_before_and_after_the_pass():
    """The pass alone, on the captured IR: the reference interpreter (which
    runs braze.attention through the shared host-op table) agrees."""
    torch.manual_seed(0)
    model = _Attention(mask="boolean").eval()
    x, m = _inputs("boolean")
    m[3] = False
    exported = braze.export(model, (x, m))
    module = braze.parse(str(exported.module))
    braze.run_pipeline(module, "braze-simplify")
    before = braze.reference.run(module, x, m, parameters=exported.parameters)
    braze.run_pipeline(module, "func.func(braze-form-attention)")
    assert "braze.attention" in str(module) and "braze.bmm" not in str(module)
    after = braze.reference.run(module, x, m, parameters=exported.parameters)
    for b, a in zip(before, after):
        _assert_matches(a, b, 2e-5)


def test_torch_compile_forms_attention_without_fallback(caplog):
    """torch.compile(backend="braze") on the spelled-out form (inference)."""
    torch.manual_seed(0)
    model = _Attention(mask="additive").eval()
    args = _inputs("additive")
    with torch.no_grad():
        expected = model(*args)
        torch._dynamo.reset()
        out = torch.compile(model, backend="braze")(*args)
    assert "eager" not in caplog.text
    _assert_matches(out, expected, 2e-5)


def test_sdpa_math_form_matches():
    """SDPA with a boolean mask, captured whole, still runs as before."""
    q, k, v = (torch.randn(2, 4, 9, 8) for _ in range(3))
    mask = torch.ones(9, 9, dtype=torch.bool).tril()

    def f(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    compiled = braze.compile(f, (q, k, v, mask))
    assert compiled.stats["attentions"] == 1
    _assert_matches(compiled(q, k, v, mask), f(q, k, v, mask), 2e-5)


class _RepeatedHeads(torch.nn.Module):
    """Grouped-query attention as HF writes it: repeat_kv (expand and
    reshape the key/value heads), then SDPA or the spelled-out form."""

    def __init__(self, spelled_out):
        super().__init__()
        self.spelled_out = spelled_out

    @staticmethod
    def _repeat(x, group):
        b, heads, s, d = x.shape
        return x[:, :, None].expand(b, heads, group, s, d).reshape(b, heads * group, s, d)

    def forward(self, q, k, v, mask):
        k, v = self._repeat(k, 4), self._repeat(v, 4)
        if self.spelled_out:
            return torch.softmax((q @ k.transpose(-1, -2)) * 0.25 + mask, -1) @ v
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("spelled_out", [False, True])
def test_repeated_heads_are_read_in_place(spelled_out):
    """The repeat is never made: the attention reads the 2 key/value heads
    with gqa (query head h reads head h // 4, as repeat_kv gives)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, 8, 9, 16, generator=g), torch.randn(2, 2, 9, 16, generator=g), \
        torch.randn(2, 2, 9, 16, generator=g)
    mask = torch.randn(2, 1, 9, 9, generator=g)
    model = _RepeatedHeads(spelled_out)
    compiled = braze.compile(model, (q, k, v, mask))
    text = str(compiled.compiled.module)
    assert " gqa " in text and "braze.expand" not in text
    _assert_matches(compiled(q, k, v, mask), model(q, k, v, mask), 2e-5)


def _shifted_windows(q, k, v, bias, windows):
    """Swin's shifted-window attention: a position bias [H, N, N] added to
    scores of [B*nW, H, N, N], which are viewed as [B, nW, H, N, N] to add
    the window mask [nW, N, N] and viewed back for the softmax."""
    heads, n = q.shape[1], q.shape[2]
    scores = q @ k.transpose(-2, -1) + bias.unsqueeze(0)
    scores = scores.view(-1, windows.shape[0], heads, n, n) + windows.unsqueeze(1).unsqueeze(0)
    return torch.softmax(scores.view(-1, heads, n, n), -1) @ v


def _window_inputs(batch, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch * 4, 3, 16, 8, generator=g).to(dtype) for _ in range(3))
    bias = torch.randn(3, 16, 16, generator=g).to(dtype)
    windows = torch.where(torch.rand(4, 16, 16, generator=g) < 0.4, float("-inf"), 0.0).to(dtype)
    windows[2, 5] = float("-inf")  # a query that sees no key: NaN, as in eager
    return q, k, v, bias, windows


@pytest.mark.parametrize("flash", [True, False], ids=["flash_kernel", "library"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_shifted_window_masks_are_summed_into_one_attention(dtype, flash):
    """The attention runs over [B, nW, H] and reads bias + window mask (one
    [1, nW, H, N, N] tensor); the products and the softmax are gone. In the
    generated kernel and in the library's (SDPA over [B, nW * H], the mask
    joined alike)."""
    args = _window_inputs(2, dtype)
    options = {"flash_attention_halves": True} if flash else {"flash_attention": False}
    compiled = braze.compile(_shifted_windows, args, options=options)
    assert compiled.stats["attentions"] == 1 and compiled.stats["gemms"] == 0
    assert compiled.stats["flash_attentions"] == int(flash)
    expected = _shifted_windows(*args)
    assert torch.isnan(expected[2::4, :, 5]).all()
    _assert_matches(compiled(*args), expected, 2e-5 if dtype == torch.float32 else 3e-2)


def test_shifted_windows_with_a_dynamic_batch():
    """The batch is dynamic (q, k and v come in as [B, nW, ...], as Swin
    makes its windows): the merged and split batch dims are dynamic."""

    def windowed(q, k, v, bias, windows):
        return _shifted_windows(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), bias, windows)

    def inputs(batch, seed):
        q, k, v, bias, windows = _window_inputs(batch, torch.float32, seed)
        return (*(t.unflatten(0, (batch, 4)) for t in (q, k, v)), bias, windows)

    dims = {0: torch.export.Dim("batch", min=1, max=8)}
    compiled = braze.compile(windowed, inputs(2, 0), dynamic_shapes=(dims, dims, dims, None, None))
    assert compiled.stats["attentions"] == 1
    for batch in (1, 3):
        args = inputs(batch, batch)
        _assert_matches(compiled(*args), windowed(*args), 2e-5)


@pytest.mark.parametrize("flash", [True, False], ids=["flash_kernel", "library"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_soft_capped_scores_are_one_attention(dtype, flash):
    """Gemma 2's `cap * tanh(s * scale / cap)` before a causal additive mask
    (minus infinity above the diagonal, a row with every key masked): one
    attention with `softcap`, in the generated kernel and in the library's
    realisation (SDPA has no soft cap: spelled out there), against eager."""
    from braze.testing.modules import SoftCappedAttention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 21, 16, generator=g).to(dtype) for _ in range(3))
    mask = torch.full((21, 21), float("-inf")).triu(1)
    mask[5] = float("-inf")
    mask = mask.expand(2, 1, 21, 21).to(dtype)
    model = SoftCappedAttention()
    options = {"flash_attention_halves": True} if flash else {"flash_attention": False}
    compiled = braze.compile(model, (q, k, v, mask), options=options)
    assert compiled.stats["attentions"] == 1 and compiled.stats["flash_attentions"] == int(flash)
    # Eager in f32, rounded: eager's own bf16 product of the probabilities
    # and v on an AMX CPU (oneDNN) makes the row beside the NaN row NaN too.
    expected = model(q.float(), k.float(), v.float(), mask.float()).to(dtype)
    assert torch.isnan(expected[:, :, 5]).all() and not torch.isnan(expected[:, :, 4]).any()
    _assert_matches(compiled(q, k, v, mask), expected, 2e-5 if dtype == torch.float32 else 3e-2)
    uncapped = torch.softmax(q.float() @ k.float().transpose(-2, -1) * 0.25 + mask.float(), -1) @ v.float()
    assert (uncapped.nan_to_num() - expected.float().nan_to_num()).abs().max() > 0.1  # the cap matters here


def test_reference_interpreter_runs_a_soft_capped_attention():
    """The reference interpreter (the host-op table's spelled-out soft cap)
    agrees before and after braze-form-attention."""
    from braze.testing.modules import SoftCappedAttention

    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 12, 8, generator=g) for _ in range(3))
    mask = torch.randn(1, 1, 12, 12, generator=g)
    exported = braze.export(SoftCappedAttention(), (q, k, v, mask))
    module = braze.parse(str(exported.module))
    braze.run_pipeline(module, "braze-simplify")
    before = braze.reference.run(module, q, k, v, mask, parameters=exported.parameters)
    braze.run_pipeline(module, "func.func(braze-form-attention)")
    assert "softcap" in str(module) and "braze.tanh" not in str(module)
    after = braze.reference.run(module, q, k, v, mask, parameters=exported.parameters)
    for b, a in zip(before, after):
        _assert_matches(a, b, 2e-5)


def test_gemma2_forms_its_soft_capped_attentions():
    """transformers' Gemma 2 (built from its config, eager attention: the
    soft cap of 50, a sliding-window or causal mask, grouped key/value
    heads) compiles with every attention formed, and matches eager."""
    zoo = pytest.importorskip("braze.testing.zoo")
    try:
        zoo.import_libraries()
    except ImportError as error:
        pytest.skip(f"the zoo needs transformers ({error})")
    model, args, kwargs = zoo.BY_NAME["gemma2"].make(zoo.SMALL)
    model = model.eval()
    with torch.no_grad():
        expected = model(*args, **kwargs).last_hidden_state
        compiled = braze.compile(model, args, kwargs=kwargs)
        out = compiled(*args, **kwargs)
    out = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    assert compiled.stats["attentions"] == zoo.SMALL.layers and compiled.stats["flash_attentions"] == zoo.SMALL.layers
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
