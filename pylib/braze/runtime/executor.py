"""Runs a lowered function on one device: compiled kernels through the
target's step factory, host ops through torch. Nothing here knows a target.

A `Program` is built once from the function after `braze-lower-kernels`:
every SSA value gets a slot, constants and parameters are evaluated once (on
the program's device), and each remaining op becomes a step. At call time
the arguments are checked (types, static dims, device, `braze.dims`
symbols), then the steps run in order:

* `braze.kernel`: outputs are carved from the call's arena where
  braze-plan-memory placed them (runtime/arena.py), else allocated with
  torch on the program's device, then the target's `KernelCall` launches
  the kernel once (see `StepFactory`);
* everything else (matrix products through the device's vendor library,
  attention, convolutions, views and other layout ops, `tensor.dim` and
  index arithmetic, `braze.extern` aten calls) runs through the host-op
  table `braze.hostops.HOST_OPS`, which the reference interpreter uses too,
  so each op has one torch implementation; each is prepared here once
  (`prepare_op`: the op's attributes and types read now), so a call does
  only the torch work.

Slots are released after their last use, so memory follows the program's
live values, not its length.

MLIR is read only while a program is built: host steps keep their op's
`OpRecord`, and calling a built program needs no compiler, so an AOT
package (braze.aot) can write a program's steps and load them again.
"""

from __future__ import annotations

import ctypes
import logging
import time
import operator
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch

from braze import logs, symbolic
from braze.errors import BrazeError, format_location
from braze.hostops import HostContext, prepare_op, prepare_record, run_op
from braze.hostops.control_flow import CONTROL_FLOW_OPS
from braze.hostops.dtypes import torch_dtype
from braze.hostops.extern import extern_overload, prepare_extern
from braze.hostops.products import convolution_arguments, convolution_layout, records_grad
from braze.hostops.record import DYNAMIC_SIZE, TensorType, op_record, type_record
from braze.hostops.signature import check_arguments
from braze.op_kinds import GENERATED_OPS
from braze.runtime import collectives, launch, trace
from braze.runtime.arena import ArenaPlan
from braze.runtime.memory import result_allocator
from braze.runtime.prepacked import prepacked_convolution, prepacked_linear
from braze.runtime.combo import ComboCall
from braze.runtime.control_flow import control_flow_call

if TYPE_CHECKING:
    from mlir import ir

    from braze.codegen.analysis import KernelSpec

# Results of these ops are fresh tensors; any other output may alias an
# input, a parameter or another output, and is copied before it is returned.
# (A KV cache's concat is a decode step's output: copying it read and wrote
# the whole cache a second time per step.)
_FRESH = {*GENERATED_OPS, "braze.combo", "braze.matmul", "braze.bmm", "braze.addmm", "braze.scaled_mm", "braze.convolution",
          "braze.attention", "braze.concat", "braze.take", "braze.iota",
          *CONTROL_FLOW_OPS}
# Results that are views of their first operand (or copies, which is safe).
_VIEWS = {"braze.reshape", "braze.permute", "braze.slice", "braze.expand"}
_RUNTIME_LOG = logs.logger("runtime")
# Evaluated once when the program is built.
_CONSTANT = {"braze.constant", "braze.parameter", "arith.constant"}


@dataclass
class _Step:
    run: Callable[[list], None]
    release: tuple[int, ...] = ()


def _last_offset(tensor: torch.Tensor) -> int:
    """How many elements past its first a view's last element lies (a
    kernel indexing in 32 bits reads only views within 2^31)."""
    if tensor.numel() == 0:
        return 0
    return sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))


