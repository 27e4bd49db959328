"""The float32 models of the CPU benchmark (benchmarks/cpu/run.py).

Each entry of MODELS builds (model, example_args) deterministically from a
seed, so every engine and every subprocess sees the same weights and inputs.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """x [256, 1024] -> LayerNorm(x + fc2(gelu_erf(fc1(x)))), 1024 -> 4096 -> 1024."""

    def __init__(self, d=1024, hidden=4096):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.fc2(F.gelu(self.fc1(x))))  # approximate="none": erf form


class PreNormBlock(nn.Module):
    """Pre-norm transformer block: fused QKV Linear, causal SDPA, 4x GELU MLP."""

    def __init__(self, d=512, heads=8, hidden=2048):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class SoftmaxLayerNorm(nn.Module):
    """y = layer_norm(softmax(x, -1), (1024,), weight, bias)."""

    def __init__(self, d=1024):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(d))
        self.bias = nn.Parameter(0.1 * torch.randn(d))
        self.d = d

    def forward(self, x):
        return F.layer_norm(torch.softmax(x, -1), (self.d,), self.weight, self.bias)


def _chain(i, x):
    """Chain i of SmallChains: 3-5 pointwise ops, constants and ops vary with i."""
    a = 1.0 + 0.01 * i
    b = 0.25 - 0.005 * i
    kind = i % 4
    if kind == 0:
        return torch.sigmoid(x * a + b) * x - 0.1
    if kind == 1:
        return torch.tanh(x * a - b) + x * 0.5
    if kind == 2:
        return torch.relu(x + b) * a - x * x
    return torch.exp(-x * x * a) * x + b


class SmallChains(nn.Module):
    """64 independent pointwise chains on 64 inputs of [4096]; returns 64 tensors."""

    def __init__(self, n=64):
        super().__init__()
        self.n = n

    def forward(self, *xs):
        return tuple(_chain(i, x) for i, x in enumerate(xs))


class Overhead(nn.Module):
    """x0 + x1 + ... + x9 on 10 inputs of 16 elements: measures per-call overhead."""

    def forward(self, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out


def rotary_table(head_dim: int, max_len: int) -> torch.Tensor:
    """Rotary embedding angles [max_len, head_dim] (LLaMA's, base 10000)."""
    inv_freq = 1.0 / 10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(max_len).float(), inv_freq)
    return torch.cat((angles, angles), -1)


