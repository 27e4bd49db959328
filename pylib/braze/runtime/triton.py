"""Runs the Triton target's kernels (codegen/triton): the step factory over
one loaded module of `@triton.jit` functions.

Two ways to run:

* `TRITON_INTERPRET=1`: Triton's interpreter runs every kernel on the
  host's torch tensors through numpy, so whole programs run here without a
  GPU. Triton 3.9's interpreter cannot call libdevice (its
  `create_extern_elementwise` raises NotImplementedError), so the loaded
  module's `libdevice` is replaced by numpy stand-ins (`INTERPRETER_LIBDEVICE`);
  its `tl.dot` multiplies bf16 operands as their bits, so they are widened
  first (`_widen_bf16_dot_operands`).
* on a CUDA or ROCm device: the program's tensors live on the device (the
  target's `run_device`), host ops run there through torch, and each kernel
  is launched on the current stream on the tensors in place.

Block sizes and warps come from the autotuner (runtime/autotune.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math
import os
import sys
import types
from pathlib import Path

import numpy as np
import torch

from braze.codegen.analysis import KernelSpec, combo_schedules
from braze.codegen.triton import attention
from braze.errors import BrazeError
from braze.runtime.autotune import TILED, Config, TileConfig, Tuner, shape_class
from braze.runtime.combo import ComboCall, launch_size
from braze.runtime.cuda_graph import failure_flag
from braze.runtime.executor import KernelCall, StepFactory


def interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _numpy_function(function):
    """A libdevice function for the interpreter: `function` over the numpy
    data of its interpreter tensors, in their element type."""

    def interpreted(*args, **_):
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        tensors = [a for a in args if isinstance(a, tl.tensor)]
        scalar = tensors[0].dtype.scalar
        arrays = [a.handle.data if isinstance(a, tl.tensor) else a for a in args]
        with np.errstate(all="ignore"):
            data = np.asarray(function(*arrays)).astype(tensors[0].handle.data.dtype)
        blocks = any(t.type.is_block() for t in tensors)
        return tl.tensor(TensorHandle(data, scalar), tl.block_type(scalar, list(data.shape)) if blocks else scalar)

    return interpreted


INTERPRETER_LIBDEVICE = types.SimpleNamespace(**{
    name: _numpy_function(function) for name, function in {
        "expm1": np.expm1, "log1p": np.log1p, "tanh": np.tanh, "tan": np.tan, "asin": np.arcsin,
        "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "trunc": np.trunc,
        "rint": np.rint, "pow": np.power, "atan2": np.arctan2, "fmod": np.fmod}.items()})


def _widen_bf16_dot_operands() -> None:
    """Triton 3.9's interpreter multiplies bf16 `tl.dot` operands as the
    uint16 words it stores them in; its `create_dot` is given operands
    widened to float32 first (exact: a GPU's bf16 MMA multiplies exactly and
    accumulates in f32 too). Done once per process."""
    import triton.language as tl
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    create_dot = InterpreterBuilder.create_dot
    if getattr(create_dot, "widens_bf16", False):
        return

    def widened(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        return TensorHandle((handle.data.astype(np.uint32) << 16).view(np.float32), tl.float32)

    def create_dot_widening_bf16(self, a, b, d, input_precision, max_num_imprecise_acc):
        return create_dot(self, widened(a), widened(b), d, input_precision, max_num_imprecise_acc)

    create_dot_widening_bf16.widens_bf16 = True
    InterpreterBuilder.create_dot = create_dot_widening_bf16


def load_module(path: Path):
    """The kernels' module loaded from `path` (Triton reads the source of
    each @triton.jit function from it)."""
    name = "braze_triton_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton resolves the kernels' globals through it
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # a broken module: the cache rebuilds or reports it
        sys.modules.pop(name, None)
        raise BrazeError(f"the Triton module {path} does not load: {error}") from None
    if interpreting():
        module.libdevice = INTERPRETER_LIBDEVICE
        _widen_bf16_dot_operands()
    return module


def check_mode() -> None:
    """Triton decides once per process, when triton.language is first
    imported, whether its own @triton.jit functions (tl.sum, tl.max, ...)
    are interpreted: kernels then run only in that mode."""
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    imported_interpreted = isinstance(tl.sum, InterpretedFunction)
    if imported_interpreted != interpreting():
        first, now = ("interpreted", "compiled") if imported_interpreted else ("compiled", "interpreted")
        raise BrazeError(
            f"Triton kernels cannot run {now} in this process: triton was imported for {first} "
            f"kernels (TRITON_INTERPRET is read once, at the first import of triton; set it, or "
            f"unset it, before anything imports triton)")


def kernel_arguments(spec: KernelSpec, inputs: list, outputs: list, extents: list, failed) -> list:
    """The positional arguments of a kernel (codegen/triton's order):
    inputs, results, `failed`, dynamic extents, every input's strides."""
    arguments = [*inputs, *outputs]
    if spec.can_fail:
        arguments.append(failed)
    arguments += [e for e, size in zip(extents, spec.static_domain) if size is None]
    arguments += [stride for tensor in inputs for stride in tensor.stride()]
    return arguments


# Offsets below this are computed in 32 bits (`index_type`).
INDEX_LIMIT = 2**31


def index_type(tensors: list, points: int, block: int):
    """The kernels' `INDEX` for one launch over `tensors` (inputs and
    results) and `points` (the domain's; the largest sub-kernel's for a
    combo): tl.int32 when every offset stays below 2**31, else tl.int64.
    The offsets: each tensor's farthest element through its strides, the
    points; twice the largest plus a program's `block`, since the masked
    lanes of a last block decode indices up to one past each dim."""
    import triton.language as tl

    farthest = points
    for tensor in tensors:
        if tensor.numel():
            farthest = max(farthest, 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride())))
    return tl.int32 if 2 * farthest + block < INDEX_LIMIT else tl.int64


