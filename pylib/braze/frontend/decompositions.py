"""What the frontend decomposes before import, shared by braze.export and
the torch.compile backend."""

from __future__ import annotations


def without_attention(table):
    """`table` (a decomposition table) without the scaled-dot-product
    attention entries: attention stays one op, `braze.attention`, which runs
    fused (never writing the scores out). Decomposed, it would be matmuls
    and a softmax; and the CPU flash kernel's decomposition gives its output
    strides eager does not, which breaks a later view() (GPT-2, torch 2.13)."""
    for op in [op for op in table if "scaled_dot_product" in str(op)]:
        del table[op]
    return table
