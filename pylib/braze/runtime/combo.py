"""The step running a `braze.combo`: every sub-kernel's launch prepared
(inputs checked, outputs allocated, sizes built, as a kernel step does),
then one launch for all of them, which a target's step factory defines.
`GpuComboCall` is the host side the C-like GPU targets share (OpenCL, CUDA,
the Metal shim; codegen/gpu_combo.py is the device side)."""

from __future__ import annotations

import array

from braze.errors import BrazeError


def launch_size(dispatch: str, items: list[int]) -> int:
    """Blocks (Triton: programs) of a combo's 1-D launch, given each
    sub-kernel's (codegen/triton/combo.py, codegen/gpu_combo.py)."""
    if dispatch == "sequential":
        return sum(items)
    return len(items) * max(items)  # round_robin and flattened: K slots of the most items


class ComboCall:
    """One launch of a combo's sub-kernels. `calls` are the sub-kernels'
    kernel steps (plain `KernelCall`s, used for `prepare` only)."""

    def __init__(self, name: str, calls: list):
        self.name = name
        self.calls = calls
        self.inputs = [slot for call in calls for slot in call.inputs]
        self.outputs = [slot for call in calls for slot in call.outputs]
        self.size_counts = [call.size_count for call in calls]

    def kernel_sizes(self, kernel_sizes: list) -> list[int]:
        """The sub-kernels' `sizes` arrays one after the other, exactly
        `size_count` entries each: a kernel without sizes holds a
        placeholder entry for its own call, which must not shift the next
        sub-kernel's sizes."""
        return [size for sizes, count in zip(kernel_sizes, self.size_counts) for size in sizes[:count]]

    def static_kernel_sizes(self) -> list[int] | None:
        """`kernel_sizes` of the prebuilt static arrays, when every
        sub-kernel is static (None otherwise)."""
        if not all(call.static for call in self.calls):
            return None
        return self.kernel_sizes([call.static_sizes for call in self.calls])

    def passes_static_sizes(self, prepared: list[tuple]) -> bool:
        """Whether every sub-kernel's prepared launch (`KernelCall.prepare`)
        passes its prebuilt static sizes (static and contiguous this call)."""
        return all(sizes is call.static_sizes for call, (_, _, _, sizes) in zip(self.calls, prepared))

    def launch(self, prepared: list[tuple]) -> int:
        """Runs every sub-kernel once, as one launch; `prepared` holds each
        sub-kernel's (inputs, outputs, extents, sizes) from
        `KernelCall.prepare`. Returns nonzero after an integer division by
        zero."""
        raise NotImplementedError

    def culprit(self) -> str:
        """What an integer division by zero names."""
        return f"combo {self.name} ({', '.join(c.name for c in self.calls)})"

    def __call__(self, env: list) -> None:
        prepared = [call.prepare(env) for call in self.calls]
        if self.launch(prepared):
            raise BrazeError(f"{self.culprit()}: integer division by zero")
        for call, (_, outputs, _, _) in zip(self.calls, prepared):
            for slot, tensor in zip(call.outputs, outputs):
                env[slot] = tensor


class GpuComboCall(ComboCall):
    """The host side of a combo of the C-like GPU renderers
    (codegen/gpu_combo.py): per call, each sub-kernel's blocks
    (`KernelSpec.blocks` over its extents), the launch's `sizes` array (those
    blocks, then every sub-kernel's own sizes), its grid and its buffers
    (`buffers`: the (sub-kernel, buffer) of each buffer parameter, from
    `Unit.launch_buffers`). A target's launcher defines `run`."""

    def __init__(self, name: str, calls: list, op, buffers: list[tuple[int, int]]):
        super().__init__(name, calls)
        self.dispatch = op.attributes["dispatch"].value
        self.buffers = buffers
        # Buffer parameters a sub-kernel writes (the launcher copies them back, or not).
        self.written = [n >= len(calls[k].inputs) for k, n in buffers]
        self.threads = max(call.spec.threads for call in calls)
        self.can_fail = any(call.spec.can_fail for call in calls)
        # Static, contiguous sub-kernels pass the same sizes on every call.
        static = self.static_kernel_sizes()
        self.static_sizes = None if static is None else array.array(
            "q", [call.spec.blocks(call.domain) for call in calls] + static)

    def launch(self, prepared: list[tuple]) -> int:
        blocks = [call.spec.blocks(extents) for call, (_, _, extents, _) in zip(self.calls, prepared)]
        grid = launch_size(self.dispatch, blocks)
        if grid == 0:
            return 0  # every sub-kernel's results are empty
        if self.static_sizes is not None and self.passes_static_sizes(prepared):
            sizes = self.static_sizes
        else:
            sizes = array.array("q", blocks + self.kernel_sizes([kernel_sizes for _, _, _, kernel_sizes in prepared]))
        tensors = [(prepared[k][0] + prepared[k][1])[n] for k, n in self.buffers]
        return self.run(tensors, sizes, grid)

    def run(self, tensors: list, sizes: array.array, blocks: int) -> int:
        """One launch of `blocks` blocks of `self.threads` threads over the
        buffer parameters `tensors` and `sizes` (the static array object
        itself when nothing changed, so a launcher may cache its copy).
        Returns the failure flag."""
        raise NotImplementedError
