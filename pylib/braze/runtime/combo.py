"""The step running a `braze.combo`: every sub-kernel's launch prepared
(inputs checked, outputs allocated, sizes built, as a kernel step does),
then one launch for all of them, which a target's step factory defines."""

from __future__ import annotations

from braze.errors import BrazeError


class ComboCall:
    """One launch of a combo's sub-kernels. `calls` are the sub-kernels'
    kernel steps (plain `KernelCall`s, used for `prepare` only)."""

    def __init__(self, name: str, calls: list):
        self.name = name
        self.calls = calls
        self.inputs = [slot for call in calls for slot in call.inputs]
        self.outputs = [slot for call in calls for slot in call.outputs]

    def launch(self, prepared: list[tuple]) -> int:
        """Runs every sub-kernel once, as one launch; `prepared` holds each
        sub-kernel's (inputs, outputs, extents, sizes) from
        `KernelCall.prepare`. Returns nonzero after an integer division by
        zero."""
        raise NotImplementedError

    def __call__(self, env: list) -> None:
        prepared = [call.prepare(env) for call in self.calls]
        if self.launch(prepared):
            raise BrazeError(f"combo {self.name} ({', '.join(c.name for c in self.calls)}): "
                             "integer division by zero")
        for call, (_, outputs, _, _) in zip(self.calls, prepared):
            for slot, tensor in zip(call.outputs, outputs):
                env[slot] = tensor
