"""What every emitter needs to know about a `braze.kernel`, free of any
target's spelling.

`KernelAnalysis(kernel)` answers, once per kernel:

* the iteration domain (static extents, `None` for a dynamic one), the
  reduced dims and the parallel ones;
* the inputs, the results, and how each `tensor.extract` indexes its input
  (which domain dim each input dim follows);
* which values depend on a reduction index (`full`): they are computed per
  reduction point, the others once per parallel point;
* for a kernel that reduces over outer dims only (a "column" reduction: its
  innermost dim is parallel), that dim (`lane_dim`) and the values that vary
  along it (`lane_values`): a renderer may walk a block of that dim at every
  reduction point, reading consecutive elements, instead of one strided
  column per parallel point;
* the stages over the reduction points: one per `braze.reduce`, then one
  for the stores of reduction-dependent values, with the ops each stage
  needs and what later stages need again; a store per reduction point that
  needs no reduction's result (an activation stored beside its mean) is
  written by the first reduction's loop, which computes its value anyway;
* each store's guard (the parallel dims it does not index: only the point
  where those indices are 0 writes);
* whether the kernel can fail at run time (an integer division or
  remainder by zero), and the launch ABI (`KernelSpec`).

`KERNEL_BODY_OPS` is the set of ops a kernel body may hold: every renderer
has a rule for each (a test checks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mlir import ir

from braze.errors import BrazeError, format_location
from braze.op_kinds import GENERATED_OPS

# Scalar ops by family; a renderer spells each family from its tables.
UNARY_MATH = ("exp", "expm1", "exp2", "log", "log1p", "log2", "tanh", "erf", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "sqrt", "rsqrt", "absf", "floor", "ceil",
              "trunc", "roundeven")
BINARY_MATH = ("math.powf", "math.atan2", "arith.remf")
BINARY = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf",
          "arith.andi", "arith.ori", "arith.xori")
WRAPPING = ("arith.addi", "arith.subi", "arith.muli")
DIVIDING = ("arith.divsi", "arith.remsi")
CASTS = ("arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
         "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast")
OTHER = ("arith.constant", "arith.negf", "arith.maximumf", "arith.minimumf", "arith.maxsi",
         "arith.minsi", "math.absi", "arith.cmpf", "arith.cmpi", "arith.select", "tensor.extract")
KERNEL_BODY_OPS = frozenset(
    tuple(f"math.{name}" for name in UNARY_MATH) + BINARY_MATH + BINARY + WRAPPING + DIVIDING
    + CASTS + OTHER + ("braze.reduce", "braze.store"))
REDUCTION_KINDS = ("add", "max", "min", "and", "or", "argmax")
# Transcendental ops: worth keeping rather than computing twice.
EXPENSIVE = frozenset(
    {f"math.{name}" for name in UNARY_MATH[:16]} | set(BINARY_MATH))


@dataclass(frozen=True)
class SubKernelSchedule:
    """One sub-kernel's entry of a `braze.combo`'s `schedules`: `block`
    points (parallel points with reductions) per work item, `rblock`
    reduction points a GPU program holds at once (0 without reductions),
    `cost` the estimated cost of one work item."""

    block: int
    rblock: int
    cost: int


def combo_kernels(combo) -> list:
    """The `braze.kernel` of each sub-kernel of a `braze.combo`, in order."""
    return [region.blocks[0].operations[0] for region in combo.operation.regions]


def combo_schedules(combo) -> list[SubKernelSchedule]:
    schedules = []
    for entry in combo.attributes["schedules"]:
        entry = ir.DictAttr(entry)
        rblock = ir.IntegerAttr(entry["rblock"]).value if "rblock" in entry else 0
        schedules.append(SubKernelSchedule(ir.IntegerAttr(entry["block"]).value, rblock,
                                           ir.IntegerAttr(entry["cost"]).value))
    return schedules


def function_kernels(operations: list) -> tuple[list, list]:
    """The GENERATED_OPS of one function's `operations` in program order (a
    combo's sub-kernels where the combo is), and its `braze.combo`s."""
    kernels, combos = [], []
    for op in operations:
        name = op.operation.name
        if name in GENERATED_OPS:
            kernels.append(op)
        elif name == "braze.combo":
            combos.append(op)
            kernels.extend(combo_kernels(op))
    return kernels, combos


