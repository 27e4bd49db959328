"""The lowering table: FX call targets (aten overloads, a few Python
operators) to functions that emit braze ops.

A lowering is `fn(b: Builder, *args, **kwargs)` returning the node's value (an
MLIR value, or a tuple for multi-result ops). Importing this package fills
`LOWERINGS` from the modules below.
"""

from __future__ import annotations

from braze.dispatch import DispatchTable

LOWERINGS = DispatchTable("lowerings")
lowers = LOWERINGS.register


def target_name(target) -> str:
    """`aten.add.Tensor` for aten overloads, `operator.mul` for Python operators."""
    if hasattr(target, "overloadpacket"):
        return str(target)
    return f"{target.__module__}.{target.__name__}".replace("_operator.", "operator.")


def supported_targets() -> list[str]:
    return sorted(target_name(t) for t in LOWERINGS)


from braze.frontend.lowerings import creation, indexing, layout, nn, pointwise, reductions, symints, vision  # noqa: E402,F401
from braze.frontend.lowerings import collectives  # noqa: E402,F401
