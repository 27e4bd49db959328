"""Triton: the kernel form printed as `@triton.jit` functions that work on
blocks of points, spelled from this module's own rule table (`tl.*`) over the
shared kernel analysis (codegen/analysis.py).

One module per function: a short prelude (imports, the combine functions the
kernels use), then one `@triton.jit` function per `braze.kernel`, named
after what it computes (`exp_sum_div_2`), with the kernel's MLIR location in
a comment. Every kernel takes its inputs, its results, `failed` (when it can
divide an integer by zero), its dynamic extents `n<d>` and the strides of
each input `s<input>_<dim>` (so broadcast and strided views are read in
place), then its block sizes and `INDEX` as `tl.constexpr`s.

`INDEX` is the type of every index and offset the kernel computes: the
launcher (runtime/triton.py, `index_type`) passes `tl.int32` when every
offset of the call (each input's farthest element through its strides,
each result's size, the domain's points, plus a block) is below 2**31, and
`tl.int64` otherwise; Triton compiles each once. 32-bit index arithmetic
is what a GPU does fastest, and only the call's actual sizes and strides
(strided views of a larger tensor included) can prove it safe.

* Pointwise kernels: program p takes the points p*XBLOCK ... (p+1)*XBLOCK-1
  of the flattened domain, masked at the end.
* Reductions: a program takes XBLOCK parallel points (rows, the first axis
  of a 2-D block) and the reduction points along the second axis:
  - persistent when the reduced extent is static and at most
    `PERSISTENT_LIMIT`: the whole row in one block of RBLOCK (fixed in the
    kernel), every value computed once and kept in registers for every
    `braze.reduce` and store;
  - looped otherwise: per `braze.reduce` one loop over blocks of RBLOCK with
    a running accumulator per lane (the values it needs recomputed in the
    loop), combined across the lanes after the loop; stores of
    reduction-dependent values in one more loop.
* max/min keep NaN (PyTorch's rule); argmax takes the first index of the
  maximum, NaN being the maximum; integer division by zero sets `failed`.
* Half types compute in float32 as the IR says (`arith.extf` after loads,
  `arith.truncf` before stores): a half value that is not only stored is
  rounded to its type and back; stores convert to the result's type.

A `braze.fused_gemm` and a `braze.flash_attention` are tiled `tl.dot`
kernels of their own (codegen/triton/gemm.py, attention.py; the epilogue
spelled by this module's rules), in the same module.

`render_module(kernels, names)` returns the source and each kernel's
`KernelSpec` (`strategy`: "points", "persistent" or "looped"; `threads`:
the schedule's threads per block, from which the launcher's num_warps come;
"gemm" and "attention" for the tiled kernels).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from mlir import ir

from braze.codegen.analysis import (BINARY, BINARY_MATH, CASTS, DIVIDING, KERNEL_BODY_OPS, REDUCTION_KINDS,
                                    UNARY_MATH, WRAPPING, KernelAnalysis, combo_kernels, may_divide_by_zero,
                                    type_name)
from braze.errors import BrazeError, format_location

LANGUAGE = "Triton"
EXTENSION = ".py"
# A static reduced extent up to this is reduced in one block per row.
PERSISTENT_LIMIT = 1024
DEFAULT_THREADS = 256
STRATEGIES = ("points", "persistent", "looped")

# Element types: triton.language's names. Half types compute in float32.
TYPES = {"f64": "tl.float64", "f32": "tl.float32", "f16": "tl.float16", "bf16": "tl.bfloat16",
         "i64": "tl.int64", "i32": "tl.int32", "i16": "tl.int16", "i8": "tl.int8", "i1": "tl.int1",
         "index": "INDEX"}
HALF = ("f16", "bf16")
# Triton signature strings (triton.compile's ASTSource) per element type.
SIGNATURE_TYPES = {"f64": "fp64", "f32": "fp32", "f16": "fp16", "bf16": "bf16", "i64": "i64", "i32": "i32",
                   "i16": "i16", "i8": "i8", "i1": "i1", "index": "i64", "f8E4M3FN": "fp8e4nv", "f8E5M2": "fp8e5"}
UNSIGNED = {"i64": "tl.uint64", "i32": "tl.uint32", "i16": "tl.uint16", "i8": "tl.uint8"}

# Math: triton.language where its interpreter and both GPU backends have
# the function, libdevice (triton.language.extra) for the rest.
FUNCTIONS = {
    "math.exp": "tl.exp", "math.exp2": "tl.exp2", "math.log": "tl.log", "math.log2": "tl.log2",
    "math.sin": "tl.sin", "math.cos": "tl.cos", "math.sqrt": "tl.sqrt_rn", "math.rsqrt": "tl.rsqrt",
    "math.erf": "tl.erf", "math.floor": "tl.floor", "math.ceil": "tl.ceil", "math.absf": "tl.abs",
    "math.expm1": "libdevice.expm1", "math.log1p": "libdevice.log1p", "math.tanh": "libdevice.tanh",
    "math.tan": "libdevice.tan", "math.asin": "libdevice.asin", "math.acos": "libdevice.acos",
    "math.atan": "libdevice.atan", "math.sinh": "libdevice.sinh", "math.cosh": "libdevice.cosh",
    "math.trunc": "libdevice.trunc", "math.roundeven": "libdevice.rint",
    "math.powf": "libdevice.pow", "math.atan2": "libdevice.atan2", "arith.remf": "libdevice.fmod",
}
# Ops spelled by a template over their operands ({0}, {1}, {2}). Integer
# arithmetic wraps in Triton as in PyTorch.
TEMPLATES = {
    "arith.addf": "{0} + {1}", "arith.subf": "{0} - {1}", "arith.mulf": "{0} * {1}", "arith.divf": "{0} / {1}",
    "arith.addi": "{0} + {1}", "arith.subi": "{0} - {1}", "arith.muli": "{0} * {1}",
    "arith.andi": "{0} & {1}", "arith.ori": "{0} | {1}", "arith.xori": "{0} ^ {1}",
    "arith.negf": "-{0}",
    "arith.maximumf": "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    "arith.minimumf": "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    "arith.maxsi": "tl.maximum({0}, {1})", "arith.minsi": "tl.minimum({0}, {1})",
    "math.absi": "tl.abs({0})",
    "arith.select": "tl.where({0}, {1}, {2})",
    # C's truncating division and remainder (Triton's // and % on integers);
    # a zero divisor gives 0 (and sets `failed`), MIN / -1 wraps.
    "arith.divsi": "_divsi({0}, {1})", "arith.remsi": "_remsi({0}, {1})",
}
CMPF = {1: "==", 2: ">", 3: ">=", 4: "<", 5: "<=", 13: "!="}
CMPI_SIGNED = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">="}
CMPI_UNSIGNED = {6: "<", 7: "<=", 8: ">", 9: ">="}

# The prelude's helpers, emitted when a kernel uses them.
HELPERS = {
    "_divsi": '''\
@triton.jit
def _divsi(a, b):
    safe = tl.where((b == 0) | (b == -1), 1, b)
    return tl.where(b == 0, 0, tl.where(b == -1, 0 - a, a // safe))''',
    "_remsi": '''\
@triton.jit
def _remsi(a, b):
    safe = tl.where((b == 0) | (b == -1), 1, b)
    return tl.where((b == 0) | (b == -1), 0, a % safe)''',
    "_flag_zero_divisor": '''\
@triton.jit
def _flag_zero_divisor(failed, divisor, active):
    # (`!= 0`: the interpreter holds a scalar & block of int1 as int64 data.)
    hit = ((divisor == 0) & active) != 0
    tl.store(failed + tl.zeros_like(hit.to(tl.int32)), 1, mask=hit)''',
    # Spelled in integers so that Triton's interpreter (whose float32 ->
    # bfloat16 conversion does not round to nearest even) rounds as a GPU does.
    "_round_bf16": '''\
@triton.jit
def _round_bf16(x):
    # float32 -> the nearest bfloat16 (ties to even), as float32; NaN stays NaN.
    bits = x.to(tl.uint32, bitcast=True)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return tl.where(x != x, x, rounded.to(tl.float32, bitcast=True))''',
    # tl.max and tl.min skip NaN; PyTorch's are NaN when any value is.
    "_max_keep_nan": '''\
@triton.jit
def _max_keep_nan(values, axis: tl.constexpr):
    nan = tl.max((values != values).to(tl.int8), axis=axis, keep_dims=True)
    return tl.where(nan != 0, float("nan"), tl.max(values, axis=axis, keep_dims=True))''',
    "_min_keep_nan": '''\
@triton.jit
def _min_keep_nan(values, axis: tl.constexpr):
    nan = tl.max((values != values).to(tl.int8), axis=axis, keep_dims=True)
    return tl.where(nan != 0, float("nan"), tl.min(values, axis=axis, keep_dims=True))''',
    "_argmax": '''\
@triton.jit
def _argmax(values, at, lowest, axis: tl.constexpr):
    # The first index `at` of the maximum, NaN being the maximum (PyTorch's
    # rule); `at` < 0 marks points outside the row; 0 for an empty row.
    at = at.to(tl.int64)
    valid = at >= 0
    best = _max_keep_nan(tl.where(valid, values, lowest), axis)
    hit = valid & ((values == best) | ((values != values) & (best != best)))
    first = tl.min(tl.where(hit, at, 4611686018427387904), axis=axis, keep_dims=True)
    return tl.where(first == 4611686018427387904, 0, first)''',
}

# Reduction kinds -> (identity, combine) per value family.
_FLOAT_REDUCTIONS = {"add": ("0.0", "sum"), "max": ('float("-inf")', "_max_keep_nan"),
                     "min": ('float("inf")', "_min_keep_nan")}

# Op names -> a word for kernel names.
_WORDS = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div",
          "arith.maximumf": "maximum", "arith.minimumf": "minimum", "arith.negf": "neg",
          "arith.select": "where", "arith.cmpf": "cmp", "arith.remf": "fmod", "arith.divsi": "div",
          "arith.remsi": "rem", "math.powf": "pow"}
_REDUCTION_WORDS = {"add": "sum", "max": "amax", "min": "amin", "and": "all", "or": "any", "argmax": "argmax"}


def next_power_of_two(value: int) -> int:
    return 1 << max(0, value - 1).bit_length()


def kernel_title(analysis: KernelAnalysis) -> str:
    """What a kernel computes, in a few words: its reductions, else its
    first math ops (`amax_sub_exp`, `add_tanh`)."""
    reductions = [_REDUCTION_WORDS[op.attributes["kind"].value] for op in analysis.ops
                  if op.operation.name == "braze.reduce"]
    words = []
    for op in analysis.ops:
        name = op.operation.name
        word = _WORDS.get(name) or (name[5:] if name.startswith("math.") else None)
        if word and word not in words:
            words.append(word)
    chosen = (reductions + [w for w in words if w not in reductions])[:3]
    return "_".join(dict.fromkeys(chosen)) or "copy"


class TritonRenderer:
    """Prints one analysed kernel as a `@triton.jit` function."""

    language = LANGUAGE
    extension = EXTENSION

    def __init__(self, analysis: KernelAnalysis, threads: int = DEFAULT_THREADS, sub_kernel: bool = False):
        """`sub_kernel`: a combo's sub-kernel, called by the combo's launch
        function with its program number `pid` (see codegen/triton/combo.py)."""
        self.a = a = analysis
        self.sub_kernel = sub_kernel
        self.threads = threads
        schedule = a.kernel.attributes["braze.schedule"] if "braze.schedule" in a.kernel.attributes else None
        if schedule is not None:
            self.threads = ir.IntegerAttr(schedule["threads"]).value
        if self.threads < 32 or self.threads & (self.threads - 1):
            raise BrazeError(f"kernel {a.name}: threads per block must be a power of two of at least 32, "
                             f"got {self.threads}")
        reduce_points = math.prod(a.domain[d] for d in a.reduce) if None not in [a.domain[d] for d in a.reduce] else None
        if not a.reduce:
            self.strategy = "points"
        elif reduce_points is not None and reduce_points <= PERSISTENT_LIMIT:
            self.strategy = "persistent"
        else:
            self.strategy = "looped"
        self.rblock = next_power_of_two(reduce_points) if self.strategy == "persistent" else None
        self.result_shapes = analysis.spec().result_shapes
        self.names: dict[ir.Value, str] = {}
        # Per value: the block axes it spans ("x": parallel, "r": reduction).
        self.axes: dict[ir.Value, frozenset] = {}
        self.helpers: set[str] = set()
        # bf16 values already rounded (loads, conversions used elsewhere).
        self.rounded: set[ir.Value] = set()
        self.counter = 0

    # -- naming and errors ---------------------------------------------
    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def fail(self, op, message: str) -> BrazeError:
        return BrazeError(f"{self.language} renderer: '{op.operation.name}' at "
                          f"{format_location(op.operation.location)}: {message}")

    def type_of(self, op, type_: ir.Type) -> str:
        """The type a value of `type_` computes in."""
        name = type_name(type_)
        if name not in TYPES:
            raise self.fail(op, f"has no {self.language} type for {name}")
        return "tl.float32" if name in HALF else TYPES[name]

    # The braze.reduce kinds `_reduce` spells.
    reductions = ("add", "max", "min", "and", "or", "argmax")

    @classmethod
    def missing_rules(cls) -> list[str]:
        """The kernel-body ops (and reduction kinds) this renderer has no
        spelling for."""
        spelled = set(FUNCTIONS) | set(TEMPLATES) | set(CASTS) | {"braze.store"}
        if set(REDUCTION_KINDS) <= set(cls.reductions):
            spelled.add("braze.reduce")
        return sorted(name for name in KERNEL_BODY_OPS
                      if name not in spelled and not hasattr(cls, "op_" + name.replace(".", "_")))

    # -- the kernel's parameters ---------------------------------------
    def parameters(self) -> list[str]:
        a = self.a
        params = abi_parameters(a.inputs, len(a.results), a.can_fail, a.domain)
        if self.sub_kernel:
            params.append("pid")
        params.append("XBLOCK: tl.constexpr")
        if self.strategy == "looped":
            params.append("RBLOCK: tl.constexpr")
        # The type of every index and offset: tl.int32 when the launcher
        # finds every offset of this call below 2**31, else tl.int64.
        params.append("INDEX: tl.constexpr")
        return params

    # -- the kernel -----------------------------------------------------
    def render(self) -> str:
        a = self.a
        lines = [f"    # {source_lines(a.kernel.operation.location)}: domain "
                 f"[{', '.join('?' if s is None else str(s) for s in a.domain)}]"
                 + (f" reduce {a.reduce}" if a.reduce else "")]
        for dim, size in enumerate(a.domain):
            self.names[a.arguments[a.rank + dim]] = f"n{dim}"
            self.axes[a.arguments[a.rank + dim]] = frozenset()
            if size is not None:
                lines.append(f"    n{dim} = tl.full([], {size}, INDEX)")
            else:
                lines.append(f"    n{dim} = n{dim}.to(INDEX)")
        for number, value in enumerate(a.inputs):
            strides = [f"s{number}_{d}" for d in range(value.type.rank)]
            if strides:
                lines.append(f"    {', '.join(strides)} = {', '.join(f'{n}.to(INDEX)' for n in strides)}")
        for number in range(len(a.inputs)):
            self.names[a.arguments[2 * a.rank + number]] = f"in{number}"
        xnumel = " * ".join(f"n{d}" for d in a.parallel) or "1"
        pid = "pid.to(INDEX) * XBLOCK" if self.sub_kernel else "tl.program_id(0).to(INDEX) * XBLOCK"
        if not a.reduce:
            lines.append(f"    x = {pid} + tl.arange(0, XBLOCK)")
        else:
            lines.append(f"    x = {pid} + tl.arange(0, XBLOCK)[:, None]")
        lines.append(f"    xmask = x < {xnumel}")
        lines += self._decode("x", a.parallel, "x", "    ")
        if self.strategy == "persistent":
            lines.append(f"    RBLOCK: tl.constexpr = {self.rblock}")
        if a.reduce:
            lines.append(f"    rnumel = {' * '.join(f'n{d}' for d in a.reduce)}")
        if self.strategy == "persistent":
            lines.append("    r = tl.arange(0, RBLOCK)[None, :]")
            lines.append("    rmask = r < rnumel")
            lines += self._decode("r", a.reduce, "r", "    ")
        for op in a.ops:
            name = op.operation.name
            if name == "braze.reduce":
                self._reduce(op, lines)
            elif name == "braze.store":
                if self.strategy != "looped" or not a.per_reduction_point(op):
                    lines.append("    " + self._store(op))
            elif self.strategy != "looped" or not a.is_full(op):
                self._define(op, lines, "    ")
        stores = a.stages[-1].stores if self.strategy == "looped" and a.stages else []
        if stores:
            body = self._loop_head()
            saved = dict(self.names)
            for op in a.needed_full_ops([s.operation.operands[0] for s in stores], None):
                self._define(op, body, "        ")
            body += ["        " + self._store(op) for op in stores]
            self.names = saved
            lines += body
        signature = f"def {a.name}({', '.join(self.parameters())}):"
        return "\n".join(["@triton.jit", signature] + lines)

    def _decode(self, linear: str, dims: list[int], axis: str, indent: str) -> list[str]:
        """Row-major indices `i<d>` of `linear` over `dims`."""
        lines = []
        for k, d in enumerate(dims):
            inner = " * ".join(f"n{e}" for e in dims[k + 1:])
            value = (f"{linear} // ({inner})" if "*" in inner else f"{linear} // {inner}") if inner else linear
            if k > 0 and inner:
                value = f"({value})"
            if k > 0:
                value = f"{value} % n{d}"
            lines.append(f"{indent}i{d} = {value}")
            self.names[self.a.arguments[d]] = f"i{d}"
            self.axes[self.a.arguments[d]] = frozenset(axis)
        return lines

    def _loop_head(self) -> list[str]:
        """The head of a loop over blocks of RBLOCK reduction points (it names
        the reduction indices)."""
        lines = ["    for roffset in range(0, rnumel, RBLOCK):",
                 "        r = roffset + tl.arange(0, RBLOCK)[None, :]",
                 "        rmask = r < rnumel"]
        return lines + self._decode("r", self.a.reduce, "r", "        ")

    # -- masks ----------------------------------------------------------
    @staticmethod
    def mask(axes) -> str | None:
        """The mask of a block spanning `axes`."""
        parts = [m for axis, m in (("x", "xmask"), ("r", "rmask")) if axis in axes]
        return " & ".join(parts) or None

    def block(self, axes) -> str:
        """The block shape spanning `axes`."""
        if not self.a.reduce:
            return "[XBLOCK]"
        return f"[{'XBLOCK' if 'x' in axes else 1}, {'RBLOCK' if 'r' in axes else 1}]"

    # -- ops ------------------------------------------------------------
    def _define(self, op, lines: list[str], indent: str) -> None:
        result = op.operation.results[0]
        self.axes[result] = frozenset().union(*(self.axes.get(v, frozenset()) for v in op.operation.operands))
        name = op.operation.name
        if name == "arith.constant" and type_name(result.type) == "index":
            self.names[result] = str(op.attributes["value"].value)  # index literals: plain ints
            return
        expression = self.expression(op)
        if may_divide_by_zero(op):
            self.helpers.add("_flag_zero_divisor")
            active = self.mask(self.axes[result]) or "True"
            lines.append(f"{indent}_flag_zero_divisor(failed, {self.names[op.operation.operands[1]]}, {active})")
        if expression in self.names.values():  # a conversion to the type it computes in already
            self.names[result] = expression
            return
        variable = self.fresh()
        self.names[result] = variable
        lines.append(f"{indent}{variable} = {expression}")

    def expression(self, op) -> str:
        name = op.operation.name
        operands = [self.names[v] for v in op.operation.operands]
        if name in FUNCTIONS:
            return f"{FUNCTIONS[name]}({', '.join(operands)})"
        if name in TEMPLATES:
            for helper in HELPERS:
                if TEMPLATES[name].startswith(helper + "("):
                    self.helpers.add(helper)
            return TEMPLATES[name].format(*operands)
        if name in CASTS:
            return self.cast(op, operands[0])
        rule = getattr(self, "op_" + name.replace(".", "_"), None)
        if rule is None:
            raise self.fail(op, f"has no {self.language} form")
        return rule(op, operands)

    def cast(self, op, value: str) -> str:
        source, target = op.operation.operands[0].type, op.operation.results[0].type
        source_name, target_name = type_name(source), type_name(target)
        name = op.operation.name
        to = self.type_of(op, target)
        if value.lstrip("-").isdigit():  # an index literal
            return f"tl.full([], {value}, {to})"
        if name == "arith.truncf" and target_name in HALF:
            if _only_stored(op):
                return value  # the store rounds it once
            if source_name == "f64":
                value = f"{value}.to(tl.float32)"
            self.rounded.add(op.operation.results[0])
            if target_name == "bf16":
                self.helpers.add("_round_bf16")
                return f"_round_bf16({value})"
            return f"{value}.to(tl.float16).to(tl.float32)"
        if self.type_of(op, source) == to and name in ("arith.extf", "arith.truncf"):
            return value  # f16/bf16 -> f32 (half values compute in float32 already)
        if source_name == "i1":
            if name in ("arith.extsi", "arith.sitofp"):
                return f"0 - {value}.to({to})"  # a true i1 is -1 as a signed number
            return f"{value}.to({to})"
        if target_name == "i1":  # arith.trunci: the lowest bit
            return f"({value} & 1) != 0"
        if name in ("arith.extui", "arith.uitofp"):
            return f"{value}.to({UNSIGNED[source_name]}, bitcast=True).to({to})"
        return f"{value}.to({to})"

    def op_arith_constant(self, op, operands) -> str:
        attribute = op.attributes["value"]
        type_ = op.operation.results[0].type
        name = type_name(type_)
        if isinstance(attribute, ir.FloatAttr):
            value = attribute.value
            literal = (f'float("{"-" if value < 0 else ""}inf")' if math.isinf(value)
                       else 'float("nan")' if math.isnan(value) else repr(float(value)))
            if name in ("f32", *HALF):
                return literal if not (math.isinf(value) or math.isnan(value)) else f"tl.full([], {literal}, tl.float32)"
            return f"tl.full([], {literal}, {TYPES[name]})"
        if isinstance(attribute, (ir.IntegerAttr, ir.BoolAttr)):
            if name == "i1":
                return f"tl.full([], {bool(attribute.value)}, tl.int1)"
            return f"tl.full([], {attribute.value}, {TYPES[name]})"
        raise self.fail(op, f"has no {self.language} literal for {attribute}")

    def op_arith_cmpf(self, op, operands) -> str:
        predicate = op.attributes["predicate"].value
        if predicate not in CMPF:
            raise self.fail(op, f"unsupported predicate {predicate}")
        return f"{operands[0]} {CMPF[predicate]} {operands[1]}"

    def op_arith_cmpi(self, op, operands) -> str:
        predicate = op.attributes["predicate"].value
        if predicate in CMPI_SIGNED:
            return f"{operands[0]} {CMPI_SIGNED[predicate]} {operands[1]}"
        element = type_name(op.operation.operands[0].type)
        if element == "i1":
            return f"{operands[0]} {CMPI_UNSIGNED[predicate]} {operands[1]}"  # Triton's i1 is unsigned
        if element == "index":  # INDEX may be 32 bits: compare as the 64-bit index it stands for
            a, b = (f"{x}.to(tl.int64).to(tl.uint64, bitcast=True)" for x in operands)
        else:
            a, b = (f"{x}.to({UNSIGNED[element]}, bitcast=True)" for x in operands)
        return f"{a} {CMPI_UNSIGNED[predicate]} {b}"

    def op_tensor_extract(self, op, operands) -> str:
        number = self.a.input_number(op.operation.operands[0])
        terms = [f"{index} * s{number}_{dim}" for dim, index in enumerate(operands[1:]) if index != "0"]
        axes = frozenset().union(*(self.axes.get(v, frozenset()) for v in op.operation.operands[1:]))
        self.axes[op.operation.results[0]] = axes
        mask = self.mask(axes)
        load = f"tl.load(in{number} + {' + '.join(terms) or '0'}{f', mask={mask}' if mask else ''})"
        if type_name(op.operation.results[0].type) in HALF:
            load += ".to(tl.float32)"
            self.rounded.add(op.operation.results[0])
        return load

    # -- stores ---------------------------------------------------------
    def _store(self, op) -> str:
        a = self.a
        value = op.operation.operands[0]
        number = op.attributes["result"].value
        indices = op.operation.operands[1:]
        dims = [str(s) if isinstance(s, int) else f"n{s[1]}" for s in self.result_shapes[number]]
        offset = ""
        for dim, index in enumerate(indices):
            name = self.names[index]
            if dim and offset and dims[dim] != "1":
                offset = f"({offset}) * {dims[dim]}" if " + " in offset else f"{offset} * {dims[dim]}"
            if name != "0":
                offset = f"{offset} + {name}" if offset else name
        offset = offset or "0"
        axes = frozenset().union(*(self.axes.get(v, frozenset()) for v in indices))
        # A value that varies along an axis is written per point of it; the
        # pointer covers the block the store runs over.
        covered = frozenset("x") | (self.axes.get(value, frozenset()) & frozenset("r")) | axes
        if a.per_reduction_point(op):
            covered |= frozenset("r")
        pointer = f"out{number} + {offset}"
        if axes != covered:
            pointer = f"tl.broadcast_to({pointer}, {self.block(covered)})"
        mask = self.mask(covered)
        guards = [f"(i{d} == 0)" for d in a.store_guards(op)]
        mask = " & ".join([mask] + guards)
        stored = self.names[value]
        if type_name(value.type) == "bf16" and value not in self.rounded:
            self.helpers.add("_round_bf16")
            stored = f"_round_bf16({stored})"  # the store's own conversion truncates what is left
        return f"tl.store({pointer}, {stored}, mask={mask})"

    # -- reductions -----------------------------------------------------
    def _reduce(self, op, lines: list[str]) -> None:
        a = self.a
        kind = op.attributes["kind"].value
        operand = op.operation.operands[0]
        result = op.operation.results[0]
        element = type_name(operand.type)
        value_type = self.type_of(op, operand.type)
        name = self.fresh()
        full = "[XBLOCK, RBLOCK]"
        saved = dict(self.names)
        body: list[str] = self._loop_head() if self.strategy == "looped" else []
        if self.strategy == "looped":
            for needed in a.needed_full_ops([operand], op):
                self._define(needed, body, "        ")
        value = self.names[operand]
        self.names = {**saved, result: name}
        self.axes[result] = frozenset("x")
        if kind == "argmax":
            self.helpers |= {"_argmax", "_max_keep_nan"}
            lowest = 'float("-inf")' if value_type in ("tl.float32", "tl.float64") else str(-(2 ** (_bits(element) - 1)))
            if self.strategy == "persistent":
                values, at = f"tl.broadcast_to({value}, {full})", f"tl.broadcast_to(tl.where(rmask, r, -1), {full})"
            else:
                values, at = f"{name}_v", f"{name}_at"
                lines.append(f"    {name}_v = tl.zeros({full}, {value_type})")
                lines.append(f"    {name}_at = tl.full({full}, -1, tl.int64)")
                # A lane sees its points in increasing order: a tie keeps the earlier one.
                body.append(f"        take = rmask & (({name}_at < 0) | ({value} > {name}_v) | "
                            f"(({value} != {value}) & ({name}_v == {name}_v)))")
                body.append(f"        {name}_v = tl.where(take, {value}, {name}_v)")
                body.append(f"        {name}_at = tl.where(take, r, {name}_at)")
                lines += body
            lines.append(f"    {name} = _argmax({values}, {at}, {lowest}, 1)")
            return
        if element == "i1":
            identity, combine = ("0", "max") if kind in ("max", "or") else ("1", "min")
            value = f"{value}.to(tl.int32)"
            value_type, final = "tl.int32", " != 0"
        elif value_type in ("tl.float32", "tl.float64"):
            if kind not in _FLOAT_REDUCTIONS:
                raise self.fail(op, f"has no {self.language} form for reduction kind '{kind}' of {element}")
            identity, combine = _FLOAT_REDUCTIONS[kind]
            final = ""
        else:
            bits = _bits(element)
            identities = {"add": "0", "max": str(-(2 ** (bits - 1))), "min": str(2 ** (bits - 1) - 1)}
            if kind not in identities:
                raise self.fail(op, f"has no {self.language} form for reduction kind '{kind}' of {element}")
            identity, combine, final = identities[kind], {"add": "sum", "max": "max", "min": "min"}[kind], ""
        if combine.startswith("_"):
            self.helpers.add(combine)
            reduce = f"{combine}({{}}, 1)"
        else:
            reduce = f"tl.{combine}({{}}, axis=1, keep_dims=True)"
        typed = identity if value_type == "tl.float32" else f"tl.full([], {identity}, {value_type})"
        masked = f"tl.where(rmask, {value}, {typed})"
        if self.strategy == "persistent":
            lines.append(f"    {name} = {reduce.format(f'tl.broadcast_to({masked}, {full})')}{final}")
            return
        lines.append(f"    {name}_acc = tl.full({full}, {identity}, {value_type})")
        if combine == "sum":
            body.append(f"        {name}_acc = {name}_acc + {masked}")
        else:
            keep_nan = ", propagate_nan=tl.PropagateNan.ALL" if combine.startswith("_") else ""
            function = "maximum" if "max" in combine else "minimum"
            body.append(f"        {name}_acc = tl.{function}({name}_acc, {masked}{keep_nan})")
        lines += body
        lines.append(f"    {name} = {reduce.format(f'{name}_acc')}{final}")


def abi_parameters(inputs: list, results: int, can_fail: bool, domain: list) -> list[str]:
    """The parameters every kernel starts with: its inputs (ir.Values), its
    `results`, `failed` when it `can_fail`, the dynamic extents of `domain`,
    every input's strides."""
    params = [f"in{n}" for n in range(len(inputs))] + [f"out{n}" for n in range(results)]
    if can_fail:
        params.append("failed")
    # Sizes arrive 64-bit whatever their value (one signature; Triton would
    # pass small ones as i32); a braze.kernel converts them to its INDEX.
    params += [f"n{d}: tl.int64" for d, size in enumerate(domain) if size is None]
    params += [f"s{n}_{d}: tl.int64" for n, value in enumerate(inputs) for d in range(value.type.rank)]
    return params