def rotate(x, cos, sin):
    """x rotated by the angles whose cos and sin are given (rotate-half form)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


class HandwrittenDecoderLayer(nn.Module):
    """A LLaMA-style decoder layer written out by hand, as reference
    implementations and many research repos do (no SDPA): RMSNorm, rotary
    embeddings from a cached table sliced to the sequence length, scores
    q k^T / sqrt(d) with a causal mask filled with -inf, softmax, @ v, output
    projection, SwiGLU MLP."""

    def __init__(self, d=512, heads=8, hidden=1408, max_len=2048):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.wqkv = nn.Linear(d, 3 * d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.w_gate = nn.Linear(d, hidden, bias=False)
        self.w_up = nn.Linear(d, hidden, bias=False)
        self.w_down = nn.Linear(hidden, d, bias=False)
        self.norm1 = nn.Parameter(1.0 + 0.1 * torch.randn(d))
        self.norm2 = nn.Parameter(1.0 + 0.1 * torch.randn(d))
        self.register_buffer("cos", rotary_table(self.head_dim, max_len).cos())
        self.register_buffer("sin", rotary_table(self.head_dim, max_len).sin())
        self.register_buffer("causal", torch.ones(max_len, max_len, dtype=torch.bool).tril())

    @staticmethod
    def _rms_norm(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.wqkv(self._rms_norm(x, self.norm1)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, self.head_dim).transpose(1, 2) for z in (q, k, v))
        cos, sin = self.cos[:t], self.sin[:t]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        scores = (q @ k.transpose(-2, -1)) / self.head_dim**0.5
        scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, c))
        h = self._rms_norm(x, self.norm2)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class LlamaLayer(nn.Module):
    """A LLaMA-style decoder layer as Hugging Face's LlamaDecoderLayer spells
    it, at TinyLlama-1.1B's sizes: RMSNorm, separate q/k/v projections,
    rotary embeddings from a cached table, grouped-query attention (the
    key/value heads repeated by expand + reshape, then SDPA), SwiGLU MLP.
    With past keys and values (a decode step) the new ones are appended by
    torch.cat, as a dynamic KV cache does, and the step attends to all."""

    def __init__(self, d=2048, heads=32, kv_heads=4, hidden=5632, max_len=4096):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)
        self.input_norm = nn.Parameter(1.0 + 0.1 * torch.randn(d))
        self.post_attention_norm = nn.Parameter(1.0 + 0.1 * torch.randn(d))
        self.register_buffer("cos", rotary_table(self.head_dim, max_len).cos())
        self.register_buffer("sin", rotary_table(self.head_dim, max_len).sin())

    @staticmethod
    def _rms_norm(x, weight):
        # As LlamaRMSNorm: in float32, the normalised value rounded back before the weight.
        y = x.float()
        return weight * (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)

    def _repeat_kv(self, x):
        b, kv_heads, length, dim = x.shape
        groups = self.heads // kv_heads
        return x[:, :, None].expand(b, kv_heads, groups, length, dim).reshape(b, self.heads, length, dim)

    def forward(self, x, *past):
        b, t, d = x.shape
        start = past[0].shape[2] if past else 0
        h = self._rms_norm(x, self.input_norm)
        q = self.q_proj(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.cos[start:start + t], self.sin[start:start + t]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if past:
            k, v = torch.cat((past[0], k), 2), torch.cat((past[1], v), 2)
        y = F.scaled_dot_product_attention(q, self._repeat_kv(k), self._repeat_kv(v), is_causal=not past)
        x = x + self.o_proj(y.transpose(1, 2).reshape(b, t, d))
        h = self._rms_norm(x, self.post_attention_norm)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class LinearGelu(nn.Module):
    """Linear 768->3072 + GELU (erf): BERT's FFN up-projection."""

    def __init__(self, d=768, hidden=3072):
        super().__init__()
        self.fc = nn.Linear(d, hidden)

    def forward(self, x):
        return F.gelu(self.fc(x))


class LinearResidualLayerNorm(nn.Module):
    """LayerNorm(residual + Linear 3072->768(h)): BERT's FFN down-projection."""

    def __init__(self, d=768, hidden=3072):
        super().__init__()
        self.fc = nn.Linear(hidden, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, h, residual):
        return self.norm(residual + self.fc(h))


class BertLayer(nn.Module):
    """A BERT-style post-norm encoder layer, attention spelled out as BERT's
    eager code does: q, k, v projections, softmax(q k^T / sqrt(d) + mask) v,
    output projection + residual + LayerNorm, GELU FFN + residual + LayerNorm."""

    def __init__(self, d=768, heads=12, hidden=3072):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.up, self.down = nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = (f(x).view(b, t, self.heads, self.head_dim).transpose(1, 2) for f in (self.q, self.k, self.v))
        scores = q @ k.transpose(-1, -2) / self.head_dim**0.5 + mask
        y = torch.softmax(scores, -1) @ v
        x = self.norm1(x + self.o(y.transpose(1, 2).reshape(b, t, c)))
        return self.norm2(x + self.down(F.gelu(self.up(x))))


class Attention(nn.Module):
    """scaled_dot_product_attention on given q, k, v (and mask): the
    attention kernel alone, as a model's layer calls it."""

    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[0] if mask else None, **self.options)


class Int8Linear(nn.Module):
    """A weight-only int8 linear layer as torchao's int8 weight-only
    quantisation writes it, `F.linear(x, w.to(x.dtype)) * scale` (the
    weight int8 [N, K], one scale per output channel), then SiLU: a LLaMA
    MLP's gate projection."""

    def __init__(self, d=4096, hidden=4096, dtype=torch.float32):
        super().__init__()
        weight = torch.randn(hidden, d) / d**0.5
        scale = weight.abs().amax(1) / 127
        self.register_buffer("weight", (weight / scale[:, None]).round().clamp(-128, 127).to(torch.int8))
        self.register_buffer("scale", scale.to(dtype))

    def forward(self, x):
        return F.silu(F.linear(x, self.weight.to(x.dtype)) * self.scale)