class KernelCall:
    """One call of a compiled kernel: allocation, checks, then `launch`,
    which a target's step factory defines (see `StepFactory`)."""

    # Whether the kernel reads strided views in place (else inputs are made
    # contiguous first).
    views_in_place = True

    def __init__(self, spec: KernelSpec, op, slots: dict, device: torch.device = torch.device("cpu")):
        """`device`: where the kernel's tensors live (its results are
        allocated there)."""
        operands = list(op.operation.operands)
        self.device = device
        self.spec = spec
        self.name = spec.name
        self.location = format_location(op.operation.location)
        self.inputs = [slots[v] for v in operands[: len(spec.input_types)]]
        self.dynamic = [slots[v] for v in operands[len(spec.input_types):]]
        self.outputs = [slots[v] for v in op.operation.results]
        self.domain = spec.static_domain
        dynamic = DYNAMIC_SIZE
        # Types guarantee the static pairs; only a dynamic side can differ.
        self.checks = [(number, dim, domain_dim) for number, dim, domain_dim in spec.input_checks
                       if spec.input_types[number].shape[dim] == dynamic
                       or spec.static_domain[domain_dim] is None]
        self.result_shapes = spec.result_shapes
        self.result_dtypes = [torch_dtype(t.element_type) for t in spec.result_types]
        # A fused GEMM: extents from its matrices, which the BLAS reads.
        self.extent_inputs = spec.extent_inputs
        self.blas_inputs = spec.blas_inputs
        # Result number -> input number whose buffer it may take over: a
        # pointwise kernel that reads such an input exactly where it writes.
        self.reusable = {} if spec.reduce else {
            k: j for k, result in enumerate(spec.result_types) if k in spec.point_results
            for j, input_ in enumerate(spec.input_types) if input_ == result and j in spec.point_inputs}
        self.reuse: dict[int, int] = {}  # set by Program where the input is dead
        # Result number -> (arena slot, shape, strides, offset): set by
        # ArenaPlan where braze-plan-memory placed the result.
        self.carve: dict[int, tuple] = {}
        self.size_count = spec.size_count
        self.size_type = ctypes.c_int64 * max(spec.size_count, 1)
        self.static = not self.dynamic and all(
            dynamic not in t.shape for t in spec.input_types + spec.result_types)
        # Per input of a static type, the strides the kernel reads a
        # contiguous tensor with: its type's, whatever the tensor's shape (a
        # reshape of a kernel's result may hand over that result as it is,
        # `_pointer_reshapes`).
        self.declared_strides = [None if dynamic in t.shape else tuple(
            0 if size == 1 else stride for size, stride in zip(t.shape, _contiguous_strides(t.shape)))
            for t in spec.input_types]
        if self.static:
            # Every size is known now: one array serves every call.
            self.static_shapes = [list(shape) for shape in spec.result_shapes]
            self.static_sizes = self.size_type(
                *self.domain, *[s for t in spec.input_types for s in _contiguous_strides(t.shape)],
                *[d for t in spec.result_types for d in t.shape])

    def launch(self, inputs: list, outputs: list, extents: list, sizes) -> int:
        """Runs the kernel on `inputs` (tensors on the device, contiguous
        unless `views_in_place`), writing `outputs` (contiguous, allocated
        here); `extents` are the domain's sizes and `sizes` the kernel's
        `sizes` array (a ctypes int64 array: extents, input strides, result
        dims). Returns nonzero after an integer division by zero (the
        kernel's failure flag)."""
        raise NotImplementedError

    def prepare(self, env: list) -> tuple[list, list, list, Any]:
        """The launch's inputs, its freshly allocated outputs, the domain's
        extents and the `sizes` array (see `launch`), checked."""
        inputs = [env[s] for s in self.inputs]
        if self.static:
            shapes, extents = self.static_shapes, self.domain
        elif self.extent_inputs:
            extents = [size if size is not None else inputs[number].shape[dim]
                       for size, (number, dim) in zip(self.domain, self.extent_inputs)]
        else:
            dynamic = iter([env[s] for s in self.dynamic])
            extents = [size if size is not None else next(dynamic) for size in self.domain]
        if not self.static:
            for number, dim, domain_dim in self.checks:
                if inputs[number].shape[dim] != extents[domain_dim]:
                    raise BrazeError(
                        f"kernel {self.name} at {self.location}: input #{number} dim {dim} is "
                        f"{inputs[number].shape[dim]} but the kernel's domain has {extents[domain_dim]}")
            shapes = [[s if isinstance(s, int) else extents[s[1]] for s in shape]
                      for shape in self.result_shapes]
        contiguous = True
        for number, tensor in enumerate(inputs):
            if not tensor.is_contiguous():
                contiguous = False
                if not self.views_in_place or (
                        tensor.dim() and tensor.stride(-1) != 1 and tensor.shape[-1] != 1) or (
                        self.spec.index_bits == 32 and _last_offset(tensor) >= 2**31) or (
                        number in self.blas_inputs and tensor.shape[-2] > 1
                        and tensor.stride(-2) < tensor.shape[-1]):
                    inputs[number] = tensor.contiguous()  # kernels (and BLAS) read rows in place
        outputs = []
        for result, (shape, dtype) in enumerate(zip(shapes, self.result_dtypes)):
            carve = self.carve.get(result)
            if carve is not None:
                slot, carved_shape, strides, offset = carve
                outputs.append(env[slot].as_strided(carved_shape, strides, offset))
                continue
            number = self.reuse.get(result)
            if number is not None and inputs[number].is_contiguous() and list(inputs[number].shape) == list(shape):
                outputs.append(inputs[number])
            else:
                outputs.append(torch.empty(shape, dtype=dtype, device=self.device))
        if self.static and contiguous:
            sizes = self.static_sizes
        else:
            strides = [s for declared, t in zip(self.declared_strides, inputs)
                       for s in (declared if declared is not None and t.is_contiguous() else _strides(t))]
            sizes = self.size_type(*extents, *strides, *[d for t in outputs for d in t.shape])
        return inputs, outputs, extents, sizes

    def culprit(self) -> str:
        """What an integer division by zero names."""
        return f"kernel {self.name} at {self.location}"

    def __call__(self, env: list) -> None:
        inputs, outputs, extents, sizes = self.prepare(env)
        if self.launch(inputs, outputs, extents, sizes):
            raise BrazeError(f"{self.culprit()}: integer division by zero")
        for slot, tensor in zip(self.outputs, outputs):
            env[slot] = tensor