def grid(spec: KernelSpec, extents: list, config: Config) -> int:
    rows = math.prod(e for d, e in enumerate(extents) if d not in spec.reduce)
    return -(-rows // config.xblock)


class _TritonKernelCall(KernelCall):
    views_in_place = True  # kernels read every input through its strides

    def __init__(self, function, spec: KernelSpec, op, slots: dict, tuner: Tuner, source_hash: str):
        super().__init__(spec, op, slots)
        self.function = function
        self.source_path = function.fn.__code__.co_filename
        self.spec = spec
        self.tuner = tuner
        self.source_hash = source_hash

    def launch(self, inputs, outputs, extents, sizes) -> int:
        if math.prod(e for d, e in enumerate(extents) if d not in self.spec.reduce) == 0:
            return 0  # no point to compute; results are empty
        device = outputs[0].device if outputs else inputs[0].device
        failed = torch.zeros(1, dtype=torch.int32, device=device) if self.spec.can_fail else None
        classes = shape_class(self.spec, extents)
        constants = self.constants(extents)

        def run(config, into=outputs, flag=failed):
            arguments = kernel_arguments(self.spec, inputs, into, extents, flag)
            arguments += self.more_arguments(config, inputs, into)
            index = self.index(config, inputs + into, extents)
            self.function[self.grid(extents, config)](*arguments, **constants, **index, **config.launch_options(self.spec))

        def scratch_run(config):
            # Tuning runs write scratch results: a result may share an input's buffer.
            run(config, [torch.empty_like(t) for t in outputs],
                None if failed is None else torch.zeros_like(failed))

        config = self.tuner.choose(self.spec, self.source_hash, classes, device.type, scratch_run)
        try:
            run(config)
        except Exception as error:  # Triton's compile and launch errors have no common base
            if isinstance(error, BrazeError):
                raise
            raise BrazeError(f"Triton could not run kernel {self.name} ({config}); its source is kept in "
                             f"{self.source_path}:\n{error}") from None
        return failure_flag(failed, self.culprit) if failed is not None else 0

    def grid(self, extents: list, config: Config) -> tuple:
        return (grid(self.spec, extents, config),)

    def constants(self, extents: list) -> dict:
        """The kernel's `tl.constexpr`s that follow from the extents."""
        return {}

    def more_arguments(self, config, inputs: list, outputs: list) -> list:
        """Arguments after the kernel ABI's, for `config`."""
        return []

    def index(self, config, tensors: list, extents: list) -> dict:
        """The kernel's `INDEX` for a launch over `tensors` with `config`
        (codegen/triton/emitter.py: 32-bit offsets where they fit); a
        persistent reduction's RBLOCK is below twice its reduced points."""
        rblock = config.rblock or 2 * math.prod(extents[d] for d in self.spec.reduce)
        return {"INDEX": index_type(tensors, math.prod(extents), config.xblock * rblock)}


# CUDA's limit on the grid's second axis (the batch of a tiled kernel).
GRID_Y_LIMIT = 65535


class _TritonTiledCall(_TritonKernelCall):
    """A fused GEMM (codegen/triton/gemm.py) or a flash attention
    (codegen/triton/attention.py): a 2-D grid of tiles by batch; a fused
    GEMM's unfused alternative computes the product with torch first."""

    def __init__(self, function, spec: KernelSpec, op, slots: dict, tuner: Tuner, source_hash: str):
        super().__init__(function, spec, op, slots, tuner, source_hash)
        self.batch_dims = spec.input_types[0].rank - 2
        self.gemm = spec.strategy == "gemm"
        if self.gemm:
            self.transpose = ("transpose_lhs" in op.attributes, "transpose_rhs" in op.attributes)
            # With row statistics a program walks whole rows (the outputs come first, [B..., M, N]).
            self.whole_rows = any(t.rank < spec.result_types[0].rank for t in spec.result_types)

    def launch(self, inputs, outputs, extents, sizes) -> int:
        if interpreting() and self.gemm and (inputs[0].element_size() == 1 or (
                inputs[1].element_size() == 1 and inputs[0].dtype == torch.bfloat16)):
            # Triton 3.9's interpreter converts neither 8-bit floats nor int8 to bf16 correctly
            # (bf16 is raw bits to it); the kernel widens them to bf16 as it loads, exactly, so
            # here they come widened already.
            inputs = [t.to(torch.bfloat16) if n < 2 else t for n, t in enumerate(inputs)]
        return super().launch(inputs, outputs, extents, sizes)

    def grid(self, extents: list, config: TileConfig) -> tuple[int, int]:
        b = self.batch_dims
        batches = math.prod(extents[:b])
        if batches > GRID_Y_LIMIT:
            raise BrazeError(f"kernel {self.name}: {batches} batches exceed the {GRID_Y_LIMIT} programs "
                             f"of a grid's second axis")
        tiles = -(-extents[b] // config.block_m)  # M, or L
        if self.gemm and not self.whole_rows:
            tiles *= -(-extents[b + 1] // config.block_n)
        return tiles, batches

    def constants(self, extents: list) -> dict:
        return {} if self.gemm else attention.head_blocks(self.spec, extents)

    def index(self, config, tensors: list, extents: list) -> dict:
        return {}  # tiled kernels index in 64 bits

    def more_arguments(self, config: TileConfig, inputs: list, outputs: list) -> list:
        if not self.gemm:
            return []
        # The unfused alternative's product, by torch's GEMM ([B..., M, N], contiguous, in
        # the operands' type); the fused kernel does not read it.
        if not config.unfused:
            return [outputs[0]]
        lhs, rhs = (t.mT if transposed else t for t, transposed in zip(inputs[:2], self.transpose))
        if lhs.element_size() == 1:  # 8-bit floats: torch's GEMM takes them widened (exactly)
            lhs, rhs = lhs.float(), rhs.float()
        elif rhs.dtype != lhs.dtype:  # an int8 weight, widened (exactly) to the activations' type
            rhs = rhs.to(lhs.dtype)
        return [torch.matmul(lhs, rhs).contiguous()]


class _TritonComboCall(ComboCall):
    """A combo's launch function (codegen/triton/combo.py) on a 1-D grid of
    every sub-kernel's work items; blocks are the combo's schedules."""

    def __init__(self, function, name: str, calls: list, combo_op):
        super().__init__(name, calls)
        self.function = function
        self.dispatch = combo_op.attributes["dispatch"].value
        self.schedules = combo_schedules(combo_op)
        self.blocks = [schedule.block for schedule in self.schedules]
        self.specs = [call.spec for call in calls]
        self.can_fail = any(spec.can_fail for spec in self.specs)

    def launch(self, prepared: list[tuple]) -> int:
        items = [-(-math.prod(e for d, e in enumerate(extents) if d not in spec.reduce) // block)
                 for spec, block, (_, _, extents, _) in zip(self.specs, self.blocks, prepared)]
        programs = launch_size(self.dispatch, items)
        if programs == 0:
            return 0
        device = next(t.device for inputs, outputs, _, _ in prepared for t in inputs + outputs)
        # Only sub-kernels that can fail take the flag: reading it waits for the stream.
        failed = torch.zeros(1, dtype=torch.int32, device=device) if self.can_fail else None
        arguments = [a for spec, (inputs, outputs, extents, _) in zip(self.specs, prepared)
                     for a in kernel_arguments(spec, inputs, outputs, extents, failed)]
        tensors = [t for inputs, outputs, _, _ in prepared for t in inputs + outputs]
        points = max(math.prod(extents) for _, _, extents, _ in prepared)
        index = index_type(tensors, points, max(s.block * (s.rblock or 2 * math.prod(extents[d] for d in spec.reduce))
                                                for s, spec, (_, _, extents, _) in zip(self.schedules, self.specs, prepared)))
        try:
            self.function[(programs,)](*arguments, INDEX=index)
        except Exception as error:  # Triton's compile and launch errors have no common base
            raise BrazeError(f"Triton could not run combo {self.name}; its source is kept in "
                             f"{self.function.fn.__code__.co_filename}:\n{error}") from None
        return failure_flag(failed, self.culprit) if self.can_fail else 0


class TritonKernels(StepFactory):
    """The Triton target's step factory over one loaded module."""

    def __init__(self, module, tuner: Tuner, device: str):
        self.module = module
        self.tuner = tuner
        self.device = torch.device(device)

    def kernel_call(self, spec: KernelSpec, op, slots: dict) -> KernelCall:
        function = getattr(self.module, spec.name)
        # The tuning cache's key: the kernel's own text (not its module's).
        source_hash = hashlib.sha256(inspect.getsource(function.fn).encode()).hexdigest()
        call = _TritonTiledCall if spec.strategy in TILED else _TritonKernelCall
        return call(function, spec, op, slots, self.tuner, source_hash)

    def combo_call(self, name: str, calls: list, op):
        return _TritonComboCall(getattr(self.module, name), name, calls, op)
