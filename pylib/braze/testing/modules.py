"""Small torch modules tests and benchmarks capture."""

import torch


class Apply(torch.nn.Module):
    """A function as a module: `Apply(f)(*args)` is `f(*args)` (braze.export
    captures modules)."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *args):
        return self.function(*args)


class SoftCappedAttention(torch.nn.Module):
    """Gemma 2's eager attention over [B, H, L, E] q, k, v: the scores
    scaled, soft-capped (`cap * tanh(s / cap)`), masked (additive), and a
    softmax in f32 rounded back to q's type. A small cap bends every score
    (Gemma 2's is 50), so a kernel that left the cap out would not pass."""

    def __init__(self, scale: float = 0.25, cap: float = 2.0):
        super().__init__()
        self.scale, self.cap = scale, cap

    def forward(self, q, k, v, mask):
        scores = q @ k.transpose(-2, -1) * self.scale
        scores = torch.tanh(scores / self.cap) * self.cap + mask
        return torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype) @ v


def attention_for_projection(q, k, v):
    """A causal attention over [B, H, L, E] read as an output projection
    reads it, [B, L, H * E] (`transpose(1, 2).reshape`)."""
    b, h, l, e = q.shape
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.transpose(1, 2).reshape(b, l, h * v.shape[-1])


def window_attention_for_projection(q, k, v):
    """Swin's windowed attention over [B, W, H, N, E], read as
    [B * W, N, H * E]: the batch dims joined before the heads and rows swap."""
    b, w, h, n, e = q.shape
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return out.reshape(b * w, h, n, v.shape[-1]).transpose(1, 2).reshape(b * w, n, h * v.shape[-1])
