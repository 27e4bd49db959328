"""Prints the `braze.kernel`s of a module as one C++ translation unit.

Every kernel becomes `extern "C" int <name>(void* const* buffers, const
int64_t* sizes)`: `buffers` holds the inputs then the results; `sizes` holds
the domain's extents, then the strides (in elements) of every input, then
every dim of every result. Inputs may be strided views whose innermost
stride is 1 (a permuted or sliced tensor is read in place); results are
contiguous. It returns 0, or 1 after an integer division (or remainder) by zero.

Loops: an OpenMP loop over the parallel points (blocks of the innermost dim
when nothing is reduced, so the compiler vectorizes the block). With
reductions, each `braze.reduce` is one loop over the reduction points inside
the parallel loop, recomputing the pointwise values it needs (they are cheap
next to memory traffic, and the row stays in cache); additions accumulate in
blocks of `SUM_BLOCK` elements, each summed in SIMD lanes, so rounding error
grows with the number of blocks, not of elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from mlir import ir

from braze.errors import BrazeError, format_location

PRELUDE = (Path(__file__).with_name("prelude.h")).read_text()
# Added to the compiler's defaults: nothing reads errno or FP exception flags,
# and without these sqrt (and, below AVX-512, most loops) do not vectorize.
COMPILE_FLAGS = ("-fno-math-errno", "-fno-trapping-math")

# Below this many points a kernel runs on one thread: waking the OpenMP team
# costs more than the work.
PARALLEL_THRESHOLD = 32768
# Elements per block of the innermost loop of a pointwise kernel.
POINTWISE_BLOCK = 4096
SUM_BLOCK = 1024

_STORAGE = {
    "f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t",
    "i64": "int64_t", "i32": "int32_t", "i16": "int16_t", "i8": "int8_t", "i1": "bool",
    "index": "int64_t",
}
# Half types compute in float; they are rounded where the IR converts to them.
_COMPUTE = dict(_STORAGE, f16="float", bf16="float")

_CMPF = {1: "==", 2: ">", 3: ">=", 4: "<", 5: "<=", 13: "!="}
_CMPI = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">=", 6: "<", 7: "<=", 8: ">", 9: ">="}
# Transcendental functions: the prelude's own vectorizable implementations.
_TRANSCENDENTAL = {
    f"math.{name}": f"bz_{name}"
    for name in ("exp", "expm1", "exp2", "log", "log1p", "log2", "tanh", "erf", "sin", "cos", "tan",
                 "asin", "acos", "atan", "sinh", "cosh")
}
_MATH = dict(
    _TRANSCENDENTAL,
    **{"math.sqrt": "bz_sqrt", "math.rsqrt": "bz_rsqrt", "math.absf": "std::abs",
       "math.floor": "std::floor", "math.ceil": "std::ceil", "math.trunc": "std::trunc",
       "math.roundeven": "bz_roundeven"},
)
_MATH_BINARY = {"math.powf": "bz_pow", "math.atan2": "bz_atan2", "arith.remf": "std::fmod"}
# Ops worth a row buffer rather than a second evaluation. (Division is not:
# measured on softmax+LayerNorm, the extra buffer cost more than it saved.)
_EXPENSIVE = set(_TRANSCENDENTAL) | set(_MATH_BINARY)
_BINARY = {
    "arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/",
    "arith.andi": "&", "arith.ori": "|", "arith.xori": "^",
}
# Integer arithmetic wraps, as in PyTorch: compute it unsigned.
_WRAPPING = {"arith.addi": "+", "arith.subi": "-", "arith.muli": "*"}
_CASTS = {
    "arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
    "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast",
}


def type_name(type_: ir.Type) -> str:
    return "index" if isinstance(type_, ir.IndexType) else str(type_)


def storage_type(type_: ir.Type) -> str:
    return _STORAGE[type_name(type_)]


def compute_type(type_: ir.Type) -> str:
    return _COMPUTE[type_name(type_)]


def _literal(attribute: ir.Attribute, type_: ir.Type) -> str:
    name = type_name(type_)
    if isinstance(attribute, ir.FloatAttr):
        value = attribute.value
        c_type = compute_type(type_)
        if math.isnan(value):
            return f"std::numeric_limits<{c_type}>::quiet_NaN()"
        if math.isinf(value):
            sign = "-" if value < 0 else ""
            return f"{sign}std::numeric_limits<{c_type}>::infinity()"
        text = repr(float(value))
        return text + ("f" if c_type == "float" else "")
    if isinstance(attribute, (ir.IntegerAttr, ir.BoolAttr)):
        value = attribute.value
        if name == "i1":
            return "true" if value else "false"
        if name in ("i64", "index") and value == -(2**63):
            return "INT64_MIN"
        return f"int64_t({value})" if name in ("i64", "index") else f"{_STORAGE[name]}({value})"
    raise TypeError(f"no C++ literal for {attribute}")


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


class _KernelPrinter:
    def __init__(self, kernel: ir.OpView, name: str):
        self.kernel = kernel
        self.name = name
        self.block = kernel.regions[0].blocks[0]
        self.domain = [None if s == ir.ShapedType.get_dynamic_size() else s
                       for s in kernel.attributes["static_domain"]]
        self.reduce = list(kernel.attributes["reduce"])
        self.rank = len(self.domain)
        operands = list(kernel.operation.operands)
        self.inputs = operands[: len(operands) - sum(s is None for s in self.domain)]
        self.results = list(kernel.operation.results)
        self.names: dict[ir.Value, str] = {}
        self.full: set[ir.Value] = set()  # values that depend on a reduction index
        self.lines: list[str] = []
        self.divides = False
        self.counter = 0
        self.cached: dict[ir.Value, str] = {}  # value -> its row buffer
        self.buffers: list[tuple[str, str]] = []  # (name, C++ type)

    # -- naming ---------------------------------------------------------
    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def name_of(self, value: ir.Value) -> str:
        return self.names[value]

    def fail(self, op, message: str) -> BrazeError:
        return BrazeError(
            f"C++ emitter: '{op.operation.name}' at "
            f"{format_location(op.operation.location)}: {message}")

    # -- layout ---------------------------------------------------------
    def _sizes_offset(self, which: str, number: int) -> int:
        offset = self.rank
        for t in self.inputs if which == "result" else []:
            offset += t.type.rank
        tensors = self.inputs if which == "input" else self.results
        for t in tensors[:number]:
            offset += t.type.rank
        return offset

    def _dim_expr(self, number: int, dim: int) -> str:
        """Dim `dim` of result `number`."""
        size = self.results[number].type.shape[dim]
        if size != ir.ShapedType.get_dynamic_size():
            return str(size)
        return f"sizes[{self._sizes_offset('result', number) + dim}]"

    def _offset(self, which: str, number: int, indices: list[str]) -> str:
        """The element offset of `indices` (C++ expressions): results are
        contiguous row-major; inputs may be views, read through their strides
        from `sizes` (the innermost is 1: the executor copies other inputs)."""
        if not indices:
            return "0"
        if which == "input":
            terms = [f"{index} * stride{number}_{dim}" for dim, index in enumerate(indices[:-1])]
            return " + ".join(terms + [indices[-1]])
        expression = indices[0]
        for dim in range(1, len(indices)):
            expression = f"({expression}) * {self._dim_expr(number, dim)} + {indices[dim]}"
        return expression

    # -- values ---------------------------------------------------------
    def classify(self) -> None:
        """Marks the values that depend on a reduction index, and plans the
        loops over the reduction points: one per braze.reduce, then one for
        the stores of reduction-dependent values."""
        for dim in self.reduce:
            self.full.add(self.block.arguments[dim])
        self.producers = {}
        loops = []
        stores = []
        for op in self.block.operations:
            for result in op.operation.results:
                self.producers[result] = op
            name = op.operation.name
            if name == "braze.reduce":
                loops.append(([op.operation.operands[0]], op))
                continue
            if any(operand in self.full for operand in op.operation.operands):
                for result in op.operation.results:
                    self.full.add(result)
            if name == "braze.store" and self.stores_per_reduction_point(op):
                stores.append(op.operation.operands[0])
        if stores:
            loops.append((stores, None))
        needs = [set(self.needed_full_ops(roots, before)) for roots, before in loops]
        self.needed_later = [set().union(*needs[k + 1:]) for k in range(len(needs))]
        linear = ""
        for dim in self.reduce:
            index = f"i{dim}"
            linear = f"({linear}) * n{dim} + {index}" if linear else index
        self.linear = linear

    def stores_per_reduction_point(self, op) -> bool:
        """Whether a braze.store runs in the loop over the reduction points:
        its value depends on a reduction index, or it writes at one (a value
        broadcast along a reduced dim is written once per reduction point)."""
        return any(operand in self.full for operand in op.operation.operands)

    def expression(self, op) -> str:
        """The C++ expression of a scalar op over already-named operands."""
        name = op.operation.name
        operands = [self.name_of(v) for v in op.operation.operands]
        result_type = op.operation.results[0].type
        if name == "arith.constant":
            return _literal(op.attributes["value"], result_type)
        if name in _BINARY:
            expression = f"{operands[0]} {_BINARY[name]} {operands[1]}"
            return f"({compute_type(result_type)})({expression})" if name in ("arith.andi", "arith.ori", "arith.xori") else expression
        if name in _WRAPPING:
            c_type = compute_type(result_type)
            if c_type == "bool":
                return f"(bool)(({operands[0]} {_WRAPPING[name]} {operands[1]}) & 1)"
            return (f"({c_type})((uint64_t){operands[0]} {_WRAPPING[name]} "
                    f"(uint64_t){operands[1]})")
        if name in ("arith.divsi", "arith.remsi"):
            # b == 0 fails the kernel (PyTorch raises); INT_MIN / -1 wraps
            # (and its remainder is 0) rather than trapping.
            self.divides = True
            a, b = operands
            c_type = compute_type(result_type)
            if name == "arith.divsi":
                by_minus_one, quotient = f"({c_type})(0 - (uint64_t){a})", f"({c_type})({a} / {b})"
            else:
                by_minus_one, quotient = f"{c_type}(0)", f"({c_type})({a} % {b})"
            return f"({b} == 0 ? (failed = 1, {c_type}(0)) : {b} == -1 ? {by_minus_one} : {quotient})"
        if name == "arith.negf":
            return f"-{operands[0]}"
        if name in ("arith.maximumf", "arith.minimumf"):
            function = "bz_nan_max" if name == "arith.maximumf" else "bz_nan_min"
            return f"{function}({operands[0]}, {operands[1]})"
        if name in ("arith.maxsi", "arith.minsi"):
            compare = ">" if name == "arith.maxsi" else "<"
            return f"({operands[0]} {compare} {operands[1]} ? {operands[0]} : {operands[1]})"
        if name == "math.absi":
            return f"({operands[0]} < 0 ? ({compute_type(result_type)})(0 - (uint64_t){operands[0]}) : {operands[0]})"
        if name in _MATH:
            return f"{_MATH[name]}({operands[0]})"
        if name in _MATH_BINARY:
            return f"{_MATH_BINARY[name]}({operands[0]}, {operands[1]})"
        if name == "arith.cmpf":
            predicate = op.attributes["predicate"].value
            if predicate not in _CMPF:
                raise self.fail(op, f"unsupported predicate {predicate}")
            return f"({operands[0]} {_CMPF[predicate]} {operands[1]})"
        if name == "arith.cmpi":
            return f"({operands[0]} {_CMPI[op.attributes['predicate'].value]} {operands[1]})"
        if name == "arith.select":
            return f"({operands[0]} ? {operands[1]} : {operands[2]})"
        if name in _CASTS:
            target = type_name(result_type)
            value = f"({compute_type(result_type)}){operands[0]}"
            if target == "bf16":
                return f"bz_round_bf16({value})"
            if target == "f16":
                return f"bz_round_f16({value})"
            return value
        if name == "tensor.extract":
            number = int(operands[0][2:])
            load = f"{operands[0]}[{self._offset('input', number, operands[1:])}]"
            element = type_name(result_type)
            if element == "bf16":
                return f"bz_bf16_to_f32({load})"
            if element == "f16":
                return f"bz_f16_to_f32({load})"
            return load
        raise self.fail(op, "has no C++ form")

    def define(self, op, out: list[str], indent: str) -> None:
        result = op.operation.results[0]
        name = self.fresh()
        self.names[result] = name
        out.append(f"{indent}const {compute_type(result.type)} {name} = {self.expression(op)};")

    def needed_full_ops(self, roots: list[ir.Value], before, cached=()) -> list:
        """The ops (in block order) computing the reduction-dependent values
        that `roots` need, among the ops before `before` (None: all). A value
        in `cached` is read from its row buffer: what computes it is not
        needed."""
        needed: set = set()
        stack = [v for v in roots if v in self.full]
        while stack:
            value = stack.pop()
            op = self.producers.get(value)
            if op is None or op in needed:
                continue
            needed.add(op)
            if value not in cached:
                stack.extend(v for v in op.operation.operands if v in self.full)
        ordered = []
        for op in self.block.operations:
            if before is not None and op == before:
                break
            if op in needed:
                ordered.append(op)
        return ordered

    def loop_body(self, roots: list[ir.Value], before) -> list[str]:
        """The lines computing `roots` at one reduction point. An expensive
        result that a later loop needs is kept in a row buffer instead of
        being computed again there."""
        later = self.needed_later.pop(0)
        lines: list[str] = []
        for op in self.needed_full_ops(roots, before, self.cached):
            result = op.operation.results[0]
            if result in self.cached:
                name = self.fresh()
                self.names[result] = name
                lines.append(f"const {compute_type(result.type)} {name} = {self.cached[result]}[{self.linear}];")
                continue
            self.define(op, lines, "")
            if op.operation.name in _EXPENSIVE and op in later:
                buffer = f"row_{self.names[result]}"
                self.cached[result] = buffer
                self.buffers.append((buffer, compute_type(result.type)))
                lines.append(f"{buffer}[{self.linear}] = {self.names[result]};")
        return lines

    # -- loops ----------------------------------------------------------
    def simd(self, clauses: str = "") -> str:
        failed = " reduction(|:failed)" if self.divides else ""
        return f"#pragma omp simd{failed}{clauses}"

    def _reduction_loops(self, body: list[str], indent: str, innermost_pragma: str,
                         out: list[str], block_sum: bool = False) -> None:
        """Nests `body` in loops over the reduction dims."""
        dims = self.reduce
        for depth, dim in enumerate(dims):
            index = self.names[self.block.arguments[dim]]
            extent = self.names[self.block.arguments[self.rank + dim]]
            pad = indent + "  " * depth
            if depth == len(dims) - 1:
                if innermost_pragma:
                    out.append(f"{pad}{innermost_pragma}")
                out.append(f"{pad}for (int64_t {index} = 0; {index} < {extent}; ++{index}) {{")
            else:
                out.append(f"{pad}for (int64_t {index} = 0; {index} < {extent}; ++{index}) {{")
        inner = indent + "  " * len(dims)
        out.extend(inner + line for line in body)
        for depth in reversed(range(len(dims))):
            out.append(indent + "  " * depth + "}")

    def reduce_stage(self, op, out: list[str], indent: str) -> None:
        """One loop over the reduction points computing a braze.reduce."""
        kind = op.attributes["kind"].value
        operand = op.operation.operands[0]
        result = op.operation.results[0]
        value_type = compute_type(operand.type)
        name = self.fresh()
        self.names[result] = name
        saved = dict(self.names)
        body = self.loop_body([operand], op)
        value = self.names[operand]
        self.names = {**saved, result: name}
        last = self.reduce[-1]
        if kind == "add":
            acc_type = "double" if value_type == "float" else value_type
            part = f"{name}_part"
            lines = [f"{part} += {value};"]
            inner_index = saved[self.block.arguments[last]]
            extent = saved[self.block.arguments[self.rank + last]]
            out.append(f"{indent}{acc_type} {name}_acc = 0;")
            # Blocks of the innermost reduction dim, each summed in SIMD lanes.
            outer_dims = self.reduce[:-1]
            for depth, dim in enumerate(outer_dims):
                index = saved[self.block.arguments[dim]]
                dim_extent = saved[self.block.arguments[self.rank + dim]]
                out.append(f"{indent}{'  ' * depth}for (int64_t {index} = 0; {index} < {dim_extent}; ++{index}) {{")
            pad = indent + "  " * len(outer_dims)
            out.append(f"{pad}for (int64_t {name}_b = 0; {name}_b < {extent}; {name}_b += {SUM_BLOCK}) {{")
            out.append(f"{pad}  const int64_t {name}_e = std::min<int64_t>({extent}, {name}_b + {SUM_BLOCK});")
            out.append(f"{pad}  {value_type} {part} = 0;")
            out.append(f"{pad}  {self.simd(f' reduction(+:{part})')}")
            out.append(f"{pad}  for (int64_t {inner_index} = {name}_b; {inner_index} < {name}_e; ++{inner_index}) {{")
            out.extend(f"{pad}    {line}" for line in body + lines)
            out.append(f"{pad}  }}")
            out.append(f"{pad}  {name}_acc += {part};")
            out.append(f"{pad}}}")
            for depth in reversed(range(len(outer_dims))):
                out.append(f"{indent}{'  ' * depth}}}")
            out.append(f"{indent}const {value_type} {name} = ({value_type}){name}_acc;")
            return
        if kind in ("max", "min") and value_type in ("float", "double"):
            # NaN is tracked in an int flag: a bool reduction keeps gcc from
            # vectorizing the loop (3x slower rows).
            compare = ">" if kind == "max" else "<"
            start = "-" if kind == "max" else ""
            out.append(f"{indent}{value_type} {name}_acc = {start}std::numeric_limits<{value_type}>::infinity();")
            out.append(f"{indent}int {name}_nan = 0;")
            lines = [f"{name}_acc = {value} {compare} {name}_acc ? {value} : {name}_acc;",
                     f"{name}_nan |= {value} != {value};"]
            self._reduction_loops(body + lines, indent,
                                  self.simd(f" reduction({kind}:{name}_acc) reduction(|:{name}_nan)"), out)
            out.append(f"{indent}const {value_type} {name} = {name}_nan ? "
                       f"std::numeric_limits<{value_type}>::quiet_NaN() : {name}_acc;")
            return
        if kind in ("max", "min", "and", "or") and value_type == "bool":
            # On i1, max is `or` and min is `and`; an int accumulator vectorizes.
            is_or = kind in ("max", "or")
            out.append(f"{indent}int {name}_acc = {0 if is_or else 1};")
            symbol = "|" if is_or else "&"
            lines = [f"{name}_acc {symbol}= (int){value};"]
            self._reduction_loops(body + lines, indent, self.simd(f" reduction({symbol}:{name}_acc)"), out)
            out.append(f"{indent}const bool {name} = {name}_acc != 0;")
            return
        if kind in ("max", "min"):
            limit = "lowest" if kind == "max" else "max"
            compare = ">" if kind == "max" else "<"
            out.append(f"{indent}{value_type} {name}_acc = std::numeric_limits<{value_type}>::{limit}();")
            lines = [f"{name}_acc = {value} {compare} {name}_acc ? {value} : {name}_acc;"]
            self._reduction_loops(body + lines, indent, self.simd(f" reduction({kind}:{name}_acc)"), out)
            out.append(f"{indent}const {value_type} {name} = {name}_acc;")
            return
        if kind == "argmax":
            # The first maximum in row-major order; NaN counts as the maximum.
            linear = "0"
            for dim in self.reduce:
                index = saved[self.block.arguments[dim]]
                extent = saved[self.block.arguments[self.rank + dim]]
                linear = f"({linear}) * {extent} + {index}"
            out.append(f"{indent}{value_type} {name}_best = 0;")
            out.append(f"{indent}int64_t {name}_at = -1;")
            is_float = value_type in ("float", "double")
            better = f"({value} > {name}_best || ({value} != {value} && {name}_best == {name}_best))" if is_float else f"{value} > {name}_best"
            lines = [f"if ({name}_at < 0 || {better}) {{ {name}_best = {value}; {name}_at = {linear}; }}"]
            self._reduction_loops(body + lines, indent, "", out)
            out.append(f"{indent}const int64_t {name} = {name}_at < 0 ? 0 : {name}_at;")
            return
        raise self.fail(op, f"unknown reduction kind '{kind}'")

    def store(self, op, out: list[str], indent: str) -> None:
        value = op.operation.operands[0]
        number = op.attributes["result"].value
        indices = [self.names[v] for v in op.operation.operands[1:]]
        element = type_name(value.type)
        expression = self.names[value]
        if element == "bf16":
            expression = f"bz_f32_to_bf16({expression})"
        elif element == "f16":
            expression = f"bz_f32_to_f16({expression})"
        target = f"out{number}[{self._offset('result', number, indices)}] = {expression};"
        # Points that differ only in a parallel dim the store's indices do
        # not use write the same element: the one where that index is 0 does.
        used = set(op.operation.operands[1:])
        guards = [f"i{dim} == 0" for dim in range(self.rank)
                  if dim not in self.reduce and self.block.arguments[dim] not in used]
        if guards:
            target = f"if ({' && '.join(guards)}) {target}"
        out.append(indent + target)

    # -- the kernel -----------------------------------------------------
    def spec(self) -> KernelSpec:
        spec = KernelSpec(self.name, self.domain, self.reduce,
                          [v.type for v in self.inputs], [v.type for v in self.results])
        arguments = list(self.block.arguments)
        shapes: dict[int, list] = {}
        for op in self.block.operations:
            name = op.operation.name
            if name == "tensor.extract":
                number = arguments.index(op.operation.operands[0]) - 2 * self.rank
                for dim, index in enumerate(op.operation.operands[1:]):
                    if index in arguments[: self.rank]:
                        spec.input_checks.append((number, dim, arguments.index(index)))
            elif name == "braze.store":
                number = op.attributes["result"].value
                shape = []
                result_type = self.results[number].type
                for dim, index in enumerate(op.operation.operands[1:]):
                    static = result_type.shape[dim]
                    if static != ir.ShapedType.get_dynamic_size():
                        shape.append(static)
                    elif index in arguments[: self.rank]:
                        shape.append(("extent", arguments.index(index)))
                    else:
                        raise self.fail(op, f"cannot tell the size of dynamic dim {dim} of result #{number}")
                shapes.setdefault(number, shape)
        spec.input_checks = sorted(set(spec.input_checks))
        spec.result_shapes = [shapes[n] for n in range(len(self.results))]
        return spec

    def emit(self) -> str:
        self.classify()
        arguments = list(self.block.arguments)
        head = [f'extern "C" int {self.name}(void* const* buffers, const int64_t* sizes) {{']
        # A pointwise kernel may write a result over an input of its shape
        # (the executor reuses dead buffers): no restrict there, the simd
        # pragma vectorizes anyway, each point reading before it writes.
        restrict = " __restrict" if self.reduce else ""
        for number, value in enumerate(self.inputs):
            c_type = storage_type(value.type.element_type)
            head.append(f"  const {c_type}*{restrict} in{number} = (const {c_type}*)buffers[{number}];")
        for number, value in enumerate(self.results):
            c_type = storage_type(value.type.element_type)
            head.append(f"  {c_type}*{restrict} out{number} = ({c_type}*)buffers[{len(self.inputs) + number}];")
        for dim, size in enumerate(self.domain):
            extent = f"n{dim}"
            self.names[arguments[self.rank + dim]] = extent
            self.names[arguments[dim]] = f"i{dim}"
            head.append(f"  const int64_t {extent} = {size if size is not None else f'sizes[{dim}]'};")
        for number, value in enumerate(self.inputs):
            self.names[arguments[2 * self.rank + number]] = f"in{number}"
            # Locals, not loads through `sizes`: a store may not alias them.
            base = self._sizes_offset("input", number)
            for dim in range(value.type.rank - 1):
                head.append(f"  const int64_t stride{number}_{dim} = sizes[{base + dim}];")
        head.append("  int failed = 0;")
        head.append("  (void)sizes;")

        parallel = [d for d in range(self.rank) if d not in self.reduce]
        body: list[str] = []
        full_stores = []
        for op in self.block.operations:
            name = op.operation.name
            if name == "braze.reduce":
                self.reduce_stage(op, body, "")
            elif name == "braze.store":
                if self.stores_per_reduction_point(op):
                    full_stores.append(op)
                else:
                    self.store(op, body, "")
            elif op.operation.results and op.operation.results[0] in self.full:
                continue  # computed inside the loops that need it
            else:
                self.define(op, body, "")
        if full_stores:
            if self.reduce:
                saved = dict(self.names)
                inner = self.loop_body([s.operation.operands[0] for s in full_stores], None)
                for op in full_stores:
                    self.store(op, inner, "")
                self.names = saved
                pragma = self.simd() if self.reduce[-1] == self.rank - 1 else ""
                self._reduction_loops(inner, "", pragma, body)
            else:
                raise BrazeError("internal error: reduction-dependent store without reduction dims (a braze bug)")
        lines = head + self._parallel_loops(parallel, body)
        lines.append("  return failed;")
        lines.append("}")
        return "\n".join(lines)

    def _parallel_loops(self, parallel: list[int], body: list[str]) -> list[str]:
        out: list[str] = []
        reduction = "reduction(|:failed) " if self.divides else ""
        row = " * ".join(f"n{d}" for d in self.reduce)
        allocate = [f"{c_type}* __restrict {name} = ({c_type}*)std::malloc(sizeof({c_type}) * ({row}));"
                    for name, c_type in self.buffers]
        free = [f"std::free({name});" for name, _ in self.buffers]
        if not parallel:
            return ["  {"] + ["    " + line for line in allocate + body + free] + ["  }"]
        extents = [f"n{d}" for d in parallel]
        work = " * ".join(f"n{d}" for d in range(self.rank)) or "1"
        if not self.reduce:
            # Blocks of the innermost dim: the inner loop vectorizes and
            # even a one-dim kernel spreads over the threads.
            last = parallel[-1]
            outer = parallel[:-1]
            out.append(f"  const int64_t blocks = (n{last} + {POINTWISE_BLOCK - 1}) / {POINTWISE_BLOCK};")
            count = " * ".join([f"n{d}" for d in outer] + ["blocks"])
            out.append(f"  #pragma omp parallel for {reduction}if(({work}) >= {PARALLEL_THRESHOLD}) schedule(static)")
            out.append(f"  for (int64_t point = 0; point < {count}; ++point) {{")
            out.append("    int64_t rest = point;")
            out.append("    const int64_t block = rest % blocks; rest /= blocks;")
            for d in reversed(outer):
                out.append(f"    const int64_t i{d} = rest % n{d}; rest /= n{d};")
            out.append(f"    const int64_t end = std::min<int64_t>(n{last}, (block + 1) * {POINTWISE_BLOCK});")
            out.append(f"    {self.simd()}")
            out.append(f"    for (int64_t i{last} = block * {POINTWISE_BLOCK}; i{last} < end; ++i{last}) {{")
            out.extend("      " + line for line in body)
            out.append("    }")
            out.append("  }")
            return out
        count = " * ".join(extents)
        loop = [f"for (int64_t point = 0; point < {count}; ++point) {{", "  int64_t rest = point;"]
        loop += [f"  const int64_t i{d} = rest % n{d}; rest /= n{d};" for d in reversed(parallel)]
        loop += ["  " + line for line in body] + ["}"]
        condition = f"if(({work}) >= {PARALLEL_THRESHOLD})"
        if not self.buffers:
            out.append(f"  #pragma omp parallel for {reduction}{condition} schedule(static)")
            out.extend("  " + line for line in loop)
            return out
        # Row buffers: one set per thread, for all its parallel points.
        out.append(f"  #pragma omp parallel {condition}")
        out.append("  {")
        out.extend("    " + line for line in allocate)
        out.append(f"    #pragma omp for {reduction}schedule(static)")
        out.extend("    " + line for line in loop + free)
        out.append("  }")
        return out


@dataclass
class CppUnit:
    source: str
    kernels: dict[str, KernelSpec]
    # Launch function name -> the kernels it runs (see plan_launches).
    launches: dict[str, list[str]] = field(default_factory=dict)


def _is_static(kernel: ir.OpView) -> bool:
    dynamic = ir.ShapedType.get_dynamic_size()
    values = list(kernel.operation.operands) + list(kernel.operation.results)
    return all(isinstance(v.type, ir.RankedTensorType) and dynamic not in v.type.shape for v in values)


def _work(kernel: ir.OpView) -> int:
    return math.prod(kernel.attributes["static_domain"])


def plan_launches(operations: list[ir.OpView]) -> list[list[int]]:
    """Runs of small kernels to start with one call: consecutive in
    `operations` (constants and parameters in between do not count), with
    static shapes, fewer points than one kernel parallelizes over, and
    independent of each other, so one OpenMP loop can spread the kernels
    over the threads. Items are kernel numbers (their order among kernels)."""
    launches: list[list[int]] = []
    run: list[int] = []
    produced: set = set()
    number = -1

    def close():
        if len(run) > 1:
            launches.append(list(run))
        run.clear()
        produced.clear()

    for op in operations:
        name = op.operation.name
        if name in ("braze.constant", "braze.parameter", "arith.constant"):
            continue
        if name in ("braze.reshape", "braze.permute"):
            # A view: it runs before the launch, or after it when it reads a
            # result of the run (and then so do its users).
            if any(v in produced for v in op.operation.operands):
                produced.update(op.operation.results)
            continue
        if name != "braze.kernel":
            close()
            continue
        number += 1
        if not _is_static(op) or _work(op) >= PARALLEL_THRESHOLD:
            close()
            continue
        if any(v in produced for v in op.operation.operands):
            close()
        run.append(number)
        produced.update(op.operation.results)
    close()
    return launches


def _launch_function(name: str, specs: list[KernelSpec]) -> str:
    """Calls each kernel, spreading the kernels over the threads when there
    is enough work in all. `buffers` holds every kernel's inputs, then every
    kernel's results; `sizes` every kernel's sizes, one after the other."""
    lines = [f'extern "C" int {name}(void* const* buffers, const int64_t* sizes) {{',
             "  int failed = 0;"]
    work = sum(math.prod(spec.static_domain) for spec in specs)
    lines.append(f"  #pragma omp parallel for schedule(dynamic, 1) reduction(|:failed) "
                 f"if({work} >= {PARALLEL_THRESHOLD})")
    lines.append(f"  for (int k = 0; k < {len(specs)}; ++k) {{")
    lines.append("    switch (k) {")
    input_offset, result_offset, size_offset = 0, sum(len(s.input_types) for s in specs), 0
    for number, spec in enumerate(specs):
        inputs = [f"buffers[{input_offset + i}]" for i in range(len(spec.input_types))]
        results = [f"buffers[{result_offset + i}]" for i in range(len(spec.result_types))]
        lines.append(f"      case {number}: {{")
        lines.append(f"        void* const own[] = {{{', '.join(inputs + results)}}};")
        lines.append(f"        failed |= {spec.name}(own, sizes + {size_offset});")
        lines.append("        break;")
        lines.append("      }")
        input_offset += len(spec.input_types)
        result_offset += len(spec.result_types)
        size_offset += (len(spec.static_domain) + sum(t.rank for t in spec.input_types)
                        + sum(t.rank for t in spec.result_types))
    lines += ["    }", "  }", "  return failed;", "}"]
    return "\n".join(lines)


def emit(kernels: list[ir.OpView], launches: list[list[int]] = (),
         prefix: str = "braze_kernel") -> CppUnit:
    """One translation unit holding every kernel, named `<prefix>_<n>`, and
    one `<prefix>_launch_<m>` function per run of kernels in `launches`."""
    parts = [PRELUDE, "#include <algorithm>\n#include <cstdlib>"]
    specs = {}
    for number, kernel in enumerate(kernels):
        printer = _KernelPrinter(kernel, f"{prefix}_{number}")
        parts.append(printer.emit())
        specs[printer.name] = printer.spec()
    names = list(specs)
    unit_launches = {}
    for number, members in enumerate(launches):
        name = f"{prefix}_launch_{number}"
        unit_launches[name] = [names[k] for k in members]
        parts.append(_launch_function(name, [specs[names[k]] for k in members]))
    return CppUnit("\n\n".join(parts) + "\n", specs, unit_launches)
