"""The run-time rules of `braze.switch` and `braze.while`, shared by the
runtime (braze.runtime.control_flow) and the reference interpreter: which
branch an index selects, and whether a loop condition holds. Both read one
element of a rank-0 tensor (on a GPU: a copy to the host)."""

from __future__ import annotations

import torch

CONTROL_FLOW_OPS = ("braze.switch", "braze.while")


def branch_number(index: torch.Tensor, count: int) -> int:
    """The branch `index` selects among `count`: clamped to [0, count),
    as jax.lax.switch does (a bool index: False is 0, True is 1)."""
    return min(max(int(index.item()), 0), count - 1)


def condition_holds(predicate: torch.Tensor) -> bool:
    """A `braze.while` condition region's rank-0 `i1` result."""
    return bool(predicate.item())
