"""Host ops: every op that runs through torch outside the compiled kernels
(constants and parameters, layout ops and other views, `tensor.dim` and index
arithmetic, matrix products, attention and convolutions through the vendor
library, `braze.extern` aten calls), one torch implementation each, on
whatever device the tensors live.

`HOST_OPS` (op name -> handler, see `table`) is the one table both the
runtime (braze.runtime.executor) and the reference interpreter
(braze.reference, which adds the tensor-level compute ops) dispatch through.
`signature` chooses a module's entry function and checks arguments against
it, for both.
"""

from __future__ import annotations

# Importing the handler modules fills the table.
from braze.hostops import constants, extern, index, layout, products  # noqa: F401
from braze.hostops.table import HOST_OPS, HostContext, op_error, prepare_op, prepare_record, run_op

__all__ = ["HOST_OPS", "HostContext", "op_error", "prepare_op", "prepare_record", "run_op"]