def _strides(tensor: torch.Tensor) -> tuple[int, ...]:
    """Element strides as the kernels read them: a dim of size 1 may carry
    any stride in torch; it is never stepped, so 0 does."""
    return tuple(0 if size == 1 else stride for size, stride in zip(tensor.shape, tensor.stride()))


def _contiguous_strides(shape) -> list[int]:
    strides, step = [], 1
    for size in reversed(list(shape)):
        strides.append(step)
        step *= size
    return strides[::-1]


class _HostCall:
    """An op run through its host-op handler (torch, on the tensors' device),
    prepared once: the op's attributes and types are read here, not per call."""

    def __init__(self, op, slots: dict, context: HostContext):
        self.name = op.operation.name
        self.record = op_record(op)
        self.run = prepare_record(self.record) or prepare_op(op)
        if self.run is None:
            raise BrazeError(f"braze's runtime cannot run '{self.name}' "
                             f"(at {format_location(op.operation.location)}): it is not a host op "
                             f"(braze.hostops) and braze-lower-kernels left it outside a kernel")
        self.operands = [slots[v] for v in op.operation.operands]
        self.results = [slots[v] for v in op.operation.results]
        self.context = context

    def __call__(self, env: list) -> None:
        values = self.run([env[s] for s in self.operands], self.context)
        for slot, value in zip(self.results, values):
            env[slot] = value


class _ViewCall:
    """A permute, or a reshape to a static shape: one torch call (a view
    where the layout allows), without the handler's per-call reading of the
    op. braze-channels-last and braze-collapse-dims put these around
    kernels."""

    def __init__(self, op, slots: dict):
        self.name = op.operation.name
        self.operand = slots[op.operation.operands[0]]
        self.result = slots[op.operation.results[0]]
        if self.name == "braze.permute":
            self.view = operator.methodcaller("permute", list(op.attributes["permutation"]))
        else:
            self.view = operator.methodcaller("reshape", list(op.operation.results[0].type.shape))

    def __call__(self, env: list) -> None:
        env[self.result] = self.view(env[self.operand])


def _pointer_reshapes(block) -> set:
    """The results of the static reshapes in `block` that need no step:
    each reshapes a contiguous tensor, and only kernels of this block whose
    every shape is static, and other reshapes, read it. Such a kernel reads
    a contiguous input by its pointer, with the strides of its own type
    (`KernelCall.declared_strides`), and a reshape of a contiguous tensor
    depends only on its elements' order, so both can take the operand's
    tensor as it is. (A decode step ran about 40 of these reshapes, at
    about 4 us each, for 3.1 ms of kernels.)"""
    # Contiguous on every call: kernels' results (allocated, or carved by
    # the arena, with contiguous strides), iotas, constants and parameters
    # (made contiguous when the program is built), and reshapes of those.
    # (Not torch's other results: a concat of channels-last views is
    # channels-last.)
    contiguous, reshapes = set(), []
    for op in block.operations:
        name = op.operation.name
        if name in GENERATED_OPS or name in ("braze.combo", "braze.iota", *_CONSTANT):
            contiguous.update(op.operation.results)
        elif name == "braze.reshape" and op.operation.operands[0] in contiguous:
            contiguous.add(op.operation.results[0])
            if op.operation.results[0].type.has_static_shape:
                reshapes.append(op.operation.results[0])
    return {result for result in reshapes
            if all(use.owner.name == "braze.reshape" or _static_kernel_of(use.owner, block) for use in result.uses)}


