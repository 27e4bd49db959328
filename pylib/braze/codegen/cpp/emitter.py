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

The scalar ops, loads and stores are spelled by the shared C-style renderer
(`codegen/renderer.py`); this module adds the C++ tables and the loops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from mlir import ir

from braze.codegen.analysis import EXPENSIVE, UNARY_MATH, KernelAnalysis, KernelSpec
from braze.codegen.renderer import CStyleRenderer

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
    compute_types = dict(_STORAGE, f16="float", bf16="float")
    functions = {op: {"float": name, "double": name} for op, name in _FUNCTIONS.items()}

    def __init__(self, analysis: KernelAnalysis):
        super().__init__(analysis)
        self.divides = False  # whether a division was printed (`failed` is then reduced)
        self.cached: dict[ir.Value, str] = {}  # value -> its row buffer
        self.buffers: list[tuple[str, str]] = []  # (name, C++ type)
        self.needed_later = [stage.needed_later for stage in analysis.stages]
        linear = ""
        for dim in analysis.reduce:
            linear = f"({linear}) * n{dim} + i{dim}" if linear else f"i{dim}"
        self.linear = linear

    def special_float(self, kind: str, c_type: str) -> str:
        return f"std::numeric_limits<{c_type}>::{'quiet_NaN' if kind == 'nan' else 'infinity'}()"

    def int_literal(self, value: int, c_type: str) -> str:
        return f"{c_type}({value})"

    def failure(self, c_type: str) -> str:
        self.divides = True
        return f"(failed = 1, {c_type}(0))"

    def loop_body(self, roots: list[ir.Value], before) -> list[str]:
        """The lines computing `roots` at one reduction point. An expensive
        result that a later loop needs is kept in a row buffer instead of
        being computed again there."""
        later = self.needed_later.pop(0)
        lines: list[str] = []
        for op in self.a.needed_full_ops(roots, before, self.cached):
            result = op.operation.results[0]
            if result in self.cached:
                name = self.fresh()
                self.names[result] = name
                lines.append(f"const {self.compute_type(result.type)} {name} = {self.cached[result]}[{self.linear}];")
                continue
            self.define(op, lines, "")
            if op.operation.name in EXPENSIVE and op in later:
                buffer = f"row_{self.names[result]}"
                self.cached[result] = buffer
                self.buffers.append((buffer, self.compute_type(result.type)))
                lines.append(f"{buffer}[{self.linear}] = {self.names[result]};")
        return lines

    # -- loops ----------------------------------------------------------
    def simd(self, clauses: str = "") -> str:
        failed = " reduction(|:failed)" if self.divides else ""
        return f"#pragma omp simd{failed}{clauses}"

    def _reduction_loops(self, body: list[str], indent: str, innermost_pragma: str,
                         out: list[str], block_sum: bool = False) -> None:
        """Nests `body` in loops over the reduction dims."""
        dims = self.a.reduce
        for depth, dim in enumerate(dims):
            index = self.names[self.a.arguments[dim]]
            extent = self.names[self.a.arguments[self.a.rank + dim]]
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
        value_type = self.compute_type(operand.type)
        name = self.fresh()
        self.names[result] = name
        saved = dict(self.names)
        body = self.loop_body([operand], op)
        value = self.names[operand]
        self.names = {**saved, result: name}
        last = self.a.reduce[-1]
        if kind == "add":
            acc_type = "double" if value_type == "float" else value_type
            part = f"{name}_part"
            lines = [f"{part} += {value};"]
            inner_index = saved[self.a.arguments[last]]
            extent = saved[self.a.arguments[self.a.rank + last]]
            out.append(f"{indent}{acc_type} {name}_acc = 0;")
            # Blocks of the innermost reduction dim, each summed in SIMD lanes.
            outer_dims = self.a.reduce[:-1]
            for depth, dim in enumerate(outer_dims):
                index = saved[self.a.arguments[dim]]
                dim_extent = saved[self.a.arguments[self.a.rank + dim]]
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
            for dim in self.a.reduce:
                index = saved[self.a.arguments[dim]]
                extent = saved[self.a.arguments[self.a.rank + dim]]
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

    # -- the kernel -----------------------------------------------------
    def render(self) -> str:
        arguments = self.a.arguments
        head = [f'extern "C" int {self.a.name}(void* const* buffers, const int64_t* sizes) {{']
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

        body: list[str] = []
        for op in self.a.ops:
            name = op.operation.name
            if name == "braze.reduce":
                self.reduce_stage(op, body, "")
            elif name == "braze.store":
                if not self.a.per_reduction_point(op):
                    body.append(self.store_line(op))
            elif self.a.is_full(op):
                continue  # computed inside the loops that need it
            else:
                self.define(op, body, "")
        stores = self.a.stages[-1].stores if self.a.stages else []
        if stores:
            saved = dict(self.names)
            inner = self.loop_body([s.operation.operands[0] for s in stores], None)
            inner += [self.store_line(op) for op in stores]
            self.names = saved
            pragma = self.simd() if self.a.reduce[-1] == self.a.rank - 1 else ""
            self._reduction_loops(inner, "", pragma, body)
        lines = head + self._parallel_loops(self.a.parallel, body)
        lines.append("  return failed;")
        lines.append("}")
        return "\n".join(lines)

    def _parallel_loops(self, parallel: list[int], body: list[str]) -> list[str]:
        out: list[str] = []
        reduction = "reduction(|:failed) " if self.divides else ""
        row = " * ".join(f"n{d}" for d in self.a.reduce)
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
        size_offset += spec.size_count
    lines += ["    }", "  }", "  return failed;", "}"]
    return "\n".join(lines)


def emit(kernels: list[ir.OpView], launches: list[list[int]] = (),
         prefix: str = "braze_kernel") -> CppUnit:
    """One translation unit holding every kernel, named `<prefix>_<n>`, and
    one `<prefix>_launch_<m>` function per run of kernels in `launches`."""
    parts = [PRELUDE, "#include <algorithm>\n#include <cstdlib>"]
    specs = {}
    for number, kernel in enumerate(kernels):
        analysis = KernelAnalysis(kernel, f"{prefix}_{number}")
        parts.append(CppRenderer(analysis).render())
        specs[analysis.name] = analysis.spec()
    names = list(specs)
    unit_launches = {}
    for number, members in enumerate(launches):
        name = f"{prefix}_launch_{number}"
        unit_launches[name] = [names[k] for k in members]
        parts.append(_launch_function(name, [specs[names[k]] for k in members]))
    return CppUnit("\n\n".join(parts) + "\n", specs, unit_launches)
