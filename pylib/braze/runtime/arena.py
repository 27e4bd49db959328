"""The executor's side of braze-plan-memory: one arena per call.

The pass writes `braze.arena_bytes` on the function and `braze.offsets` on
each kernel, fused GEMM and combo (the byte offset of each result in the arena, -1 for a result
left to the allocator: returned, or of dynamic size), and `braze.reuse`
where a result overwrites a dying input that a library call (a GEMM, a
convolution) allocated. A call takes one
arena of `braze.arena_bytes` from braze's caching allocator (torch's on a
GPU device) and each planned kernel result is a strided view of it at its
offset; the plan guarantees that buffers sharing bytes are never live at
once. Results handed to the caller are never carved: the pass leaves every
buffer that reaches `func.return` to the allocator.

Each dtype in use views the arena once per call, into a slot of the call's
environment after the program's own slots, so a kernel step carves its
result with one `as_strided`.
"""

from __future__ import annotations

import torch

from braze.runtime.memory import default_allocator


class ArenaPlan:
    """The arena of one program: its size and, per dtype, the slot that
    holds the arena viewed as that dtype during a call."""

    def __init__(self, func_op, device: torch.device, first_slot: int):
        from mlir import ir  # only while a program is built: a loaded AOT package has no MLIR

        attribute = func_op.attributes["braze.arena_bytes"] if "braze.arena_bytes" in func_op.attributes else None
        self.bytes = ir.IntegerAttr(attribute).value if attribute is not None else 0
        self.planned_peak = (ir.IntegerAttr(func_op.attributes["braze.planned_peak_bytes"]).value
                             if "braze.planned_peak_bytes" in func_op.attributes else None)
        self.device = device
        self.first_slot = first_slot
        self.dtype_slots: dict[torch.dtype, int] = {}
        # Env slots of kernel results carved from the arena.
        self.carved: set[int] = set()

    def place(self, op, call) -> None:
        """Tells kernel step `call` (of kernel or fused GEMM `op`) where its
        planned results live: `call.carve[result] = (slot, shape, strides,
        offset)`, and which dying input (a library call's result) a result
        overwrites (`braze.reuse`): `call.reuse[result] = input`."""
        from mlir import ir  # only while a program is built (see __init__)

        if "braze.reuse" in op.attributes:
            for result, input_number in enumerate(ir.DenseI64ArrayAttr(op.attributes["braze.reuse"])):
                if input_number >= 0:
                    call.reuse[result] = input_number
        self._carve(call, _offsets(op))

    def place_combo(self, op, calls: list) -> None:
        """`place` for a combo `op`, whose results are its sub-kernel
        calls' results one after the other."""
        offsets = _offsets(op)
        for call in calls:
            self._carve(call, offsets[: len(call.outputs)])
            offsets = offsets[len(call.outputs):]

    def _carve(self, call, offsets: list[int]) -> None:
        if not getattr(call, "static", False):
            return
        for result, offset in enumerate(offsets):
            if offset < 0:
                continue
            dtype = call.result_dtypes[result]
            slot = self.dtype_slots.setdefault(dtype, self.first_slot + len(self.dtype_slots))
            itemsize = torch.empty((), dtype=dtype).element_size()
            shape = call.static_shapes[result]
            strides, step = [], 1
            for size in reversed(shape):
                strides.append(step)
                step *= size
            call.carve[result] = (slot, tuple(shape), tuple(reversed(strides)), offset // itemsize)
            self.carved.add(call.outputs[result])

    @property
    def slot_count(self) -> int:
        return len(self.dtype_slots)

    def fill(self, env: list) -> None:
        """Takes this call's arena and puts its dtype views in `env`."""
        if self.device.type == "cpu":
            arena = default_allocator().bytes(self.bytes)
        else:
            arena = torch.empty(self.bytes, dtype=torch.uint8, device=self.device)
        for dtype, slot in self.dtype_slots.items():
            env[slot] = arena.view(dtype)


def _offsets(op) -> list[int]:
    """The op's `braze.offsets` (-1: not in the arena), or none."""
    from mlir import ir  # only while a program is built (see ArenaPlan.__init__)

    if "braze.offsets" not in op.attributes:
        return []
    return list(ir.DenseI64ArrayAttr(op.attributes["braze.offsets"]))
