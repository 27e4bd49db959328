"""The reference interpreter: runs any braze module op by op with torch CPU ops.

It follows each op's documented semantics as directly as possible and is slow
on purpose; it is the oracle that passes and backends are checked against::

    before = braze.reference.run(module, x, parameters=weights)
    braze.run_pipeline(module, "braze-simplify")
    after = braze.reference.run(module, x, parameters=weights)

`run(module, *inputs, parameters=None, entry=None) -> list`

* `module`: a `braze.Module` (or an `ir.Module` / `builtin.module` op).
* `inputs`: one per argument of the entry function: torch tensors or numpy
  arrays for tensor arguments, Python ints for `index` arguments. Counts,
  ranks, element types, static dims and symbolic dims (`braze.dims`, see
  `braze.symbolic`) are checked before anything runs.
* `parameters`: name -> tensor (or numpy array) for `braze.parameter` ops.
* `entry`: the function to run; by default the module's only public one.

Returns the entry function's results: torch tensors with the declared dtype
(never aliasing an input or parameter) and Python ints for `index` results.
Every problem is a `BrazeError` that names the argument, or the op and its
location.

Ops are dispatched through `HANDLERS` (op name -> handler): the host ops of
`braze.hostops` (which the runtime runs through too, so every op has one
torch implementation) and the tensor-level compute ops of this package's
modules, one per family of ops.
"""

from __future__ import annotations

# Importing the handler modules fills the handler table.
from braze.reference import calls, fused_gemm, pointwise, reductions  # noqa: F401
from braze.reference.interpreter import Interpreter, module_operation
from braze.reference.registry import HANDLERS


def run(module, *inputs, parameters=None, entry: str | None = None) -> list:
    """Runs `entry` (or the only public function) of `module` on `inputs`."""
    module_op = module_operation(module)
    return Interpreter(module_op, parameters).run_entry(entry, inputs)


__all__ = ["HANDLERS", "Interpreter", "run"]