def _static_kernel_of(op, block) -> bool:
    """Whether `op` is a generated kernel of `block` (or of a combo there)
    whose every operand and result has a static shape (a static domain:
    no dynamic dim of an input is checked or read)."""
    from mlir import ir  # the program is being built: the compiler is here

    parent = op.operation.parent
    if op.operation.name not in GENERATED_OPS or not (
            op.operation.block == block or (parent is not None and parent.name == "braze.combo"
                                             and parent.block == block)):
        return False
    return all(isinstance(v.type, ir.RankedTensorType) and v.type.has_static_shape
               for v in [*op.operation.operands, *op.operation.results])


def _is_fast_view(op) -> bool:
    name = op.operation.name
    return name == "braze.permute" or (
        name == "braze.reshape" and op.operation.results[0].type.has_static_shape)


class _ConvolutionCall(_HostCall):
    """A convolution through torch (oneDNN, cuDNN), in the memory format the
    op asks for: the input converted to it per call (unless it is in it
    already), a constant weight once, here; the result stays in it. A 2-D
    floating-point convolution on the CPU with a constant weight and static
    sizes runs on the weight reordered once, here, into oneDNN's blocked
    layout (`runtime/prepacked.py`): aten.convolution reorders it on every
    call."""

    def __init__(self, op, slots: dict, context: HostContext, template: dict):
        super().__init__(op, slots, context)
        self.arguments = convolution_arguments(self.record)
        self.layout = convolution_layout(self.record) if "memory_format" in op.attributes else None
        self.weight = None
        weight = template.get(self.operands[1])
        if self.layout is not None and weight is not None:
            self.weight = weight.contiguous(memory_format=self.layout)
        self.prepacked = prepacked_convolution(self.record, self.weight, self.arguments, self.layout)
        if self.prepacked is not None:
            self.weight = None  # the prepacked copy serves every call

    def __call__(self, env: list) -> None:
        x, weight, *bias = [env[s] for s in self.operands]
        if self.layout is not None:
            x = x.contiguous(memory_format=self.layout)
            if self.prepacked is not None:
                env[self.results[0]] = self.prepacked(x, bias[0] if bias else None)
                return
            weight = self.weight if self.weight is not None else weight.contiguous(memory_format=self.layout)
        result = torch.ops.aten.convolution.default(x, weight, bias[0] if bias else None, *self.arguments)
        env[self.results[0]] = result


class _ProductCall(_HostCall):
    """braze.matmul or braze.addmm through its host op, or, where
    `prepacked_linear` applies (`runtime/prepacked.py`), through oneDNN's linear on the constant
    rhs reordered once, here: torch.mm and addmm reorder a half weight for
    oneDNN on every call (bf16 on an AMX Xeon, 2 threads: LLaMA's [256, 768]
    x [768, 3072] 0.79 -> 0.58 ms, Swin's [6272, 96] x [96, 384] with its
    bias 0.51 -> 0.39). Where autograd records the call, the host op runs."""

    def __init__(self, op, slots: dict, context: HostContext, template: dict):
        super().__init__(op, slots, context)
        self.prepacked = prepacked_linear(self.record, template.get(self.operands[-1]))

    def __call__(self, env: list) -> None:
        operands = [env[s] for s in self.operands]
        if self.prepacked is None or records_grad(operands):
            super().__call__(env)
            return
        bias = operands[0] if len(operands) == 3 else None
        env[self.results[0]] = self.prepacked(operands[-2], bias)


class _ExternCall:
    """An aten op braze does not lower, called through torch; its
    arguments are decoded once, when the program is built."""

    def __init__(self, op, slots: dict):
        self.name = op.operation.name
        self.record = op_record(op)
        self.target = self.record.attributes["target"]
        self.call = prepare_extern(self.record)
        self.deterministic = torch.Tag.nondeterministic_seeded not in extern_overload(self.record).tags
        self.operands = [slots[v] for v in op.operation.operands]
        self.results = [slots[v] for v in op.operation.results]

    def __call__(self, env: list) -> None:
        for slot, value in zip(self.results, self.call([env[s] for s in self.operands])):
            env[slot] = value