class ScaledLinear(nn.Module):
    """An fp8 (e4m3) linear layer: torch._scaled_mm of the input (quantised
    ahead of it, a scale per row) and the weight (a scale per output
    channel), with a bias, bf16 out."""

    def __init__(self, d=4096, hidden=4096):
        super().__init__()
        weight = torch.randn(hidden, d) / d**0.5
        scale = weight.abs().amax(1, keepdim=True) / 448
        self.register_buffer("weight", (weight / scale).to(torch.float8_e4m3fn))
        self.register_buffer("weight_scale", scale.t().contiguous())  # [1, N]
        self.register_buffer("bias", torch.randn(hidden).to(torch.bfloat16))

    def forward(self, x, x_scale):
        return torch._scaled_mm(x, self.weight.t(), x_scale, self.weight_scale, bias=self.bias,
                                out_dtype=torch.bfloat16)


def _float8_rows(x):
    """x quantised to e4m3 with a scale per row (amax / 448)."""
    scale = x.abs().amax(1, keepdim=True) / 448
    return (x / scale).to(torch.float8_e4m3fn), scale


def _attention(rand, batch, heads, length, keys, dim, mask=None, dtype=torch.float32, kv_heads=None, **options):
    q = rand(batch, heads, length, dim).to(dtype)
    k, v = (rand(batch, kv_heads or heads, keys, dim).to(dtype) for _ in range(2))
    if mask == "additive":  # BERT's key padding: 0 or minus infinity per key, broadcast over heads and rows
        pad = torch.zeros(batch, 1, 1, keys)
        pad[:, :, :, keys - keys // 8:] = float("-inf")
        args = (q, k, v, pad.to(dtype))
    elif mask == "boolean":  # a causal [L, S] mask, True where attending
        args = (q, k, v, torch.ones(length, keys, dtype=torch.bool).tril())
    else:
        args = (q, k, v)
    return Attention(**options).eval(), args


def _gen(seed):
    g = torch.Generator().manual_seed(seed)
    return lambda *shape: torch.randn(*shape, generator=g)


def build(name: str, seed: int = 0):
    """(model in eval mode, tuple of example args) for model `name`."""
    torch.manual_seed(seed)  # parameters
    rand = _gen(seed + 1)  # inputs
    if name == "mlp":
        return MLP().eval(), (rand(256, 1024),)
    if name == "block":
        return PreNormBlock().eval(), (rand(8, 128, 512),)
    if name == "softmax_layernorm":
        return SoftmaxLayerNorm().eval(), (rand(4096, 1024),)
    if name == "handwritten_decoder":
        return HandwrittenDecoderLayer().eval(), (rand(2, 512, 512),)
    if name.startswith("llama_"):
        dtype = torch.bfloat16 if name.endswith("_bf16") else torch.float32
        layer = LlamaLayer().to(dtype).eval()
        if name.removesuffix("_bf16") == "llama_prefill":
            return layer, (rand(1, 512, 2048).to(dtype),)
        past = tuple(rand(4, layer.kv_heads, 1024, layer.head_dim).to(dtype) for _ in range(2))
        return layer, (rand(4, 1, 2048).to(dtype), *past)
    if name == "small_chains":
        return SmallChains().eval(), tuple(rand(4096) for _ in range(64))
    if name == "overhead":
        return Overhead().eval(), tuple(rand(16) for _ in range(10))
    if name == "linear_gelu":
        return LinearGelu().eval(), (rand(1024, 768),)
    if name == "linear_residual_layernorm":
        return LinearResidualLayerNorm().eval(), (rand(1024, 3072), rand(1024, 768))
    if name == "bert_layer":
        return BertLayer().eval(), (rand(8, 128, 768), torch.zeros(8, 1, 1, 128))
    if name == "decode_mlp":
        return MLP().eval(), (rand(4, 1, 1024),)
    if name.startswith("int8_linear"):
        dtype = torch.bfloat16 if name.endswith("_bf16") else torch.float32
        rows = 1 if "decode" in name else 128
        return Int8Linear(dtype=dtype).eval(), (rand(rows, 4096).to(dtype),)
    if name.startswith("scaled_mm"):
        return ScaledLinear().eval(), _float8_rows(rand(1 if "decode" in name else 128, 4096))
    if name.startswith("attention_"):
        dtype = torch.bfloat16 if name.endswith("_bf16") else torch.float32
        kind = name.removeprefix("attention_").removesuffix("_bf16")
        if kind == "additive":
            return _attention(rand, 8, 12, 128, 128, 64, "additive", dtype)
        if kind == "boolean":
            return _attention(rand, 2, 8, 512, 512, 64, "boolean", dtype)
        if kind == "causal_long":
            return _attention(rand, 1, 12, 1024, 1024, 64, dtype=dtype, is_causal=True)
        if kind == "decode_gqa":
            return _attention(rand, 4, 32, 1, 1024, 128, dtype=dtype, kv_heads=8, enable_gqa=True)
    raise KeyError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")


# name -> description (for the report)
MODELS = {
    "mlp": "Linear 1024->4096, GELU (erf), Linear 4096->1024, residual, LayerNorm; x [256, 1024]",
    "block": "pre-norm transformer block, d 512, 8 heads, causal SDPA, MLP 512->2048->512 GELU; x [8, 128, 512]",
    "softmax_layernorm": "layer_norm(softmax(x, -1)) with weight and bias; x [4096, 1024]",
    "handwritten_decoder": ("LLaMA-style layer written by hand: RMSNorm, rotary from a sliced cache, "
                            "q k^T / sqrt(d), causal masked_fill -inf, softmax, @ v, SwiGLU; "
                            "d 512, 8 heads; x [2, 512, 512]"),
    "llama_prefill": ("LLaMA-style layer as Hugging Face spells it, TinyLlama-1.1B sizes: RMSNorm, q/k/v "
                      "projections, rotary, GQA (32 heads, 4 key/value heads, repeated by expand + reshape), "
                      "causal SDPA, SwiGLU 2048->5632->2048; x [1, 512, 2048]"),
    "llama_decode": ("llama_prefill's layer at a decode step: x [4, 1, 2048], past keys and values "
                     "[4, 4, 1024, 64] appended by torch.cat"),
    "llama_prefill_bf16": "llama_prefill in bfloat16 (weights, activations, the rotary tables)",
    "llama_decode_bf16": "llama_decode in bfloat16",
    "small_chains": "64 independent 3-5 op pointwise chains on 64 inputs of [4096]",
    "overhead": "x0 + ... + x9 on 10 inputs of [16]",
    "linear_gelu": "Linear 768->3072 + GELU (erf); x [1024, 768]",
    "linear_residual_layernorm": "LayerNorm(residual + Linear 3072->768(h)); h [1024, 3072], residual [1024, 768]",
    "bert_layer": ("BERT-style post-norm encoder layer, d 768, 12 heads, attention spelled out with an additive "
                   "mask, FFN 768->3072->768 GELU; x [8, 128, 768]"),
    "decode_mlp": "the mlp model at decode shapes (GEMV): x [4, 1, 1024]",
    "int8_linear": ("int8-weight linear 4096->4096 (F.linear(x, w.to(x.dtype)) * scale, a scale per output "
                    "channel) + SiLU, f32 activations; x [128, 4096]"),
    "int8_linear_bf16": "int8_linear with bf16 activations and scale",
    "int8_linear_decode": "int8_linear at a decode shape (GEMV): x [1, 4096]",
    "int8_linear_decode_bf16": "int8_linear_decode with bf16 activations and scale",
    "scaled_mm": ("torch._scaled_mm, e4m3 x e4m3, row-wise scales ([M, 1] for x, [1, N] for the weight), "
                  "bf16 bias and result, 4096->4096; x [128, 4096]"),
    "scaled_mm_decode": "scaled_mm at a decode shape: x [1, 4096]",
    "attention_additive": "SDPA with BERT's additive key-padding mask [8, 1, 1, 128]; q, k, v [8, 12, 128, 64]",
    "attention_additive_bf16": "attention_additive in bf16",
    "attention_boolean": "SDPA with a causal boolean mask [512, 512]; q, k, v [2, 8, 512, 64]",
    "attention_boolean_bf16": "attention_boolean in bf16",
    "attention_causal_long": "SDPA is_causal; q, k, v [1, 12, 1024, 64]",
    "attention_decode_gqa": "one decode step, grouped-query: q [4, 32, 1, 128], k, v [4, 8, 1024, 128]",
}
