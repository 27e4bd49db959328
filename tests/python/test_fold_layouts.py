"""braze-fold-layouts end to end: the captured transformer, attention and
LLaMA-style models run with no host-side copy in any executor step
(`braze.runtime.copies.host_copies`), match eager, and the batched product
over several batch dims reads strided views in place."""

import importlib.util
import pathlib

import pytest
import torch

import braze
from braze.hostops.products import batched_product
from braze.runtime.copies import host_copies
from braze.testing.modules import Apply, attention_for_projection, window_attention_for_projection

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


frontend_models = _load("frontend_models", ROOT / "tests/python/frontend/models.py")
benchmark_models = _load("benchmark_models", ROOT / "benchmarks/cpu/models.py")


def _gqa_attention():
    class GroupedQueryAttention(torch.nn.Module):
        """Attention spelled out with 4 query heads sharing 2 KV heads
        through expand -> reshape, as LLaMA's repeat_kv does."""

        def __init__(self, d=32, heads=4, kv_heads=2):
            super().__init__()
            self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
            self.q = torch.nn.Linear(d, d, bias=False)
            self.kv = torch.nn.Linear(d, 2 * kv_heads * self.head_dim, bias=False)
            self.o = torch.nn.Linear(d, d, bias=False)

        def forward(self, x):
            b, t, c = x.shape
            q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
            k, v = self.kv(x).view(b, t, 2 * self.kv_heads, self.head_dim).transpose(1, 2).chunk(2, dim=1)
            group = self.heads // self.kv_heads
            k, v = (z[:, :, None].expand(b, self.kv_heads, group, t, self.head_dim)
                    .reshape(b, self.heads, t, self.head_dim) for z in (k, v))
            scores = (q @ k.transpose(-1, -2)) * self.head_dim ** -0.5
            y = scores.softmax(-1) @ v
            return self.o(y.transpose(1, 2).reshape(b, t, c))

    return GroupedQueryAttention()


def _cases():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 8, 32, generator=g)
    return {
        "gpt2_block": (frontend_models.GPT2Block(32, 4), (x,)),
        "prenorm_block": (frontend_models.PreNormBlock(), (x,)),
        "masked_attention": (frontend_models.MaskedAttention(), (x, torch.rand(2, 8, 8, generator=g) > 0.3)),
        "gpt2": (frontend_models.GPT2(), (torch.randint(0, 128, (2, 16), generator=g),)),
        "rmsnorm_swiglu": (frontend_models.RMSNormSwiGLU(), (x,)),
        "gqa_attention": (_gqa_attention(), (x,)),
        "benchmark_prenorm_block": (benchmark_models.PreNormBlock(64, 4, 128), (torch.randn(2, 8, 64, generator=g),)),
        "llama_decoder_layer": (benchmark_models.HandwrittenDecoderLayer(64, 4, 96, 32),
                                (torch.randn(2, 8, 64, generator=g),)),
        "llama_gqa_prefill": (benchmark_models.LlamaLayer(64, 8, 2, 96, 32), (torch.randn(2, 8, 64, generator=g),)),
        "llama_gqa_decode": (benchmark_models.LlamaLayer(64, 8, 2, 96, 32),
                             (torch.randn(2, 1, 64, generator=g), *torch.randn(2, 2, 2, 11, 8, generator=g))),
    }


CASES = list(_cases())


def _compiled(name: str, fold: bool, **options):
    torch.manual_seed(0)
    model, args = _cases()[name]
    model.eval()
    compiled = braze.compile(model, args, options={"fold_layouts": fold, **options})
    return model, args, compiled


@pytest.mark.parametrize("name", CASES)
def test_no_host_copies(name):
    model, args, compiled = _compiled(name, fold=True)
    copies = host_copies(compiled.compiled.program, *args)
    assert copies == [], f"steps that copied on the host: {copies}"
    with torch.no_grad():
        expected = model(*args)
    actual = compiled(*args)
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["gpt2_block", "gqa_attention", "llama_decoder_layer"])
def test_copies_without_the_pass(name):
    """The count sees the copies the pass removes (so the test above can
    fail): with the attention in its own order (braze-order-attention off),
    the transpose after it is a copy unless the pass reads it in place."""
    _, args, compiled = _compiled(name, fold=False, order_attention=False)
    assert host_copies(compiled.compiled.program, *args)