class StepFactory:
    """A target's runtime for its compiled kernels, as `Program` uses it
    (`Target.build` returns one in `Built.kernels`):

    * `device`: the torch device its kernels read and write (every tensor of
      the program lives there);
    * `kernel_call(spec, op, slots)`: the step running one `braze.kernel` op
      (`spec` its launch ABI from codegen/analysis.py, `slots` SSA value ->
      slot number): a `KernelCall` subclass defining `launch`;
    * `combo_call(name, calls, op)`: the step running the `braze.combo` `op`
      as one launch (`name`: its launch function, `Unit.launches`), given one
      `KernelCall` per sub-kernel, which prepares its launch (checks,
      outputs, sizes) and is never run alone.
    """

    device = torch.device("cpu")
    # Whether a kernel all of whose shapes are static reads a contiguous
    # input by its data pointer alone, whatever the tensor's own shape:
    # then a static reshape of a kernel's result that only such kernels
    # read needs no step (`_pointer_reshapes`).
    static_kernels_read_by_pointer = False

    def kernel_call(self, spec: KernelSpec, op, slots: dict) -> KernelCall:
        raise NotImplementedError

    def combo_call(self, name: str, calls: list[KernelCall], op):
        raise BrazeError(f"{type(self).__name__} cannot run combo kernels (asked for {name})")


