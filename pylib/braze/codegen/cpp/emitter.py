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

A kernel whose innermost dim is parallel (a "column" reduction: a mean over
H and W in NHWC order, a sum over dim 0) would read each parallel point's
column with a stride. Instead the OpenMP loop runs over its other parallel
points and blocks of lanes of the innermost dim; every value that varies
along the lanes is held in an array of the block, and at each reduction
point one SIMD loop over the lanes reads consecutive elements and updates a
vector of accumulators (sums: a float partial per lane over
`COLUMN_SUM_BLOCK` points, added into a double accumulator).

The scalar ops, loads and stores are spelled by the shared C-style renderer
(`codegen/renderer.py`); this module adds the C++ tables and the loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mlir import ir

from braze.codegen.analysis import EXPENSIVE, UNARY_MATH, KernelAnalysis, KernelSpec, combo_kernels
from braze.codegen.renderer import CStyleRenderer
from braze.codegen.segments import Segment, reduction_segments, segments
from braze.errors import BrazeError

PRELUDE = (Path(__file__).with_name("prelude.h")).read_text()
# Added to the compiler's defaults: nothing reads errno or FP exception flags,
# and without these sqrt (and, below AVX-512, most loops) do not vectorize.
COMPILE_FLAGS = ("-fno-math-errno", "-fno-trapping-math")
# Vector gathers allowed, in the spellings of successive gcc versions (the target
# adds the first one its compiler takes). gcc's tuning for Intel cores, since the
# Gather Data Sampling microcode, never vectorizes a loop that needs a gather:
# float sin/cos/tan (one table row per element's exponent) then ran scalar,
# 50 ms against 3.7 ms for 2^20 elements on a Sapphire Rapids host.
GATHER_FLAGS = ("-mgather", "-mtune-ctrl=use_gather_2parts,use_gather_4parts,use_gather")

# Below this many points a kernel runs on one thread: waking the OpenMP team
# costs more than the work.
PARALLEL_THRESHOLD = 32768
# Elements per block of the innermost loop of a pointwise kernel.
POINTWISE_BLOCK = 4096
SUM_BLOCK = 1024
# Column reductions: a static innermost extent up to COLUMN_LANES_MAX is one
# block of lanes, a longer or dynamic one blocks of COLUMN_LANES.
COLUMN_LANES = 64
COLUMN_LANES_MAX = 128
# Points a lane sums in float before its double accumulator takes the
# partial sum (as many as each SIMD lane of a row's SUM_BLOCK block sums).
COLUMN_SUM_BLOCK = 64

_STORAGE = {
    "f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t",
    "i64": "int64_t", "i32": "int32_t", "i16": "int16_t", "i8": "int8_t",
    # i1 lives in bytes and computes as bool: gcc vectorizes a byte load
    # converted to bool well and a bool load badly (a softmax reading a
    # causal mask as bool ran four times slower).
    "i1": "uint8_t", "index": "int64_t",
}
# The prelude's own vectorizable implementations, overloaded on float and double.
_FUNCTIONS = dict(
    {f"math.{name}": f"bz_{name}" for name in UNARY_MATH[:16]},
    **{"math.sqrt": "bz_sqrt", "math.rsqrt": "bz_rsqrt", "math.absf": "std::abs",
       "math.floor": "std::floor", "math.ceil": "std::ceil", "math.trunc": "std::trunc",
       "math.roundeven": "bz_roundeven", "math.powf": "bz_pow", "math.atan2": "bz_atan2",
       "arith.remf": "std::fmod"},
)


