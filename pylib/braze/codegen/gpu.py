"""The GPU kernel structure, shared by the CUDA, HIP, OpenCL C and Metal
renderers (each a thin subclass that spells it).

Every kernel takes its inputs, its results, `sizes` (the CPU kernels'
layout: extents, input strides, result dims) and `failed` (one int the
kernel sets to 1 after an integer division by zero), as separate buffers.

* Pointwise kernels: one thread per point of the domain, `threads` per
  block, ceil(points / threads) blocks; with `elements` E in the schedule,
  each thread takes E consecutive points in a loop of constant trip count
  (which the compilers unroll) and there are
  ceil(points / (threads * E)) blocks.
* Kernels with reductions, by default: one block per parallel point (row). Each
  `braze.reduce` is one loop of the block's threads over the reduction
  points (thread t takes points t, t + threads, ...), recomputing the
  pointwise values it needs, then a tree over the threads' partial results
  through shared (local, threadgroup) memory, with a barrier per level.
  Reduction-dependent stores run in one more such loop; stores of values
  that exist once per row are written by thread 0.
* Short rows, when `braze-gpu-schedule` says so (`strategy =
  "row_per_thread"`): one thread per row, which loops over the row alone.
* Medium rows, when `braze-gpu-schedule` says so (`strategy =
  "warp_tree"`): one warp (SIMD group) per row, `threads / warp` rows per
  block. The warp's lanes stride over the row as a block's threads do, then
  combine their partial results with shuffles down (lane t takes lane
  t + s, for s = warp / 2 ... 1: the block tree's order over a warp, so NaN
  and argmax ties come out alike), and lane 0's result is broadcast to the
  warp. No shared memory, no barriers; a warp past the last row returns
  whole. Only targets with warp shuffles (`warp` set) render it.

A kernel's `braze.schedule` attribute (from `braze-gpu-schedule`) sets the
strategy and the threads per block, and optionally `elements` (above) and
`index_bits = 32` (extents, strides, points and offsets as `int` instead
of `int64_t`: the schedule proved they fit); without it: "points" or
"block_tree", the renderer's default threads, one point per thread and
64-bit indexing. The launch shape is recorded in the
kernel's `KernelSpec` (`threads`, `strategy`).

A kernel rendered as a combo's sub-kernel (`launch_threads` given; see
codegen/gpu_combo.py) is a device function instead of a launch: it takes
its block and thread numbers as arguments, and its shared memory as a
pointer into the combo's pool. Its launch may have more threads than its
own: those extra threads idle. They return at once where the kernel has no
barrier; in a block tree they take no reduction point and no tree slot but
still meet every barrier (a barrier some threads of the block skip
deadlocks or is undefined).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mlir import ir

from braze.codegen.analysis import KernelAnalysis, combo_kernels, type_name
from braze.codegen.renderer import CStyleRenderer
from braze.errors import BrazeError

GPU_PRELUDE = Path(__file__).with_name("gpu_prelude.h").read_text()
# Bytes of each C type a block tree keeps in shared memory (a combo's
# sub-kernels carve their buffers from one pool of 8-byte words).
SHARED_SIZES = {"float": 4, "double": 8, "int64_t": 8, "int32_t": 4, "int": 4, "int16_t": 2, "int8_t": 1,
                "uint16_t": 2, "uint8_t": 1, "bool": 1}
DEFAULT_THREADS = 256
STRATEGIES = ("points", "block_tree", "row_per_thread", "warp_tree")

STORAGE_TYPES = {
    "f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t",
    "i64": "int64_t", "i32": "int32_t", "i16": "int16_t", "i8": "int8_t", "i1": "bool",
    "index": "int64_t",
}
_INTEGER_BITS = {"int64_t": 64, "int32_t": 32, "int16_t": 16, "int8_t": 8}
# C99 math names (float versions add an `f` where a target is not overloaded).
C_FUNCTIONS = {
    **{f"math.{name}": name for name in ("exp", "expm1", "exp2", "log", "log1p", "log2", "tanh", "erf",
                                         "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                         "sqrt", "rsqrt", "floor", "ceil", "trunc")},
    "math.absf": "fabs", "math.roundeven": "rint", "math.powf": "pow", "math.atan2": "atan2",
    "arith.remf": "fmod",
}


class GpuRenderer(CStyleRenderer):
    """The GPU structure over the shared scalar spellings. Subclasses set
    the spellings listed under "target spellings"."""

    storage_types = STORAGE_TYPES
    compute_types = dict(STORAGE_TYPES, f16="float", bf16="float")
    functions = {op: {"float": name, "double": name} for op, name in C_FUNCTIONS.items()}
    int64_min = "((int64_t)(-9223372036854775807 - 1))"

    # -- target spellings ----------------------------------------------
    head = ""  # what precedes the shared prelude (types, BZ_FN, bit casts)
    kernel_prefix = ""  # e.g. 'extern "C" __global__ void'
    global_space = ""  # address space of buffers ("__global", "device")
    shared_space = ""  # "__shared__", "__local", "threadgroup"
    shared_pointer_space = ""  # how a pointer into shared memory is qualified (CUDA: generic, none)
    device_prefix = "static"  # a combo sub-kernel's device function
    # Parameters a launch function may take (pointers, 8 bytes each): the
    # API's own limit, which a combo's launch is checked against.
    max_launch_parameters = 0
    barrier = ""
    local_id = ""  # this thread's number in its block
    block_id = ""  # the block's number in the grid
    # Lanes of a warp (SIMD group) that shuffle_down and broadcast_first
    # exchange values among; 0: the target renders no warp trees.
    warp = 0
    # What precedes a loop of constant trip count over a per-thread array
    # that must stay in registers ("": the compiler's own unrolling).
    unroll = ""

    def __init__(self, analysis: KernelAnalysis, threads: int = DEFAULT_THREADS,
                 launch_threads: int | None = None):
        """`launch_threads`: render a combo sub-kernel (a device function)
        launched with that many threads per block, at least its own."""
        super().__init__(analysis)
        self.strategy = "block_tree" if analysis.reduce else "points"
        schedule = analysis.kernel.attributes["braze.schedule"] if "braze.schedule" in analysis.kernel.attributes else None
        self.elements = 1  # consecutive points per thread of a pointwise kernel
        self.index = "int64_t"  # the C type of extents, strides, points and offsets
        if schedule is not None:
            self.strategy = ir.StringAttr(schedule["strategy"]).value
            threads = ir.IntegerAttr(schedule["threads"]).value
            if "elements" in schedule:
                self.elements = ir.IntegerAttr(schedule["elements"]).value
            if "index_bits" in schedule:
                index_bits = ir.IntegerAttr(schedule["index_bits"]).value
                if index_bits not in (32, 64):
                    raise BrazeError(f"kernel {analysis.name}: schedule index_bits must be 32 or 64, got {index_bits}")
                # Extents, strides, points and offsets all fit: 32-bit
                # arithmetic (one instruction per multiply-add on GPUs).
                self.index = "int" if index_bits == 32 else "int64_t"
            if (self.strategy == "points") != (not analysis.reduce) or self.strategy not in STRATEGIES:
                raise BrazeError(f"kernel {analysis.name}: schedule strategy {self.strategy!r} does not fit a "
                                 f"kernel {'with' if analysis.reduce else 'without'} reductions")
        if threads < 1 or threads & (threads - 1):
            raise BrazeError(f"kernel {analysis.name}: threads per block must be a power of two, got {threads}")
        if self.elements < 1 or self.elements & (self.elements - 1) or (self.elements > 1 and analysis.reduce):
            raise BrazeError(f"kernel {analysis.name}: schedule elements must be a power of two, and 1 in a kernel "
                             f"with reductions, got {self.elements}")
        self.warp_tree = self.strategy == "warp_tree"
        if self.warp_tree and not self.warp:
            raise BrazeError(f"kernel {analysis.name}: the {self.language} renderer has no warp shuffles for "
                             f"schedule strategy 'warp_tree' (schedule it with a block tree)")
        if self.warp_tree and threads < self.warp:
            raise BrazeError(f"kernel {analysis.name}: a warp tree needs at least a warp ({self.warp}) of threads "
                             f"per block, got {threads}")
        self.threads = threads
        self.shared: list[tuple[str, str]] = []  # (C type, name): `threads` elements each
        self.tree = self.strategy == "block_tree"
        # Threads that share a row (`tid` numbers them) and stride over its
        # points: a block's in a block tree, a warp's in a warp tree.
        self.row_threads = threads if self.tree else self.warp if self.warp_tree else 1
        self.sub_kernel = launch_threads is not None
        if self.sub_kernel and launch_threads < threads:
            raise BrazeError(f"kernel {analysis.name}: a combo launch of {launch_threads} threads per block "
                             f"cannot run a sub-kernel of {threads}")
        # Threads of the launch beyond this kernel's own, which must idle.
        self.idle = self.sub_kernel and launch_threads > threads
        self.thread, self.block = ("bz_thread", "bz_block") if self.sub_kernel else (self.local_id, self.block_id)
        # The bound of this thread's strided loops over the reduction points:
        # 0 for an idle thread, whose partial results no tree reads and whose
        # stores per reduction point would repeat other threads' writes.
        self.points_bound = "my_points" if self.idle and self.tree else "reduce_points"

    def special_float(self, kind: str, c_type: str) -> str:
        return f"BZ_{kind.upper()}_{'F' if c_type == 'float' else 'D'}"

    def shuffle_down(self, value: str, delta: str, c_type: str) -> str:
        """`value` of the lane `delta` above this one in the warp."""
        raise NotImplementedError

    def broadcast_first(self, value: str, c_type: str) -> str:
        """`value` of the warp's lane 0."""
        raise NotImplementedError

    def failure(self, c_type: str) -> str:
        return f"(failed[0] = 1, ({c_type})0)"

    def parameters(self) -> list[str]:
        """The kernel's parameters: inputs, results, sizes, failed."""
        space = f"{self.global_space} " if self.global_space else ""
        params = [f"{space}const {self.storage_type(v.type.element_type)}* in{n}"
                  for n, v in enumerate(self.a.inputs)]
        params += [f"{space}{self.storage_type(v.type.element_type)}* out{n}"
                   for n, v in enumerate(self.a.results)]
        return params + [f"{space}const int64_t* sizes", f"{space}int* failed"]

    def launch_prefix(self, threads: int) -> str:
        """What precedes a launch function's name (`threads` per block)."""
        return self.kernel_prefix

    def launch_parameters(self, params: list[str]) -> list[str]:
        """A launch function's parameters from the buffer parameters
        `params` (Metal adds argument-table slots and thread positions)."""
        return params

    def shared_pointer(self, c_type: str) -> str:
        space = f"{self.shared_pointer_space} " if self.shared_pointer_space else ""
        return f"{space}{c_type}*"

    def _words(self, c_type: str) -> int:
        """8-byte words of a shared buffer of `c_type`, one per thread."""
        return -(-SHARED_SIZES[c_type] * self.threads // 8)

    @property
    def shared_words(self) -> int:
        """8-byte words of shared memory the kernel needs."""
        return sum(self._words(c_type) for c_type, _ in self.shared)

    def signature(self) -> str:
        if not self.sub_kernel:
            params = self.launch_parameters(self.parameters())
            return f"{self.launch_prefix(self.threads)} {self.a.name}({', '.join(params)})"
        params = self.parameters()
        if self.shared:
            params.append(f"{self.shared_pointer('int64_t')} bz_shared")
        params += ["const int64_t bz_block", "const int64_t bz_thread"]
        return f"{self.device_prefix} void {self.a.name}({', '.join(params)})"

    def _shared_declarations(self) -> list[str]:
        """A launch declares its shared arrays; a sub-kernel carves them
        from its combo's pool (8-byte aligned, one after the other)."""
        if not self.sub_kernel:
            return [f"  {self.shared_space} {c_type} {name}[{self.threads}];" for c_type, name in self.shared]
        lines, word = [], 0
        for c_type, name in self.shared:
            pointer = self.shared_pointer(c_type)
            lines.append(f"  {pointer} {name} = ({pointer})(bz_shared + {word});")
            word += self._words(c_type)
        return lines

    def _past_the_end(self, point: str, total: str) -> str:
        """The early return of a thread with no point (no barrier follows)."""
        idle = f"{self.thread} >= {self.threads} || " if self.idle else ""
        return f"  if ({idle}{point} >= {total}) return;"

    # -- structure ------------------------------------------------------
    def render(self) -> str:
        a = self.a
        head = []
        for dim, size in enumerate(a.domain):
            self.names[a.arguments[a.rank + dim]] = f"n{dim}"
            self.names[a.arguments[dim]] = f"i{dim}"
            head.append(f"  const {self.index} n{dim} = {size if size is not None else f'sizes[{dim}]'};")
        for number, value in enumerate(a.inputs):
            self.names[a.arguments[2 * a.rank + number]] = f"in{number}"
            base = a.sizes_offset("input", number)
            for dim in range(value.type.rank - 1):
                head.append(f"  const {self.index} stride{number}_{dim} = sizes[{base + dim}];")
        body: list[str] = []
        if not a.reduce:
            total = " * ".join(f"n{d}" for d in range(a.rank)) or "1"
            first = f"({self.index}){self.block} * {self.threads} + {self.thread}"
            indent = "  "
            if self.elements > 1:
                body.append(f"  const {self.index} first = ({first}) * {self.elements};")
                body.append(f"  for (int k = 0; k < {self.elements}; ++k) {{")
                first, indent = "first + k", "    "
            body.append(f"{indent}const {self.index} point = {first};")
            body.append(indent + self._past_the_end("point", total).lstrip())
            body += self._decode("point", a.parallel, indent)
            for op in a.ops:
                if op.operation.name == "braze.store":
                    body.append(indent + self.store_line(op))
                else:
                    self.define(op, body, indent)
            if self.elements > 1:
                body.append("  }")
        else:
            if self.tree:
                body.append(f"  const {self.index} tid = {self.thread};")
                body.append(f"  const {self.index} point = {self.block};")
            elif self.warp_tree:
                rows = " * ".join(f"n{d}" for d in a.parallel) or "1"
                body.append(f"  const {self.index} tid = {self.thread} % {self.warp};")
                body.append(f"  const {self.index} point = ({self.index}){self.block} * {self.threads // self.warp} + "
                            f"{self.thread} / {self.warp};")
                body.append(self._past_the_end("point", rows))
            else:
                rows = " * ".join(f"n{d}" for d in a.parallel) or "1"
                body.append(f"  const {self.index} point = ({self.index}){self.block} * {self.threads} + {self.thread};")
                body.append(self._past_the_end("point", rows))
            body += self._decode("point", a.parallel, "  ")
            body.append(f"  const {self.index} reduce_points = {' * '.join(f'n{d}' for d in a.reduce)};")
            if self.points_bound != "reduce_points":
                body.append(f"  const {self.index} my_points = tid < {self.threads} ? reduce_points : 0;")
            for op in a.ops:
                name = op.operation.name
                if name == "braze.reduce":
                    self._reduce_stage(op, body)
                elif name == "braze.store":
                    if not a.per_reduction_point(op):
                        line = self.store_line(op)
                        body.append(f"  if (tid == 0) {{ {line} }}" if self.row_threads > 1 else f"  {line}")
                elif not a.is_full(op):
                    self.define(op, body, "  ")
            stores = a.final_stores
            if stores:
                saved = dict(self.names)
                inner = self._stage_body([s.operation.operands[0] for s in stores], None)
                inner += [self.store_line(op) for op in stores]
                self.names = saved
                body += self._over_reduction_points(inner)
        return "\n".join([self.signature() + " {"] + head + self._shared_declarations() + body + ["}"])

    def _decode(self, linear: str, dims: list[int], indent: str) -> list[str]:
        """Row-major indices `i<d>` of the number `linear` over `dims`."""
        if not dims:
            return []
        lines = [f"{indent}{self.index} {linear}_rest = {linear};"]
        for d in reversed(dims):
            lines.append(f"{indent}const {self.index} i{d} = {linear}_rest % n{d}; {linear}_rest /= n{d};")
        return lines

    def _stage_body(self, roots, before) -> list[str]:
        lines: list[str] = []
        for op in self.a.needed_full_ops(roots, before):
            self.define(op, lines, "")
        return lines

    def _over_reduction_points(self, lines: list[str]) -> list[str]:
        """`lines` in this thread's share of the reduction points."""
        if self.row_threads > 1:
            out = [f"  for ({self.index} r = tid; r < {self.points_bound}; r += {self.row_threads}) {{"]
        else:
            out = [f"  for ({self.index} r = 0; r < reduce_points; ++r) {{"]
        out += self._decode("r", self.a.reduce, "    ")
        out += ["    " + line for line in lines]
        return out + ["  }"]

    def _tree(self, combine: str, buffers: list[str]) -> list[str]:
        """Combines the threads' partial results in shared memory: at each
        level thread t < s merges slot t + s into slot t (`combine` is a
        statement over `A` (slot t) and `B` (slot t + s) of each buffer)."""
        out = [f"  {buffer}[tid] = {buffer}_mine;" for buffer in buffers]
        if self.idle:  # the pool holds slots for this kernel's own threads only
            out = [f"  if (tid < {self.threads}) {{ {' '.join(line.strip() for line in out)} }}"]
        out.append(f"  {self.barrier};")
        out.append(f"  for (int s = {self.threads // 2}; s > 0; s >>= 1) {{")
        statement = combine
        for buffer in buffers:
            statement = statement.replace(f"A({buffer})", f"{buffer}[tid]").replace(f"B({buffer})", f"{buffer}[tid + s]")
        out.append(f"    if (tid < s) {{ {statement} }}")
        out.append(f"    {self.barrier};")
        out.append("  }")
        return out

    def _warp_tree(self, combine: str, buffers: list[tuple[str, str]]) -> list[str]:
        """Combines the lanes' partial results (`<buffer>_mine`) with
        shuffles down, as `_tree` does through shared memory (`combine` over
        `A(buffer)`, `B(buffer)` alike); `buffers` are (C type, name). Lane
        0 then holds the row's result, which every lane takes."""
        out = [f"  for (int s = {self.warp // 2}; s > 0; s >>= 1) {{"]
        statement = combine
        for c_type, buffer in buffers:
            out.append(f"    const {c_type} {buffer}_other = {self.shuffle_down(f'{buffer}_mine', 's', c_type)};")
            statement = statement.replace(f"A({buffer})", f"{buffer}_mine").replace(f"B({buffer})", f"{buffer}_other")
        out.append(f"    {statement}")
        out.append("  }")
        out += [f"  {buffer}_mine = {self.broadcast_first(f'{buffer}_mine', c_type)};" for c_type, buffer in buffers]
        return out

    def _reduce_stage(self, op, out: list[str]) -> None:
        result = op.operation.results[0]
        kind, value_type, name, inner, value, saved = self.open_reduce_stage(op, self._stage_body)
        self.names = {**saved, result: name}
        buffer = f"{name}_s"
        if kind == "argmax":
            at = f"{name}_at"
            if self.tree:
                self.shared += [(value_type, buffer), ("int64_t", at)]
            out.append(f"  {value_type} {buffer}_mine = 0;")
            out.append(f"  int64_t {at}_mine = -1;")
            better = self._better(value, f"{buffer}_mine", value_type)
            # A thread visits its points in increasing order: the first best one stays.
            out += self._over_reduction_points(
                inner + [f"if ({at}_mine < 0 || {better}) {{ {buffer}_mine = {value}; {at}_mine = r; }}"])
            other, mine = f"B({buffer})", f"A({buffer})"
            take = (f"B({at}) >= 0 && (A({at}) < 0 || {self._better(other, mine, value_type)} || "
                    f"(({other} == {mine} || ({other} != {other} && {mine} != {mine})) && B({at}) < A({at})))")
            if self.warp_tree:
                out += self._warp_tree(f"if ({take}) {{ {mine} = {other}; A({at}) = B({at}); }}",
                                       [(value_type, buffer), ("int64_t", at)])
            if not self.tree:
                out.append(f"  const int64_t {name} = {at}_mine < 0 ? 0 : {at}_mine;")
                return
            out += self._tree(f"if ({take}) {{ {mine} = {other}; A({at}) = B({at}); }}", [buffer, at])
            out.append(f"  const int64_t {name} = {at}[0] < 0 ? 0 : {at}[0];")
            return
        is_bool = type_name(op.operation.operands[0].type) == "i1"
        acc_type = "int" if is_bool else value_type
        if self.tree:
            self.shared.append((acc_type, buffer))
        start, combine = self._reduction(op, kind, value_type, is_bool)
        out.append(f"  {acc_type} {buffer}_mine = {start};")
        out += self._over_reduction_points(
            inner + [f"{buffer}_mine = {combine.format(a=f'{buffer}_mine', b=f'({acc_type}){value}' if is_bool else value)};"])
        combined = f"A({buffer}) = {combine.format(a=f'A({buffer})', b=f'B({buffer})')};"
        if self.tree:
            out += self._tree(combined, [buffer])
        elif self.warp_tree:
            out += self._warp_tree(combined, [(acc_type, buffer)])
        total = f"{buffer}[0]" if self.tree else f"{buffer}_mine"
        final = f"{total} != 0" if is_bool else total
        out.append(f"  const {self.compute_type(result.type)} {name} = {final};")

    @staticmethod
    def _better(candidate: str, best: str, value_type: str) -> str:
        """Whether `candidate` beats `best` for argmax (NaN is the maximum)."""
        if value_type in ("float", "double"):
            return f"({candidate} > {best} || ({candidate} != {candidate} && {best} == {best}))"
        return f"{candidate} > {best}"

    def _reduction(self, op, kind: str, value_type: str, is_bool: bool) -> tuple[str, str]:
        """The start value and the combining expression (over `{a}`, `{b}`)."""
        if is_bool:
            if kind in ("max", "or"):
                return "0", "{a} | {b}"
            return "1", "{a} & {b}"
        if kind == "add":
            return f"({value_type})0", "{a} + {b}"
        if kind in ("max", "min") and value_type in ("float", "double"):
            infinity = self.special_float("inf", value_type)
            if kind == "max":
                return f"-{infinity}", f"{self.nan_max}({{a}}, {{b}})"
            return infinity, f"{self.nan_min}({{a}}, {{b}})"
        if kind in ("max", "min"):
            bits = _INTEGER_BITS[value_type]
            if kind == "max":
                start = self.int64_min if bits == 64 else self.int_literal(-(2 ** (bits - 1)), value_type)
                return start, "({a} > {b} ? {a} : {b})"
            return self.int_literal(2 ** (bits - 1) - 1, value_type), "({a} < {b} ? {a} : {b})"
        raise self.fail(op, f"has no {self.language} form for reduction kind '{kind}' of {value_type}")


def sizes_lines(analysis, index: str = "int64_t") -> list[str]:
    """For a kernel rendered without a KernelAnalysis (a fused GEMM, a
    flash attention): the extents `n<d>` of `analysis.domain` (static, or read from
    `sizes`) and the strides `stride<n>_<d>` of its inputs but the
    innermost, which is 1 (the executor copies a view whose last dim is
    strided before a GPU kernel reads it), in the schedule's `index` type."""
    lines = [f"  const {index} n{dim} = {size if size is not None else f'sizes[{dim}]'};"
             for dim, size in enumerate(analysis.domain)]
    base = len(analysis.domain)
    for number, value in enumerate(analysis.inputs):
        lines += [f"  const {index} stride{number}_{dim} = sizes[{base + dim}];" for dim in range(value.type.rank - 1)]
        base += value.type.rank
    return lines


def render_source(renderer_type, kernels: list, prefix: str = "braze_kernel",
                  threads: int = DEFAULT_THREADS) -> tuple[str, dict]:
    """One source holding every kernel (named `<prefix>_<n>`), and their
    specs by name."""
    unit = render_unit(renderer_type, kernels, (), prefix, threads)
    return unit.source, unit.kernels


@dataclass
class GpuUnit:
    source: str
    kernels: dict  # name -> KernelSpec, in program order
    launches: dict = field(default_factory=dict)  # combo launch function -> its sub-kernels
    # Combo launch function -> (sub-kernel, buffer) of each buffer parameter
    # (codegen/gpu_combo.py: launch_buffers).
    launch_buffers: dict = field(default_factory=dict)


def render_unit(renderer_type, kernels: list, combos: list = (), prefix: str = "braze_kernel",
                threads: int = DEFAULT_THREADS) -> GpuUnit:
    """Every kernel of a function (`kernels`, in program order, a combo's
    sub-kernels where the combo is; fused GEMMs as tiled GEMMs,
    codegen/gpu_gemm.py; flash attentions as codegen/gpu_attention.py
    spells them) named `<prefix>_<n>`; those of `combos`
    as device functions called by one `<prefix>_combo_<m>` launch function
    per combo (codegen/gpu_combo.py)."""
    from braze.codegen import gpu_attention, gpu_gemm

    own_renderers = {"braze.fused_gemm": gpu_gemm.render, "braze.flash_attention": gpu_attention.render}
    analyses = {kernel: KernelAnalysis(kernel, f"{prefix}_{number}") for number, kernel in enumerate(kernels)
                if kernel.operation.name not in own_renderers}
    # A sub-kernel's device function needs its launch's threads: the most of its combo's.
    launch_threads = {}
    for combo in combos:
        members = combo_kernels(combo)
        most = max(renderer_type(analyses[kernel], threads).threads for kernel in members)
        launch_threads.update((kernel, most) for kernel in members)
    parts = [renderer_type.head, GPU_PRELUDE]
    unit = GpuUnit("", {})
    renderers = {}
    for number, kernel in enumerate(kernels):
        if kernel not in analyses:  # a fused GEMM or a flash attention
            source, spec = own_renderers[kernel.operation.name](renderer_type, kernel, f"{prefix}_{number}")
            parts.append(source)
            unit.kernels[spec.name] = spec
            continue
        analysis = analyses[kernel]
        renderer = renderers[kernel] = renderer_type(analysis, threads, launch_threads.get(kernel))
        parts.append(renderer.render())
        spec = analysis.spec()
        spec.threads, spec.strategy = renderer.threads, renderer.strategy
        spec.warp = renderer.warp if renderer.warp_tree else 0
        spec.elements = renderer.elements
        spec.index_bits = 32 if renderer.index == "int" else 64
        unit.kernels[analysis.name] = spec
    if combos:
        from braze.codegen.gpu_combo import render_combo

        for number, combo in enumerate(combos):
            name = f"{prefix}_combo_{number}"
            members = [renderers[kernel] for kernel in combo_kernels(combo)]
            unit.launches[name] = [r.a.name for r in members]
            source, unit.launch_buffers[name] = render_combo(
                name, combo, members, [unit.kernels[r.a.name] for r in members])
            parts.append(source)
    unit.source = "\n\n".join(parts) + "\n"
    return unit
