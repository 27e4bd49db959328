"""The reference interpreter's handler table: the host ops (braze.hostops,
which the runtime runs too) plus the tensor-level compute ops of this
package, one function per op name.

A handler receives the op, the runtime values of its operands (torch tensors,
Python ints and floats, in operand order) and the `Interpreter` running it
(a `HostContext`, with calls and regions), and returns the list of its
result values. The interpreter checks those results against the op's
declared types afterwards, so handlers only compute.
"""

from __future__ import annotations

from braze.dispatch import DispatchTable
from braze.hostops import HOST_OPS

HANDLERS = DispatchTable("reference handlers")
HANDLERS.update(HOST_OPS)
handles = HANDLERS.register