class CppRenderer(CStyleRenderer):
    """C++17 with OpenMP loops, over the prelude's math."""

    language = "C++"
    extension = ".cpp"
    storage_types = _STORAGE
    # Half types compute in float; they are rounded where the IR converts to them.
    compute_types = dict(_STORAGE, f16="float", bf16="float", i1="bool")
    functions = {op: {"float": name, "double": name} for op, name in _FUNCTIONS.items()}

    def __init__(self, analysis: KernelAnalysis):
        super().__init__(analysis)
        self.divides = False  # whether a division was printed (`failed` is then reduced)
        self.row_buffer: dict[ir.Value, str] = {}  # value -> its row buffer
        self.buffers: list[tuple[str, str]] = []  # (name, C++ type)
        # (value, range) pairs a row buffer holds, and the ones the stage
        # being spelled writes.
        self.kept: set[tuple] = set()
        self.writing: set[tuple] = set()
        self.needed_later = [stage.needed_later for stage in analysis.stages]
        # The ranges of the innermost reduced dim with a loop each (one, the
        # whole dim, unless comparisons with constants decide selects there).
        self.ranges = reduction_segments(analysis) or [Segment(0, None)]
        self.range = 0  # the range being spelled
        self.later: set = set()  # what the stages after the one being spelled need
        linear = ""
        for dim in analysis.reduce:
            linear = f"({linear}) * n{dim} + i{dim}" if linear else f"i{dim}"
        # Column reductions: lanes of the innermost dim per block, and
        # whether every block is full (a static count of lanes).
        self.lane_dim = analysis.lane_dim
        if self.lane_dim is not None:
            extent = analysis.domain[self.lane_dim]
            self.lane_count = extent if extent is not None and extent <= COLUMN_LANES_MAX else COLUMN_LANES
            self.full_blocks = extent is not None and extent % self.lane_count == 0
            linear = f"({linear}) * {self.lane_count} + lane"
        self.linear = linear

    def special_float(self, kind: str, c_type: str) -> str:
        return f"std::numeric_limits<{c_type}>::{'quiet_NaN' if kind == 'nan' else 'infinity'}()"

    def int_literal(self, value: int, c_type: str) -> str:
        return f"{c_type}({value})"

    def failure(self, c_type: str) -> str:
        self.divides = True
        return f"(failed = 1, {c_type}(0))"

    def loop_body(self, roots: list[ir.Value], before) -> list[str]:
        """The lines computing `roots` at one reduction point of range
        `self.range`, where a value it aliases is the value it equals. An
        expensive result that a later loop needs is kept in a row buffer
        instead of being computed again there."""
        aliases = self.ranges[self.range].aliases

        def name_aliases(values) -> None:
            # The value each aliases is computed before its readers.
            for value in values:
                if value in aliases:
                    self.names[value] = self.names[aliases[value]]

        kept = {value for value, number in self.kept if number == self.range}
        lines: list[str] = []
        for op in self.a.needed_full_ops(roots, before, kept, aliases):
            result = op.operation.results[0]
            name_aliases(op.operation.operands)
            if result in kept:
                name = self.fresh()
                self.names[result] = name
                lines.append(f"const {self.compute_type(result.type)} {name} = "
                             f"{self.row_buffer[result]}[{self.linear}];")
            else:
                self.define_in_range(op, self.ranges[self.range], lines)
                if op.operation.name in EXPENSIVE and op in self.later:
                    if result not in self.row_buffer:
                        self.row_buffer[result] = f"row_{self.names[result]}"
                        self.buffers.append((self.row_buffer[result], self.compute_type(result.type)))
                    self.writing.add((result, self.range))
                    lines.append(f"{self.row_buffer[result]}[{self.linear}] = {self.names[result]};")
        name_aliases(roots)
        return lines

    def define_in_range(self, op, segment: Segment, lines: list[str]) -> None:
        """`define`, or the operand minus a constant for a result that is
        one on `segment`."""
        result = op.operation.results[0]
        if result not in segment.offsets:
            self.define(op, lines)
            return
        operand, shift = segment.offsets[result]
        name = self.fresh()
        self.names[result] = name
        lines.append(f"const {self.compute_type(result.type)} {name} = {self.names[operand]} - {shift};")

    def _range_spellings(self, spell) -> list:
        """`spell()` once per range of the innermost reduced dim, from the
        names before the stage each time (restored after): one pass over
        the reduction points. A row buffer written in a range is read by
        the later stages in that range."""
        self.later = self.needed_later.pop(0)
        before = dict(self.names)
        spellings = []
        for number in range(len(self.ranges)):
            self.range = number
            self.names = dict(before)
            spellings.append(spell())
        self.names = before
        self.kept |= self.writing
        self.writing = set()
        return spellings

    def _range_bounds(self, segment: Segment, dim: int) -> tuple[str, str]:
        """The first and the end index of `segment`'s loop over `dim` (a
        range's end is within a static extent; a dynamic one may be shorter)."""
        extent = self.names[self.a.arguments[self.a.rank + dim]]
        if segment.end is None:
            return str(segment.start), extent
        if self.a.domain[dim] is not None:
            return str(segment.start), str(segment.end)
        return str(segment.start), f"std::min<int64_t>({extent}, {segment.end})"

    # -- loops ----------------------------------------------------------
    def simd(self, clauses: str = "") -> str:
        failed = " reduction(|:failed)" if self.divides else ""
        return f"#pragma omp simd{failed}{clauses}"

    def _reduction_loops(self, bodies: list[list[str]], indent: str, innermost_pragma: str,
                         out: list[str]) -> None:
        """Nests `bodies` (one per range of the innermost reduced dim) in
        loops over the reduction dims; in a column reduction the innermost
        loop is a SIMD loop over the lanes."""
        *outer, last = self.a.reduce
        for depth, dim in enumerate(outer):
            index = self.names[self.a.arguments[dim]]
            extent = self.names[self.a.arguments[self.a.rank + dim]]
            out.append(f"{indent + '  ' * depth}for (int64_t {index} = 0; {index} < {extent}; ++{index}) {{")
        pad = indent + "  " * len(outer)
        index = self.names[self.a.arguments[last]]
        for segment, body in zip(self.ranges, bodies):
            first, end = self._range_bounds(segment, last)
            if innermost_pragma and self.lane_dim is None:
                out.append(f"{pad}{innermost_pragma}")
            out.append(f"{pad}for (int64_t {index} = {first}; {index} < {end}; ++{index}) {{")
            if self.lane_dim is None:
                out.extend(f"{pad}  {line}" for line in body)
            else:
                self._lane_loop(body, pad + "  ", out, innermost_pragma)
            out.append(f"{pad}}}")
        for depth in reversed(range(len(outer))):
            out.append(indent + "  " * depth + "}")

    def _lane_loop(self, body: list[str], indent: str, out: list[str], pragma: str | None = None,
                   indexed: bool = True) -> None:
        """`body` once per lane of the block, as one SIMD loop; `indexed`:
        the body may use the lane's index in the domain."""
        out.append(f"{indent}{self.simd() if pragma is None else pragma}")
        out.append(f"{indent}for (int64_t lane = 0; lane < lanes; ++lane) {{")
        if indexed:
            out.append(f"{indent}  const int64_t i{self.lane_dim} = lane0 + lane;")
        out.extend(f"{indent}  {line}" for line in body)
        out.append(f"{indent}}}")

    def _lane_array(self, c_type: str, name: str, out: list[str], indent: str, initial: str | None = None) -> str:
        """Declares `name` as one value per lane (set to `initial` when given);
        returns its spelling inside a lane loop."""
        out.append(f"{indent}{c_type} {name}[{self.lane_count}];")
        if initial is not None:
            self._lane_loop([f"{name}[lane] = {initial};"], indent, out, indexed=False)
        return f"{name}[lane]"

    def _accumulator(self, kind: str, value_type: str, value: str, linear: str) -> tuple | None:
        """How a max/min/and/or/argmax reduction of `value` accumulates:
        (variables as (C++ type, name, initial value), the lines that take
        one point, its SIMD reduction clauses (None: no simd loop), the
        result's expression), or None for a kind this type has none of.
        Variables are written `{name}` in the lines and expression: the
        caller spells them as scalars or per lane."""
        if kind in ("max", "min") and value_type in ("float", "double"):
            # NaN is tracked in an int flag: a bool reduction keeps gcc from
            # vectorizing the loop (3x slower rows).
            compare = ">" if kind == "max" else "<"
            start = "-" if kind == "max" else ""
            return ([(value_type, "acc", f"{start}std::numeric_limits<{value_type}>::infinity()"), ("int", "nan", "0")],
                    [f"{{acc}} = {value} {compare} {{acc}} ? {value} : {{acc}};", f"{{nan}} |= {value} != {value};"],
                    f" reduction({kind}:{{acc}}) reduction(|:{{nan}})",
                    f"{{nan}} ? std::numeric_limits<{value_type}>::quiet_NaN() : {{acc}}")
        if kind in ("max", "min", "and", "or") and value_type == "bool":
            # On i1, max is `or` and min is `and`; an int accumulator vectorizes.
            is_or = kind in ("max", "or")
            symbol = "|" if is_or else "&"
            return ([("int", "acc", "0" if is_or else "1")], [f"{{acc}} {symbol}= (int){value};"],
                    f" reduction({symbol}:{{acc}})", "{acc} != 0")
        if kind in ("max", "min"):
            limit = "lowest" if kind == "max" else "max"
            compare = ">" if kind == "max" else "<"
            return ([(value_type, "acc", f"std::numeric_limits<{value_type}>::{limit}()")],
                    [f"{{acc}} = {value} {compare} {{acc}} ? {value} : {{acc}};"],
                    f" reduction({kind}:{{acc}})", "{acc}")
        if kind == "argmax":
            # The first maximum in row-major order; NaN counts as the maximum.
            is_float = value_type in ("float", "double")
            better = (f"({value} > {{best}} || ({value} != {value} && {{best}} == {{best}}))" if is_float
                      else f"{value} > {{best}}")
            return ([(value_type, "best", "0"), ("int64_t", "at", "-1")],
                    [f"if ({{at}} < 0 || {better}) {{{{ {{best}} = {value}; {{at}} = {linear}; }}}}"],
                    None, "{at} < 0 ? 0 : {at}")
        return None

    def reduce_stage(self, op, out: list[str], indent: str) -> None:
        """One loop over the reduction points computing a braze.reduce (one
        per range of the innermost reduced dim)."""
        result = op.operation.results[0]
        spellings = self._range_spellings(lambda: self.open_reduce_stage(op, self.loop_body))
        kind, value_type, name = spellings[0][:3]
        column = self.lane_dim is not None
        self.names[result] = f"{name}[lane]" if column else name
        if kind == "add":
            part = f"{name}_part{'[lane]' if column else ''}"
            self._sum_stage(name, value_type, [body + [f"{part} += {value};"] for _, _, _, body, value, _ in spellings],
                            out, indent)
            return
        linear = "0"
        for dim in self.a.reduce:
            linear = f"({linear}) * {self.names[self.a.arguments[self.a.rank + dim]]} + {self.names[self.a.arguments[dim]]}"
        accumulators = [self._accumulator(kind, value_type, value, linear) for _, _, _, _, value, _ in spellings]
        if accumulators[0] is None:
            raise self.fail(op, f"unknown reduction kind '{kind}'")
        variables, _, clauses, final = accumulators[0]
        spelled = {}
        for c_type, variable, initial in variables:
            if column:
                spelled[variable] = self._lane_array(c_type, f"{name}_{variable}", out, indent, initial)
            else:
                spelled[variable] = f"{name}_{variable}"
                out.append(f"{indent}{c_type} {name}_{variable} = {initial};")
        bodies = [spelling[3] + [line.format(**spelled) for line in accumulator[1]]
                  for spelling, accumulator in zip(spellings, accumulators)]
        result_type = "int64_t" if kind == "argmax" else "bool" if value_type == "bool" else value_type
        if column:  # the lanes are independent: no reduction clauses
            self._reduction_loops(bodies, indent, self.simd(), out)
            self._lane_array(result_type, name, out, indent, final.format(**spelled))
            return
        pragma = "" if clauses is None else self.simd(clauses.format(**spelled))
        self._reduction_loops(bodies, indent, pragma, out)
        out.append(f"{indent}const {result_type} {name} = {final.format(**spelled)};")

    def _sum_stage(self, name: str, value_type: str, bodies: list[list[str]], out: list[str], indent: str) -> None:
        """A sum: blocks of the innermost reduction dim (of each of its
        ranges), each summed in float (SIMD lanes of a row, or one partial
        per lane of a column), added into a double accumulator."""
        acc_type = "double" if value_type == "float" else value_type
        last = self.a.reduce[-1]
        inner_index = self.names[self.a.arguments[last]]
        column = self.lane_dim is not None
        if column:
            block = COLUMN_SUM_BLOCK
            acc = self._lane_array(acc_type, f"{name}_acc", out, indent, "0")
            part = self._lane_array(value_type, f"{name}_part", out, indent)
        else:
            block = SUM_BLOCK
            acc, part = f"{name}_acc", f"{name}_part"
            out.append(f"{indent}{acc_type} {acc} = 0;")
        outer_dims = self.a.reduce[:-1]
        for depth, dim in enumerate(outer_dims):
            index = self.names[self.a.arguments[dim]]
            dim_extent = self.names[self.a.arguments[self.a.rank + dim]]
            out.append(f"{indent}{'  ' * depth}for (int64_t {index} = 0; {index} < {dim_extent}; ++{index}) {{")
        pad = indent + "  " * len(outer_dims)
        for segment, body in zip(self.ranges, bodies):
            first, end = self._range_bounds(segment, last)
            out.append(f"{pad}for (int64_t {name}_b = {first}; {name}_b < {end}; {name}_b += {block}) {{")
            out.append(f"{pad}  const int64_t {name}_e = std::min<int64_t>({end}, {name}_b + {block});")
            if column:
                self._lane_loop([f"{part} = 0;"], pad + "  ", out, indexed=False)
                out.append(f"{pad}  for (int64_t {inner_index} = {name}_b; {inner_index} < {name}_e; ++{inner_index}) {{")
                self._lane_loop(body, pad + "    ", out)
                out.append(f"{pad}  }}")
                self._lane_loop([f"{acc} += {part};"], pad + "  ", out, indexed=False)
            else:
                out.append(f"{pad}  {value_type} {part} = 0;")
                out.append(f"{pad}  {self.simd(f' reduction(+:{part})')}")
                out.append(f"{pad}  for (int64_t {inner_index} = {name}_b; {inner_index} < {name}_e; ++{inner_index}) {{")
                out.extend(f"{pad}    {line}" for line in body)
                out.append(f"{pad}  }}")
                out.append(f"{pad}  {acc} += {part};")
            out.append(f"{pad}}}")
        for depth in reversed(range(len(outer_dims))):
            out.append(f"{indent}{'  ' * depth}}}")
        if column:
            self._lane_array(value_type, name, out, indent, f"({value_type}){acc}")
        else:
            out.append(f"{indent}const {value_type} {name} = ({value_type}){acc};")

    # -- the kernel -----------------------------------------------------
    def render(self, block: int | None = None) -> str:
        """The kernel as an `extern "C"` function; with `block`, as a
        sub-kernel of a combo (codegen/cpp/combo.py): a static function
        running work items [first, end) of `block` points each (parallel
        points with reductions) on the calling thread."""
        arguments = self.a.arguments
        # Transcendental functions make a loop compute-bound: wide vectors pay.
        wide = "BZ_WIDE_VECTORS " if self.a.transcendental else ""
        if block is None:
            head = [f'extern "C" {wide}int {self.a.name}(void* const* buffers, const int64_t* sizes) {{']
        else:
            head = [f"static {wide}int {self.a.name}(void* const* buffers, const int64_t* sizes, "
                    "int64_t first, int64_t end) {"]
        # A pointwise kernel may write a result over an input of its shape
        # (the executor reuses dead buffers): no restrict there, the simd
        # pragma vectorizes anyway, each point reading before it writes.
        restrict = " __restrict" if self.a.reduce else ""
        for number, value in enumerate(self.a.inputs):
            c_type = self.storage_type(value.type.element_type)
            head.append(f"  const {c_type}*{restrict} in{number} = (const {c_type}*)buffers[{number}];")
        for number, value in enumerate(self.a.results):
            c_type = self.storage_type(value.type.element_type)
            head.append(f"  {c_type}*{restrict} out{number} = ({c_type}*)buffers[{len(self.a.inputs) + number}];")
        for dim, size in enumerate(self.a.domain):
            extent = f"n{dim}"
            self.names[arguments[self.a.rank + dim]] = extent
            self.names[arguments[dim]] = f"i{dim}"
            head.append(f"  const int64_t {extent} = {size if size is not None else f'sizes[{dim}]'};")
        for number, value in enumerate(self.a.inputs):
            self.names[arguments[2 * self.a.rank + number]] = f"in{number}"
            # Locals, not loads through `sizes`: a store may not alias them.
            base = self.a.sizes_offset("input", number)
            for dim in range(value.type.rank - 1):
                head.append(f"  const int64_t stride{number}_{dim} = sizes[{base + dim}];")
        head.append("  int failed = 0;")
        head.append("  (void)sizes;")

        if block is None and not self.a.reduce:
            # Ranges where comparisons with constants decide the selects;
            # else (conditions on run-time sizes) the interior version.
            plan = segments(self.a)
            versions = None if plan else self._interior_versions()
            if versions or plan:
                lines = head + self._parallel_loops(self.a.parallel, [], versions, plan)
                return "\n".join(lines + ["  return failed;", "}"])
        body: list[str] = []
        # Column reductions: values varying along the lanes are computed in
        # SIMD loops over the lanes, one per run of such ops.
        lane_arrays: list[str] = []
        lane_lines: list[str] = []

        def close_lane_loop():
            if lane_lines:
                body.extend(lane_arrays)
                self._lane_loop(lane_lines, "", body)
            lane_arrays.clear()
            lane_lines.clear()

        column = self.lane_dim is not None
        for op in self.a.ops:
            name = op.operation.name
            if name == "braze.reduce":
                close_lane_loop()
                self.reduce_stage(op, body, "")
            elif name == "braze.store":
                if not self.a.per_reduction_point(op):
                    (lane_lines if column else body).append(self.store_line(op))
            elif self.a.is_full(op):
                continue  # computed inside the loops that need it
            elif column and self.a.varies_along_lanes(op):
                result = op.operation.results[0]
                array = self.fresh()
                lane_arrays.append(f"{self.compute_type(result.type)} {array}[{self.lane_count}];")
                lane_lines.append(f"{array}[lane] = {self.expression(op)};")
                self.names[result] = f"{array}[lane]"
            else:
                self.define(op, body, "")
        close_lane_loop()
        stores = self.a.final_stores
        if stores:
            def spell_stores() -> list[str]:
                lines = self.loop_body([s.operation.operands[0] for s in stores], None)
                return lines + [self.store_line(op) for op in stores]

            pragma = self.simd() if self.a.reduce[-1] == self.a.rank - 1 or column else ""
            self._reduction_loops(self._range_spellings(spell_stores), "", pragma, body)
        if block is None:
            lines = head + self._parallel_loops(self.a.parallel, body)
        else:
            lines = head + self._item_loops(self.a.parallel, body, block)
        lines.append("  return failed;")
        lines.append("}")
        return "\n".join(lines)

    def _interior_versions(self) -> tuple | None:
        """A pointwise kernel whose selects take a condition that does not
        change along the innermost (SIMD) dim, as a padded read's
        `inside ? x[clamped index] : pad` (pooling, padding, concatenation):
        (the lines of the ops that do not change along that dim, the test
        that every such condition is false, the loop body where they are,
        the loop body in general), or None. gcc 12 left a padded max-pool's
        loop scalar (where two clamped indices of a window can be equal, it
        made one load a masked load with a loop-invariant mask, which its
        vectorizer rejects): 3.0-3.3 ms of ResNet-18's 27-45 ms. The
        interior points take the loop without those selects."""
        if not self.a.parallel:
            return None
        varying = {self.a.arguments[self.a.parallel[-1]]}
        conditions: dict[ir.Value, None] = {}
        chosen: dict = {}  # a select's result -> its value where the condition is false
        for op in self.a.ops:
            operands = list(op.operation.operands)
            if op.operation.name == "braze.store" or any(v in varying for v in operands):
                varying.update(op.operation.results)
                if op.operation.name == "arith.select" and operands[0] not in varying:
                    conditions[operands[0]] = None
                    chosen[op.operation.results[0]] = operands[2]
        if not conditions:
            return None
        invariant, loop_ops = [], []
        for op in self.a.ops:
            results = list(op.operation.results)
            (invariant if results and results[0] not in varying else loop_ops).append(op)
        before: list[str] = []
        for op in invariant:
            self.define(op, before)
        outside = dict(self.names)
        bodies = []
        for interior in (True, False):
            self.names = dict(outside)
            body: list[str] = []
            for op in loop_ops:
                result = op.operation.results[0] if op.operation.results else None
                if interior and result in chosen:
                    self.names[result] = self.names[chosen[result]]
                elif op.operation.name == "braze.store":
                    body.append(self.store_line(op))
                else:
                    self.define(op, body)
            bodies.append(body)
        test = " || ".join(outside[c] for c in conditions)
        return before, test, bodies[0], bodies[1]

    def _segment_body(self, segment) -> list[str]:
        """The lines of the ops `segment` needs, the results it decides read
        as the operands they equal there."""
        needed = {id(op) for op in segment.ops}
        lines: list[str] = []
        for op in self.a.ops:
            results = list(op.operation.results)
            if results and results[0] in segment.aliases:
                target = segment.aliases[results[0]]
                if target in self.names:
                    self.names[results[0]] = self.names[target]
            elif id(op) in needed:
                if op.operation.name == "braze.store":
                    lines.append(self.store_line(op))
                else:
                    self.define_in_range(op, segment, lines)
        return lines

    def _segment_loops(self, plan, last: int, loop: str) -> list[str]:
        """The loops of `plan` (`segments`): inside the interior box of the
        split outer dims (when any) and elsewhere, one SIMD loop per range
        of the innermost dim (the block's loop split) or the block's loop."""
        if not plan.interior:
            return self._range_loops(plan, plan.inside, last, loop, "    ")
        terms = []
        for dim, (start, end) in plan.interior.items():
            terms += ([f"i{dim} >= {start}"] if start else []) + ([f"i{dim} < {end}"] if end is not None else [])
        return [f"    if ({' && '.join(terms)}) {{", *self._range_loops(plan, plan.inside, last, loop, "      "),
                "    } else {", *self._range_loops(plan, plan.outside, last, loop, "      "), "    }"]

    def _range_loops(self, plan, segments_of: list, last: int, loop: str, indent: str) -> list[str]:
        out: list[str] = []
        outside = dict(self.names)
        for segment in segments_of:
            self.names = dict(outside)
            body = self._segment_body(segment)
            if plan.inner_dim is None:
                out += [f"{indent}{self.simd()}", f"{indent}{loop}", *(f"{indent}  {line}" for line in body),
                        f"{indent}}}"]
                continue
            stop = "end" if segment.end is None else f"std::min<int64_t>(end, {segment.end})"
            out += [f"{indent}{{",
                    f"{indent}  const int64_t first = std::max<int64_t>(block * {POINTWISE_BLOCK}, {segment.start});",
                    f"{indent}  const int64_t stop = {stop};",
                    f"{indent}  {self.simd()}",
                    f"{indent}  for (int64_t i{last} = first; i{last} < stop; ++i{last}) {{",
                    *(f"{indent}    {line}" for line in body), f"{indent}  }}", f"{indent}}}"]
        self.names = outside
        return out

    def _parallel_loops(self, parallel: list[int], body: list[str], versions: tuple | None = None,
                        plan=None) -> list[str]:
        """The kernel's loops around `body`; `versions` (pointwise kernels,
        `_interior_versions`) replaces it with two loops, `plan`
        (`segments`) with one per range of its dim."""
        out: list[str] = []
        reduction = "reduction(|:failed) " if self.divides else ""
        row = " * ".join([f"n{d}" for d in self.a.reduce]
                         + ([str(self.lane_count)] if self.lane_dim is not None else []))
        allocate = [f"{c_type}* __restrict {name} = ({c_type}*)std::malloc(sizeof({c_type}) * ({row}));"
                    for name, c_type in self.buffers]
        free = [f"std::free({name});" for name, _ in self.buffers]
        if not parallel:
            return ["  {"] + ["    " + line for line in allocate + body + free] + ["  }"]
        extents = [f"n{d}" for d in parallel]
        work = " * ".join(f"n{d}" for d in range(self.a.rank)) or "1"
        if not self.a.reduce:
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
            loop = f"for (int64_t i{last} = block * {POINTWISE_BLOCK}; i{last} < end; ++i{last}) {{"
            if plan is not None:
                return out + self._segment_loops(plan, last, loop) + ["  }"]
            if versions is None:
                out += [f"    {self.simd()}", f"    {loop}", *("      " + line for line in body), "    }", "  }"]
                return out
            before, test, interior, general = versions
            out.extend("    " + line for line in before)
            for opening, lines in ((f"if (!({test})) {{", interior), ("} else {", general)):
                out += [f"    {opening}", f"      {self.simd()}", f"      {loop}"]
                out += ["        " + line for line in lines] + ["      }"]
            out += ["    }", "  }"]
            return out
        if self.lane_dim is None:
            count = " * ".join(extents)
            loop = [f"for (int64_t point = 0; point < {count}; ++point) {{", "  int64_t rest = point;"]
        else:
            # The other parallel points times the blocks of lanes.
            lanes = self.lane_dim
            outer = [d for d in parallel if d != lanes]
            out.append(f"  const int64_t lane_blocks = (n{lanes} + {self.lane_count - 1}) / {self.lane_count};")
            count = " * ".join([f"n{d}" for d in outer] + ["lane_blocks"])
            width = (str(self.lane_count) if self.full_blocks
                     else f"std::min<int64_t>({self.lane_count}, n{lanes} - lane0)")
            loop = [f"for (int64_t point = 0; point < {count}; ++point) {{", "  int64_t rest = point;",
                    "  const int64_t lane0 = rest % lane_blocks * " + str(self.lane_count) + "; rest /= lane_blocks;",
                    f"  const int64_t lanes = {width};"]
            parallel = outer
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


    def _item_loops(self, parallel: list[int], body: list[str], block: int) -> list[str]:
        """Work items [first, end) of `block` points each on this thread:
        runs of the innermost dim (a SIMD loop each) without reductions,
        else `block` parallel points per item."""
        if self.lane_dim is not None:
            raise BrazeError(f"kernel {self.a.name}: a column reduction cannot be a combo sub-kernel "
                             "(its lanes are blocked by the emitter; braze-combo-kernels leaves it standalone)")
        allocate = [f"{c_type}* __restrict {name} = ({c_type}*)std::malloc(sizeof({c_type}) * "
                    f"({' * '.join(f'n{d}' for d in self.a.reduce)}));" for name, c_type in self.buffers]
        free = [f"std::free({name});" for name, _ in self.buffers]
        points = " * ".join(f"n{d}" for d in parallel) or "1"
        out = ["  {"] + ["    " + line for line in allocate]
        out.append(f"    const int64_t stop = std::min<int64_t>(end * {block}, {points});")
        if not parallel:
            out.append("    if (first * " + str(block) + " < stop) {")
            out.extend("      " + line for line in body)
            out.append("    }")
        elif not self.a.reduce:
            last, outer = parallel[-1], parallel[:-1]
            out.append(f"    for (int64_t point = first * {block}; point < stop;) {{")
            out.append(f"      int64_t rest = point / n{last};")
            out.append(f"      const int64_t start = point % n{last};")
            for d in reversed(outer):
                out.append(f"      const int64_t i{d} = rest % n{d}; rest /= n{d};")
            out.append(f"      const int64_t run = std::min<int64_t>(n{last} - start, stop - point);")
            out.append(f"      {self.simd()}")
            out.append(f"      for (int64_t i{last} = start; i{last} < start + run; ++i{last}) {{")
            out.extend("        " + line for line in body)
            out.append("      }")
            out.append("      point += run;")
            out.append("    }")
        else:
            out.append(f"    for (int64_t point = first * {block}; point < stop; ++point) {{")
            out.append("      int64_t rest = point;")
            out += [f"      const int64_t i{d} = rest % n{d}; rest /= n{d};" for d in reversed(parallel)]
            out.extend("      " + line for line in body)
            out.append("    }")
        out += ["    " + line for line in free] + ["  }"]
        return out