def source_lines(location) -> str:
    """The file:line:col places of a (fused) location, once each."""
    places = re.findall(r'"([^"]*)":(\d+):(\d+)', str(location))
    if not places:
        return format_location(location)
    return ", ".join(dict.fromkeys(f"{Path(f).name}:{line}:{col}" for f, line, col in places))


def _bits(element: str) -> int:
    return 64 if element == "index" else int(element[1:])


def _only_stored(op) -> bool:
    uses = list(op.operation.results[0].uses)
    return bool(uses) and all(use.owner.name == "braze.store" for use in uses)


HEAD = '''\
# braze Triton kernels: one @triton.jit function per braze.kernel.
import triton
import triton.language as tl
from triton.language.extra import libdevice'''


def render_module(kernels: list, threads: int | None = None) -> tuple[str, dict]:
    """The module holding every kernel, and their specs by name."""
    source, specs, _ = render_unit(kernels, (), threads)
    return source, specs


def render_unit(kernels: list, combos: list, threads: int | None = None) -> tuple[str, dict, dict]:
    """The module holding every kernel (`kernels`: in program order; those
    of `combos` as functions their combo's launch function calls), their
    specs by name, and per combo its launch function's name -> its
    sub-kernels."""
    from braze.codegen.triton import attention, gemm
    from braze.codegen.triton.combo import render_combo

    parts = []
    specs = {}
    helpers: set[str] = set()
    inside = {kernel for combo in combos for kernel in combo_kernels(combo)}
    names = {}
    tiled = {"braze.fused_gemm": gemm.render, "braze.flash_attention": attention.render}
    for number, kernel in enumerate(kernels):
        if kernel.operation.name in tiled:
            source, spec, needed = tiled[kernel.operation.name](kernel, number)
            parts.append(source)
            helpers |= needed
            specs[spec.name] = spec
            names[kernel] = spec.name
            continue
        analysis = KernelAnalysis(kernel, f"k{number}")
        analysis.name = f"{kernel_title(analysis)}_{number}"
        spec = analysis.spec()
        renderer = TritonRenderer(analysis, threads or DEFAULT_THREADS, sub_kernel=kernel in inside)
        parts.append(renderer.render())
        helpers |= renderer.helpers
        spec.threads, spec.strategy = renderer.threads, renderer.strategy
        specs[analysis.name] = spec
        names[kernel] = analysis.name
    launches = {}
    for number, combo in enumerate(combos):
        members = [names[kernel] for kernel in combo_kernels(combo)]
        name = f"combo_{number}"
        launches[name] = members
        parts.append(render_combo(name, combo, [specs[m] for m in members]))
    prelude = [HELPERS[name] for name in HELPERS if name in helpers]
    return "\n\n\n".join([HEAD, *prelude, *parts]) + "\n", specs, launches


assert set(BINARY) | set(WRAPPING) | set(DIVIDING) <= set(TEMPLATES)
assert {f"math.{name}" for name in UNARY_MATH} | set(BINARY_MATH) <= set(FUNCTIONS)
