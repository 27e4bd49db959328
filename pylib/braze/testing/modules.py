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