class Program:
    """A compiled function, callable on torch tensors or numpy arrays."""

    # What a trace calls a run of it: a call, or a control-flow op's region.
    kind = "call"

    def __init__(self, module_op: ir.Operation, func_op, kernels_runtime: StepFactory | None,
                 kernels: list[KernelSpec], launches: dict[str, list[str]], parameters: dict[str, Any] | None,
                 device: str | torch.device = "cpu"):
        """`kernels`: the specs of the function's braze.kernel ops, in order
        (a combo's sub-kernels where the combo is); `launches`: per
        braze.combo in order, its launch function -> its sub-kernels;
        `kernels_runtime`: the target's step factory for them (None when
        there are none); `device`: where the program's tensors live (its
        arguments must be there; constants and parameters go there)."""
        self.name = func_op.attributes["sym_name"].value
        self.argument_types = [type_record(t) for t in func_op.type.inputs]
        self.device = torch.device(device)
        self._build(func_op.regions[0].blocks[0], kernels_runtime, iter(kernels), iter(launches),
                    HostContext(parameters, self.device, result_allocator(self.device)), func_op)
        self._arguments = _ArgumentCheck(func_op, module_op, self.device)

    @classmethod
    def region(cls, block: ir.Block, kernels_runtime: StepFactory | None, kernel_specs, launches,
               context: HostContext) -> "Program":
        """The steps of one region of a braze.switch or braze.while (its
        kernels' specs come next from `kernel_specs`), run with `run`."""
        program = cls.__new__(cls)
        program.name, program.kind = "region", "region"  # its control-flow op names it
        program.device = context.device
        program._build(block, kernels_runtime, kernel_specs, launches, context)
        return program

    def _build(self, block: ir.Block, kernels_runtime, kernel_specs, launches, context: HostContext,
               func_op=None) -> None:
        """Slots, constants and steps of the ops of `block`, which ends with
        func.return or braze.yield."""
        self.kernels_runtime = kernels_runtime
        slots: dict[ir.Value, int] = {}

        def slot(value: ir.Value) -> int:
            if value not in slots:
                slots[value] = len(slots)
            return slots[value]

        self.argument_slots = [slot(a) for a in block.arguments]
        template: dict[int, Any] = {}
        steps: list[tuple[Any, list[int], list[int]]] = []
        self.output_slots: list[int] = []
        # For braze.aot: the parameters' slots (slot -> name), and the steps
        # run once here because their inputs were known (to run again on
        # other weights).
        self.parameter_slots: dict[int, str] = {}
        self.folded: list[tuple[Any, list[int]]] = []
        fresh: set[int] = set()
        readers = Counter(v for op in block.operations for v in _operands(op))
        skipped = _pointer_reshapes(block) if kernels_runtime is not None and \
            kernels_runtime.static_kernels_read_by_pointer else set()
        plan, starts = collectives.CollectivePlan(), {}
        kernel_steps = []
        for op in block.operations:
            name = op.operation.name
            operand_slots = [slot(v) for v in _operands(op)]
            if name == "braze.reshape" and op.operation.results[0] in skipped:
                slots[op.operation.results[0]] = operand_slots[0]  # its readers take the operand's tensor
                continue
            result_slots = [slot(v) for v in op.operation.results]
            if name in ("func.return", "braze.yield"):
                self.output_slots = operand_slots
                break
            if name in _CONSTANT:
                values = run_op(op, [], context)
                if name == "braze.parameter":
                    self.parameter_slots[result_slots[0]] = op.attributes["name"].value
                for result, value in zip(result_slots, values):
                    if isinstance(value, torch.Tensor) and not value.is_contiguous():
                        value = value.contiguous()
                    template[result] = value
                continue
            if name in GENERATED_OPS:
                call = kernels_runtime.kernel_call(next(kernel_specs), op, slots)
                kernel_steps.append((op, call))
            elif name in collectives.OPS:
                # Issued without blocking; a wait also holds its start's input.
                call, operand_slots = collectives.collective_step(op, slots, plan, starts)
            elif name == "braze.combo":
                # Each sub-kernel writes the combo's results directly.
                sub_kernels = _combo_kernels(op)
                for value, result in zip([r for k in sub_kernels for r in k.operation.results],
                                         op.operation.results):
                    slots[value] = slots[result]
                call = kernels_runtime.combo_call(
                    next(launches), [KernelCall(next(kernel_specs), k, slots, kernels_runtime.device)
                                           for k in sub_kernels], op)
                kernel_steps.append((op, call))
            elif name == "braze.extern":
                call = _ExternCall(op, slots)
            elif name == "braze.convolution":
                call = _ConvolutionCall(op, slots, context, template)
            elif name in ("braze.matmul", "braze.addmm"):
                call = _ProductCall(op, slots, context, template)
            elif name in CONTROL_FLOW_OPS:
                call = control_flow_call(op, slots, lambda region: Program.region(
                    region, kernels_runtime, kernel_specs, launches, context))
            elif _is_fast_view(op):
                call = _ViewCall(op, slots)
            else:
                call = _HostCall(op, slots, context)
            if getattr(call, "deterministic", True) and all(slot_number in template for slot_number in operand_slots):
                # Every input is known now (an iota, a mask built from
                # constants): run it once, here, instead of on every call.
                env = [template.get(i) for i in range(len(slots))]
                call(env)
                for result in result_slots:
                    template[result] = env[result]
                self.folded.append((call, result_slots))
                continue
            if name in _FRESH or (name in _VIEWS and operand_slots[0] in fresh
                                  and readers[op.operation.operands[0]] == 1):
                # A view that is a fresh tensor's only reader (the reshape
                # or permute back after a kernel) is as fresh as the tensor.
                fresh.update(result_slots)
            steps.append((call, operand_slots, result_slots))
        # Kernels that run per call (those on known values ran above, those
        # of control-flow regions are counted by their step), and launches
        # per call (a combo is one: one parallel region on the CPU).
        launched = [step[0] for step in steps if isinstance(step[0], (KernelCall, ComboCall))]
        self.kernel_count = sum(len(c.calls) if isinstance(c, ComboCall) else 1 for c in launched) + sum(
            getattr(step[0], "kernel_count", 0) for step in steps)
        self.launch_count = len(launched)
        # The arena (braze-plan-memory) serves the function's own kernels; a
        # control-flow region's kernels take their results from the allocator.
        self.arena = ArenaPlan(func_op, self.device, len(slots)) if func_op is not None else None
        carved = set()
        if self.arena is not None:
            running = {id(step[0]) for step in steps}  # not the kernels run at build time
            for op, call in kernel_steps:
                if id(call) not in running:
                    continue
                if isinstance(call, ComboCall):
                    self.arena.place_combo(op, call.calls)
                else:
                    self.arena.place(op, call)
            carved = self.arena.carved
        self._plan_reuse(steps, {slots[v]: v for v in slots if v not in skipped}, fresh - carved)
        # Per op name, the steps that call a library (GEMMs, convolutions).
        self.library_calls = Counter(s[0].name for s in steps if isinstance(s[0], _HostCall) and s[0].name in _FRESH)
        self.extern_calls = Counter(s[0].target for s in steps if isinstance(s[0], _ExternCall))
        self.slot_count = len(slots) + (self.arena.slot_count if self.arena is not None else 0)
        self.template = [template.get(i) for i in range(self.slot_count)]
        self.copied_outputs = [i for i, s in enumerate(self.output_slots)
                               if s not in fresh or self.output_slots.index(s) != i]
        self.steps = self._with_releases(steps)

    def _plan_reuse(self, steps, values: dict[int, ir.Value], fresh: set[int]) -> None:
        """Lets a pointwise kernel write a result into an input buffer that
        nothing reads afterwards: a fresh tensor (a kernel's or a GEMM's
        result), reached through views only by slots whose last reader is
        this kernel, and not returned."""
        from mlir import ir  # the program is being built: the compiler is here

        root = {}
        for _, operands, results in steps:
            for result in results:
                producer = values[result].owner
                name = producer.name if not isinstance(producer, ir.Block) else ""
                root[result] = root.get(operands[0], operands[0]) if name in _VIEWS else result
        last_use = _last_uses(steps)
        aliases: dict[int, list[int]] = {}
        for slot_number, base in root.items():
            aliases.setdefault(base, []).append(slot_number)
        outputs = set(self.output_slots)
        for number, (call, _, _) in enumerate(steps):
            if not isinstance(call, KernelCall):
                continue
            # An input braze-plan-memory gave a result already is taken too:
            # two results in one buffer overwrote each other.
            taken = set(call.reuse.values())
            for result, input_number in call.reusable.items():
                if result in call.reuse:  # braze-plan-memory chose already
                    continue
                slot_number = call.inputs[input_number]
                base = root.get(slot_number)
                if base is None or base not in fresh or input_number in taken:
                    continue
                group = aliases[base]
                if any(s in outputs or last_use.get(s, -1) > number for s in group):
                    continue
                if call.inputs.count(slot_number) == 1:
                    call.reuse[result] = input_number
                    taken.add(input_number)

    def _with_releases(self, steps) -> list[_Step]:
        """Each step, with the slots whose last reader it is."""
        keep = set(self.output_slots) | set(self.argument_slots) | {
            i for i, v in enumerate(self.template) if v is not None}
        last_use = _last_uses(steps)
        releases: dict[int, list[int]] = {}
        for slot_number, step_number in last_use.items():
            if slot_number not in keep:
                releases.setdefault(step_number, []).append(slot_number)
        return [_Step(call, tuple(releases.get(n, ()))) for n, (call, _, _) in enumerate(steps)]

    def __call__(self, *arguments):
        if not self._arguments.symbolic and self._arguments.fast(arguments):
            return self.run(arguments)
        arguments, as_numpy = self.checked(arguments)
        return self.returned(self.run(arguments), as_numpy)

    def checked(self, arguments) -> tuple[list, bool]:
        """`arguments` checked (numpy arrays become tensors on the device),
        symbols bound; and whether some argument was a numpy array."""
        as_numpy = not self._arguments.fast(arguments)
        if as_numpy:
            as_numpy = any(isinstance(a, np.ndarray) for a in arguments)
            arguments = self._arguments.full(self.name, self.argument_types, arguments)
        if self._arguments.symbolic:
            self._arguments.bind(arguments)
        return arguments, as_numpy

    @staticmethod
    def returned(outputs: list, as_numpy: bool) -> list:
        """A call's outputs, as numpy arrays when it was given some."""
        if as_numpy:
            outputs = [o.cpu().numpy() if isinstance(o, torch.Tensor) else o for o in outputs]
        return outputs

    def run(self, arguments) -> list:
        """The steps on checked arguments; outputs that may alias an input
        or another output are copies."""
        env = list(self.template)
        for slot_number, value in zip(self.argument_slots, arguments):
            env[slot_number] = value
        if self.arena is not None and self.arena.dtype_slots:
            self.arena.fill(env)
        if trace.tracer is not None:  # braze.profile (runtime/trace.py)
            trace.tracer.run(self, env)
        elif _RUNTIME_LOG.isEnabledFor(logging.DEBUG):
            self._run_logged(env)
        else:
            for step in self.steps:
                step.run(env)
                for slot_number in step.release:
                    env[slot_number] = None
        outputs = [env[s] for s in self.output_slots]
        for number in self.copied_outputs:
            if isinstance(outputs[number], torch.Tensor):
                outputs[number] = outputs[number].clone()
        return outputs

    def _run_logged(self, env: list) -> None:
        """The steps of one call, each logged with its time (the `runtime`
        log topic at DEBUG; the loop above is the same without the log)."""
        _RUNTIME_LOG.debug("%s: call with %d step(s)", self.name, len(self.steps))
        for number, step in enumerate(self.steps):
            started = time.perf_counter()
            step.run(env)
            _RUNTIME_LOG.debug("%s: step %d %s: %.3f ms", self.name, number, step.run.name,
                               (time.perf_counter() - started) * 1e3)
            for slot_number in step.release:
                env[slot_number] = None