@dataclass
class CppUnit:
    source: str
    kernels: dict[str, KernelSpec]
    # Combo launch function name -> its sub-kernels, in order.
    launches: dict[str, list[str]] = field(default_factory=dict)


def emit(kernels: list[ir.OpView], combos: list[ir.OpView] = (),
         prefix: str = "braze_kernel") -> CppUnit:
    """One translation unit holding every kernel, named `<prefix>_<n>` in
    program order (`kernels`: those of the function, each combo's where
    the combo is), and one `<prefix>_combo_<m>` launch function per combo
    in `combos` (codegen/cpp/combo.py), whose sub-kernels are not
    callable on their own."""
    from braze.codegen.cpp import attention, gemm
    from braze.codegen.cpp.combo import ITEM_AT, render_combo, sub_kernel_blocks

    parts = [PRELUDE, "#include <algorithm>\n#include <cstdlib>\n#include <omp.h>"]
    if combos:
        parts.append(ITEM_AT)
    # Library-backed kernels: their renderer and the preludes they need.
    library_kernels = {"braze.fused_gemm": (gemm.render, [gemm.GEMM_PRELUDE]),
                       "braze.flash_attention": (attention.render, [gemm.GEMM_PRELUDE, attention.ATTENTION_PRELUDE])}
    for name in library_kernels:
        if any(kernel.operation.name == name for kernel in kernels):
            parts += [prelude for prelude in library_kernels[name][1] if prelude not in parts]
    blocks = sub_kernel_blocks(combos)
    specs = {}
    for number, kernel in enumerate(kernels):
        name = f"{prefix}_{number}"
        if kernel.operation.name in library_kernels:
            source, specs[name] = library_kernels[kernel.operation.name][0](kernel, name)
            parts.append(source)
            continue
        analysis = KernelAnalysis(kernel, name)
        parts.append(CppRenderer(analysis).render(blocks.get(kernel)))
        specs[analysis.name] = analysis.spec()
    names = dict(zip(kernels, specs))
    unit_launches = {}
    for number, combo in enumerate(combos):
        name = f"{prefix}_combo_{number}"
        members = [names[kernel] for kernel in combo_kernels(combo)]
        unit_launches[name] = members
        parts.append(render_combo(name, combo, [specs[m] for m in members]))
    return CppUnit("\n\n".join(parts) + "\n", specs, unit_launches)