@pytest.mark.parametrize("name", ["gpt2_block", "llama_decoder_layer"])
def test_the_attention_in_its_readers_order_needs_no_copy(name):
    """braze-order-attention alone (no braze-fold-layouts): the flash
    attention stores its rows as [B, L, H, E], which the output projection
    reads as it is."""
    model, args, compiled = _compiled(name, fold=False)
    assert "result_order" in str(compiled.module)
    assert host_copies(compiled.compiled.program, *args) == []
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args), model(*args), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["projection", "windows"])
def test_the_library_attention_in_its_readers_order(case):
    """PyTorch's fused attention (flash_attention off) in its reader's order:
    the host op permutes its output, which costs no copy where SDPA's output
    memory is in that order already (a query that is a transposed view of a
    projection), and gives eager's values."""
    x, w = torch.randn(2, 37, 3 * 64), torch.randn(64, 64)

    def projection(x, w):
        q, k, v = x.view(2, 37, 3, 4, 16).permute(2, 0, 3, 1, 4)
        return attention_for_projection(q, k, v) @ w

    function, args = {"projection": (projection, (x, w)),
                      "windows": (window_attention_for_projection, tuple(torch.randn(2, 4, 3, 7, 8) for _ in range(3)))}[case]
    compiled = braze.compile(Apply(function), args, options={"flash_attention": False})
    assert compiled.stats["attentions"] == 1 and "result_order" in str(compiled.module)
    torch.testing.assert_close(compiled(*args), function(*args), rtol=1e-4, atol=1e-4)
    if case == "projection":
        assert host_copies(compiled.compiled.program, *args) == []


def test_zoo_text_models_have_no_host_copies():
    zoo = pytest.importorskip("braze.testing.zoo")
    try:
        zoo.import_libraries()
    except ImportError as error:
        pytest.skip(f"the zoo needs transformers ({error})")
    for name in ("bert", "llama"):
        model, args, kwargs = zoo.BY_NAME[name].make(zoo.SMALL)
        compiled = braze.compile(model, args, kwargs=kwargs, options={"fold_layouts": True})
        flat = compiled.exported.imported.arguments(torch.utils._pytree.tree_flatten((args, kwargs))[0])
        assert host_copies(compiled.compiled.program, *flat) == [], name


class _StemPool(torch.nn.Module):
    """ResNet's stem: convolution, batch norm, ReLU, then a 3x3 max pool
    with stride 2 whose padding braze spells as concats of -inf."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.nn.functional.max_pool2d(self.bn(self.conv(x)).relu(), 3, 2, 1) + 1


@pytest.mark.parametrize("name", ["llama_decoder_layer", "stem_pool"])
def test_kernels_read_concat_pieces(name):
    """Rotary embeddings' rotate_half and a max pool's padding are concats;
    the kernels that read them read their pieces, so no concat runs on the
    host (it did, one torch.cat each: ResNet-18's pool padding took a fifth
    of its call), and the results match eager."""
    if name == "stem_pool":
        model, args = _StemPool().eval(), (torch.randn(2, 3, 17, 17),)
        compiled = braze.compile(model, args)
    else:
        model, args, compiled = _compiled(name, fold=True)
    assert "braze.concat" not in str(compiled.module)
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args), model(*args), rtol=1e-4, atol=1e-5)
    unfolded = braze.compile(model, args, options={"fold_layouts": False})
    assert "braze.concat" in str(unfolded.module)


class _CacheStep(torch.nn.Module):
    """A decode step's KV cache: the past (of any length) and one new row,
    returned and read by attention with grouped heads."""

    def forward(self, q, past, new):
        cache = torch.cat([past, new], dim=2)
        out = torch.nn.functional.scaled_dot_product_attention(q, cache, cache, enable_gqa=True)
        return out, cache


@pytest.mark.parametrize("least", [2, 0])
def test_a_cache_of_a_dynamic_length_is_a_copy_kernel(least):
    """A past whose length is a symbol at least 2: no host concat, one copy
    kernel; a past that may be empty keeps torch's concat (the copy kernel
    reads every piece at every point). Both match eager at every length."""
    model = _CacheStep().eval()
    q, past, new = torch.randn(2, 8, 1, 16), torch.randn(2, 4, 5, 16), torch.randn(2, 4, 1, 16)
    length = torch.export.Dim("past", min=least, max=4096)
    compiled = braze.compile(model, (q, past, new), dynamic_shapes=(None, {2: length}, None))
    assert ("braze.concat" in str(compiled.module)) == (least == 0)
    for size in ([0] if least == 0 else []) + [2, 7, 700]:
        args = (q, torch.randn(2, 4, size, 16), new)
        with torch.no_grad():
            expected = model(*args)
        for a, e in zip(compiled(*args), expected):
            torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    if least:
        assert host_copies(compiled.compiled.program, q, past, new) == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batched_product_reads_strided_views(dtype):
    """[2, 4] batches that no single stride steps through (a head dim moved
    before the sequence), and a zero-stride (expanded) batch dim."""
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(2, 8, 96, generator=g).to(dtype)
    q = qkv[:, :, :32].reshape(2, 8, 4, 8).permute(0, 2, 1, 3)
    k = qkv[:, :, 32:64].reshape(2, 8, 4, 8).permute(0, 2, 3, 1)

    def product(lhs, rhs):
        return batched_product(lhs, rhs, torch.empty(*lhs.shape[:-1], rhs.shape[-1], dtype=dtype))

    torch.testing.assert_close(product(q, k), torch.matmul(q, k))
    shared = torch.randn(2, 1, 8, 5, generator=g).to(dtype).expand(2, 4, 8, 5)
    torch.testing.assert_close(product(q, shared), torch.matmul(q, shared))