def _positive_constant(value: ir.Value) -> bool:
    """Whether `value` is an integer constant above 0 (a divisor that
    cannot fail: braze-fold-layouts' index maps divide by dim sizes)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return False
    return ir.IntegerAttr(owner.operation.attributes["value"]).value > 0


def may_divide_by_zero(op) -> bool:
    """Whether `op` is an integer division whose divisor may be 0 (every
    emitter then spells the check and the kernel reports `failed`)."""
    return op.operation.name in DIVIDING and not _positive_constant(op.operation.operands[1])


def type_name(type_: ir.Type) -> str:
    """`f32`, `bf16`, `i64`, `index`, ...: the key of every type table."""
    return "index" if isinstance(type_, ir.IndexType) else str(type_)


@dataclass
class KernelSpec:
    """What the executor needs to call one compiled kernel."""

    name: str
    static_domain: list[int | None]  # None: the next dynamic extent operand
    reduce: list[int]
    input_types: list[ir.RankedTensorType]
    result_types: list[ir.RankedTensorType]
    # Per result, per dim: a static size or ("extent", d).
    result_shapes: list[list] = field(default_factory=list)
    # (input number, dim, domain dim): the input's dim must equal that extent.
    input_checks: list[tuple[int, int, int]] = field(default_factory=list)
    # Whether the kernel reports an integer division by zero.
    can_fail: bool = False
    # The inputs every read of which is at the point's own indices, and the
    # results stored only there: a result may take such an input's buffer
    # (a padded max-pool of stride 1 has its input's shape, and reads its
    # neighbours: written over them, NaN spread along the rows).
    point_inputs: list[int] = field(default_factory=list)
    point_results: list[int] = field(default_factory=list)
    # GPU launch shape: threads per block (0: not a GPU kernel) and the
    # strategy: "points" (a thread per point), "block_tree" (a block per
    # parallel point), "row_per_thread" (a thread per parallel point) or
    # "warp_tree" (a warp of `warp` threads per parallel point); a
    # pointwise kernel's thread takes `elements` consecutive points.
    threads: int = 0
    strategy: str = ""
    warp: int = 0
    elements: int = 1
    # 32: the kernel indexes in 32 bits (the schedule proved every offset
    # fits); the runtime then makes an input view reaching further contiguous.
    index_bits: int = 64
    # A fused GEMM (codegen/gemm.py): per domain dim, the (input number,
    # dim) that holds its extent (a kernel takes dynamic extents as index
    # operands instead), and the inputs a BLAS reads (made contiguous unless
    # their rows have unit stride and a row stride the BLAS accepts).
    extent_inputs: list = field(default_factory=list)
    blas_inputs: list = field(default_factory=list)
    # A flash attention's schedule, (q_block, kv_block): the tile a GPU
    # program starts its tuning from; a C-like fused GEMM's (M, N, K) tile
    # (strategy "tiled_gemm": a block per tile, "tiled_gemm_rows": a block
    # per tile of whole rows); a C-like flash attention's runs a thread per
    # query row, q_block threads (strategy "attention_rows").
    tile: tuple = ()

    @property
    def one_block_per_row(self) -> bool:
        return self.strategy == "block_tree"

    @property
    def size_count(self) -> int:
        """Entries of the `sizes` array: extents, input strides, result dims."""
        return (len(self.static_domain) + sum(t.rank for t in self.input_types)
                + sum(t.rank for t in self.result_types))

    def blocks(self, extents: list[int]) -> int:
        """GPU blocks for a launch over `extents`: one per parallel point
        (row) for a reduction, one per tile (or tile of rows) and batch for
        a tiled GEMM, one per query block, batch and head for a C-like
        flash attention, else enough for one thread per point."""
        if self.strategy == "attention_rows":
            batch = self.input_types[0].rank - 2  # [B..., L, Ev, S, E(, Hk)]
            return math.prod(extents[:batch]) * -(-extents[batch] // self.tile[0])
        if self.strategy in ("tiled_gemm", "tiled_gemm_rows"):
            *batch, m, n, _ = extents  # [B..., M, N, K]
            tiles_n = -(-n // self.tile[1]) if self.strategy == "tiled_gemm" else 1
            return math.prod(batch) * -(-m // self.tile[0]) * tiles_n
        rows = math.prod(e for d, e in enumerate(extents) if d not in self.reduce)
        if self.strategy == "block_tree":
            return rows
        if self.strategy == "row_per_thread":
            return -(-rows // self.threads)
        if self.strategy == "warp_tree":
            return -(-rows // (self.threads // self.warp))
        return -(-math.prod(extents) // (self.threads * self.elements))

    @property
    def work(self) -> int | None:
        """Points of the domain when static."""
        return None if None in self.static_domain else math.prod(self.static_domain)


@dataclass
class Stage:
    """One pass over the reduction points: computes `roots` (the operand of
    `reduce` and the values of `stores`, which it writes at each point)."""

    roots: list[ir.Value]
    reduce: object | None  # the braze.reduce op, or None for the store stage
    stores: list = field(default_factory=list)
    # Reduction-dependent ops that later stages need again.
    needed_later: set = field(default_factory=set)

    @property
    def before(self):
        """The op its roots are all computed before (None: any op)."""
        return None if self.stores else self.reduce


class KernelAnalysis:
    def __init__(self, kernel: ir.OpView, name: str):
        self.kernel = kernel
        self.name = name
        self.block = kernel.regions[0].blocks[0]
        self.arguments = list(self.block.arguments)
        self.domain = [None if s == ir.ShapedType.get_dynamic_size() else s
                       for s in kernel.attributes["static_domain"]]
        self.reduce = list(kernel.attributes["reduce"])
        self.rank = len(self.domain)
        self.parallel = [d for d in range(self.rank) if d not in self.reduce]
        operands = list(kernel.operation.operands)
        self.inputs = operands[: len(operands) - sum(s is None for s in self.domain)]
        self.results = list(kernel.operation.results)
        self.ops = list(self.block.operations)
        self.producers = {r: op for op in self.ops for r in op.operation.results}
        self.full: set[ir.Value] = {self.arguments[d] for d in self.reduce}
        last = self.rank - 1
        self.lane_dim = last if self.reduce and last not in self.reduce and self.domain[last] != 1 else None
        # Reduced values count as varying along the lanes: they are per
        # parallel point, and the lanes are parallel points.
        self.lane_values: set[ir.Value] = set() if self.lane_dim is None else {self.arguments[last]}
        self.can_fail = False
        self.stages: list[Stage] = []
        stores = []
        for op in self.ops:
            name = op.operation.name
            if name not in KERNEL_BODY_OPS:
                raise self.fail(op, "is not a kernel-form body op")
            if may_divide_by_zero(op):
                self.can_fail = True
            if name == "braze.reduce":
                self.stages.append(Stage([op.operation.operands[0]], op))
                if self.lane_dim is not None:
                    self.lane_values.update(op.operation.results)
                continue
            if self.lane_dim is not None and any(v in self.lane_values for v in op.operation.operands):
                self.lane_values.update(op.operation.results)
            if any(v in self.full for v in op.operation.operands):
                self.full.update(op.operation.results)
            if name == "braze.store" and self.per_reduction_point(op):
                stores.append(op)
        if stores and not self.reduce:
            raise BrazeError("internal error: reduction-dependent store without reduction dims "
                             "(a braze bug)")
        if self.stages:
            first = self.stages[0]
            early = [s for s in stores if self._computed_before(s, first.reduce)]
            first.roots += [s.operation.operands[0] for s in early]
            first.stores = early
            stores = [s for s in stores if s not in early]
        if stores:
            self.stages.append(Stage([s.operation.operands[0] for s in stores], None, stores))
        needs = [set(self.needed_full_ops(s.roots, s.before)) for s in self.stages]
        for k, stage in enumerate(self.stages):
            stage.needed_later = set().union(*needs[k + 1:])

    def fail(self, op, message: str) -> BrazeError:
        return BrazeError(f"kernel {self.name}: '{op.operation.name}' at "
                          f"{format_location(op.operation.location)}: {message}")

    # -- structure ------------------------------------------------------
    def index_dim(self, value: ir.Value) -> int | None:
        """The domain dim whose index `value` is, if it is one."""
        for dim in range(self.rank):
            if self.arguments[dim] == value:
                return dim
        return None

    def extent_dim(self, value: ir.Value) -> int | None:
        for dim in range(self.rank):
            if self.arguments[self.rank + dim] == value:
                return dim
        return None

    def input_number(self, value: ir.Value) -> int:
        """The input a tensor.extract reads (its block argument's number)."""
        return self.arguments.index(value) - 2 * self.rank

    def per_reduction_point(self, store) -> bool:
        """Whether a braze.store runs per reduction point: its value depends
        on a reduction index, or it writes at one (a value broadcast along a
        reduced dim is written once per reduction point)."""
        return any(v in self.full for v in store.operation.operands)

    def _computed_before(self, store, reduce) -> bool:
        """Whether everything `store` writes (its value and indices) is
        computed by ops before `reduce`, so from no reduction's result."""
        position = {op: number for number, op in enumerate(self.ops)}
        stack, seen = list(store.operation.operands), set()
        while stack:
            op = self.producers.get(stack.pop())
            if op is None or op in seen:
                continue
            if position[op] > position[reduce]:
                return False
            seen.add(op)
            stack.extend(op.operation.operands)
        return True

    @property
    def final_stores(self) -> list:
        """The stores of the last stage over the reduction points, after
        every reduction (they need a reduction's result)."""
        return self.stages[-1].stores if self.stages and self.stages[-1].reduce is None else []

    def store_guards(self, store) -> list[int]:
        """The parallel dims a store does not index: points differing only
        there write the same element, and the one where they are 0 does."""
        used = set(store.operation.operands[1:])
        return [d for d in self.parallel if self.arguments[d] not in used]

    def needed_full_ops(self, roots: list[ir.Value], before, cached=(), aliases=None) -> list:
        """The ops (in block order) computing the reduction-dependent values
        that `roots` need, among the ops before `before` (None: all). A value
        in `cached` is read where it was kept: what computes it is not
        needed. A value in `aliases` (a range of the reduced dim where it
        equals another, codegen/segments.py) stands for that value."""
        aliases = aliases or {}
        needed: set = set()
        stack = [aliases.get(v, v) for v in roots]
        while stack:
            value = stack.pop()
            op = self.producers.get(value)
            if value not in self.full or op is None or op in needed:
                continue
            needed.add(op)
            if value not in cached:
                stack.extend(aliases.get(v, v) for v in op.operation.operands)
        ordered = []
        for op in self.ops:
            if before is not None and op == before:
                break
            if op in needed:
                ordered.append(op)
        return ordered

    def is_full(self, op) -> bool:
        results = op.operation.results
        return bool(results) and results[0] in self.full

    @property
    def transcendental(self) -> bool:
        """Whether the kernel evaluates a transcendental function (tens of
        arithmetic instructions per element: its loops are bound by
        arithmetic rather than by memory)."""
        return any(op.operation.name in EXPENSIVE for op in self.ops)

    def varies_along_lanes(self, op) -> bool:
        results = op.operation.results
        return bool(results) and results[0] in self.lane_values

    # -- the launch ABI -------------------------------------------------
    def sizes_offset(self, which: str, number: int) -> int:
        """Where the strides of input `number` (which="input") or the dims of
        result `number` (which="result") start in `sizes`."""
        offset = self.rank
        if which == "result":
            offset += sum(t.type.rank for t in self.inputs)
        tensors = self.inputs if which == "input" else self.results
        return offset + sum(t.type.rank for t in tensors[:number])

    def spec(self) -> KernelSpec:
        spec = KernelSpec(self.name, self.domain, self.reduce,
                          [v.type for v in self.inputs], [v.type for v in self.results],
                          can_fail=self.can_fail)
        shapes: dict[int, list] = {}
        checks = set()
        dynamic = ir.ShapedType.get_dynamic_size()
        point = list(self.arguments[:self.rank])
        elsewhere_inputs, elsewhere_results = set(), set()
        for op in self.ops:
            name = op.operation.name
            if name == "tensor.extract":
                number = self.input_number(op.operation.operands[0])
                if list(op.operation.operands[1:]) != point:
                    elsewhere_inputs.add(number)
                for dim, index in enumerate(op.operation.operands[1:]):
                    domain_dim = self.index_dim(index)
                    if domain_dim is not None:
                        checks.add((number, dim, domain_dim))
            elif name == "braze.store":
                number = op.attributes["result"].value
                if list(op.operation.operands[1:]) != point:
                    elsewhere_results.add(number)
                shape = []
                for dim, index in enumerate(op.operation.operands[1:]):
                    static = self.results[number].type.shape[dim]
                    if static != dynamic:
                        shape.append(static)
                    elif self.index_dim(index) is not None:
                        shape.append(("extent", self.index_dim(index)))
                    else:
                        raise self.fail(op, f"cannot tell the size of dynamic dim {dim} of result #{number}")
                shapes.setdefault(number, shape)
        spec.input_checks = sorted(checks)
        spec.result_shapes = [shapes[n] for n in range(len(self.results))]
        spec.point_inputs = [n for n in range(len(self.inputs)) if n not in elsewhere_inputs]
        spec.point_results = [n for n in range(len(self.results)) if n not in elsewhere_results]
        return spec
