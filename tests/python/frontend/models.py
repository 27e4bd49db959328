"""Small models the frontend tests capture, each typical of a workload."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d=32, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.fc2(F.gelu(self.fc1(x))))


class PreNormBlock(nn.Module):
    """A pre-norm transformer block with causal scaled-dot-product attention."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class MaskedAttention(nn.Module):
    """Attention with an explicit boolean mask, and masked_fill on the scores."""

    def __init__(self, d=32):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)

    def forward(self, x, mask):
        y = F.scaled_dot_product_attention(self.q(x), self.k(x), x, attn_mask=mask)
        scores = (self.q(x) @ self.k(x).transpose(-1, -2)) / math.sqrt(x.shape[-1])
        return y, scores.masked_fill(~mask, float("-inf")).softmax(-1)


class GPT2Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    """GPT-2 (two layers): token and position embeddings, blocks, tied LM head.

    Hand-written with GPT2Config's structure: the `transformers` GPT-2 does
    not pass torch.export with torch 2.13 (a view of a non-contiguous tensor
    in its Conv1D), so the tests use this equivalent instead.
    """

    def __init__(self, vocab=128, positions=64, d=32, heads=4, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(positions, d)
        self.h = nn.ModuleList(GPT2Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids):
        positions = torch.arange(0, ids.shape[1], dtype=torch.long)
        x = self.wte(ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


class RMSNormSwiGLU(nn.Module):
    def __init__(self, d=32, hidden=64):
        super().__init__()
        self.norm = nn.RMSNorm(d, eps=1e-6)
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Heads(nn.Module):
    """Reductions, comparisons, dtype conversions and index ops after a linear layer."""

    def __init__(self, d=16, classes=10):
        super().__init__()
        self.fc = nn.Linear(d, classes)

    def forward(self, x, labels):
        logits = self.fc(x)
        log_probs = F.log_softmax(logits, dim=-1)
        picked = log_probs.amax(-1)
        correct = (logits.argmax(-1) == labels).to(torch.int32).sum()
        half = logits.to(torch.float16).to(torch.bfloat16).float()
        return picked.mean(), correct, half.amin(0), torch.where(logits > 0, logits, 0.0).sum(-1)
