"""Tensor-parallel modules, split Megatron-style over a torch.distributed
group, that tests and benchmarks compile on several ranks."""

from __future__ import annotations

import torch
import torch.distributed._functional_collectives as fc


def block_weights(d: int, hidden: int) -> dict:
    """Unsharded weights of a TensorParallelBlock of width `d` and MLP width
    `hidden`, from torch's current random state."""
    weights = {name: torch.randn(d, d) / d ** 0.5 for name in ("wq", "wk", "wv", "wo")}
    weights.update(w1=torch.randn(d, hidden) / d ** 0.5, w2=torch.randn(hidden, d) / hidden ** 0.5)
    return weights


class TensorParallelBlock(torch.nn.Module):
    """A pre-norm transformer block of `heads` attention heads: each rank
    holds heads/world of them (column-parallel Q, K, V; row-parallel output
    projection) and hidden/world MLP units (column- then row-parallel); one
    all_reduce after each row-parallel projection. With no group it is the
    unsharded block."""

    def __init__(self, weights: dict, heads: int, rank: int = 0, world: int = 1, pg=None):
        super().__init__()
        d, hidden = weights["w1"].shape
        if heads % world or hidden % world:
            raise ValueError(f"{heads} heads and {hidden} MLP units do not split over {world} ranks")
        self.heads, self.head_dim, self.pg = heads // world, d // heads, pg
        cols = slice(rank * self.heads * self.head_dim, (rank + 1) * self.heads * self.head_dim)
        units = slice(rank * hidden // world, (rank + 1) * hidden // world)
        shards = {"wq": weights["wq"][:, cols], "wk": weights["wk"][:, cols], "wv": weights["wv"][:, cols],
                  "wo": weights["wo"][cols], "w1": weights["w1"][:, units], "w2": weights["w2"][units]}
        for name, shard in shards.items():
            setattr(self, name, torch.nn.Parameter(shard.clone()))

    def _reduce(self, partial):
        return fc.all_reduce(partial, "sum", self.pg) if self.pg is not None else partial

    def forward(self, x):
        batch, seq, d = x.shape
        h = torch.nn.functional.layer_norm(x, (d,))
        q, k, v = ((h @ w).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        attended = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self._reduce(attended.transpose(1, 2).reshape(batch, seq, -1) @ self.wo)
        h = torch.nn.functional.layer_norm(x, (d,))
        return x + self._reduce(torch.nn.functional.gelu(h @ self.w1) @ self.w2)