def _combo_kernels(op) -> list:
    from braze.codegen.analysis import combo_kernels  # MLIR: only while a program is built (braze.aot)

    return combo_kernels(op)


def _operands(op) -> list:
    """What `op` reads: its operands, and for a combo its sub-kernels'."""
    if op.operation.name == "braze.combo":
        return [v for kernel in _combo_kernels(op) for v in kernel.operation.operands]
    return list(op.operation.operands)


def _last_uses(steps) -> dict[int, int]:
    """Slot -> the number of the last step that reads it."""
    last_use: dict[int, int] = {}
    for number, (_, operands, _) in enumerate(steps):
        for operand in operands:
            last_use[operand] = number
    return last_use


class _ArgumentCheck:
    """The entry checks, prepared once: a fast test that accepts well-typed
    torch arguments on the program's device, the full checks (precise
    messages, numpy) otherwise, and symbol binding when some dim is
    dynamic."""

    def __init__(self, func_op, module_op, device: torch.device):
        self.device = device
        # `is_cpu` is the cheapest device test: a call checks every argument.
        self.on_host = device.type == "cpu"
        self.expected = []
        for type_ in map(type_record, func_op.type.inputs):
            if isinstance(type_, TensorType):
                shape = list(type_.shape)
                static = [(dim, size) for dim, size in enumerate(shape) if size is not None]
                whole = tuple(shape) if len(static) == len(shape) else None
                self.expected.append((torch_dtype(type_.element_type), len(shape), whole, static))
            else:
                self.expected.append(None)
        self.specs = symbolic.function_dim_specs(func_op.operation)
        self.ranges = symbolic.function_symbol_ranges(func_op.operation, module_op)
        self.symbolic = any(e is not None and e[2] is None for e in self.expected)

    native = None  # the launcher's check (not written by braze.aot: made again)

    def fast(self, arguments) -> bool:
        if self.native is None:
            self.native = launch.native.NativeArgumentCheck([
                None if e is None else (e[0], [size if size is not None else -1 for size in self._sizes(e)])
                for e in self.expected]) if self.on_host and launch.native is not None else False
        if self.native:
            return self.native(arguments)
        if len(arguments) != len(self.expected):
            return False
        for value, expected in zip(arguments, self.expected):
            if expected is None:
                if type(value) is not int:
                    return False
                continue
            dtype, rank, whole, static = expected
            if not isinstance(value, torch.Tensor) or value.dtype != dtype or (
                    not value.is_cpu if self.on_host else value.device != self.device):
                return False
            if whole is not None:
                if value.shape != whole:
                    return False
            elif value.dim() != rank or any(value.shape[d] != size for d, size in static):
                return False
        return True

    @staticmethod
    def _sizes(expected) -> list:
        """An argument's sizes, None where dynamic."""
        _, rank, whole, static = expected
        if whole is not None:
            return list(whole)
        sizes = [None] * rank
        for dim, size in static:
            sizes[dim] = size
        return sizes

    def full(self, name: str, types: list, arguments) -> list:
        """The arguments, numpy arrays copied to the device as tensors,
        after `check_arguments` and a check that every tensor is on the
        program's device."""
        arguments = [torch.from_numpy(a).to(self.device) if isinstance(a, np.ndarray) else a
                     for a in arguments]
        check_arguments(name, types, arguments)
        for number, value in enumerate(arguments):
            if isinstance(value, torch.Tensor) and value.device != self.device:
                raise BrazeError(f"argument #{number} is on device {value.device}, but @{name} was "
                                 f"compiled for a target whose tensors live on {self.device}")
        return arguments

    def bind(self, arguments) -> None:
        """Binds the `braze.dims` symbols (only when some dim is dynamic)."""
        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in arguments]
        symbolic.bind_symbols(self.specs, shapes, self.ranges)
