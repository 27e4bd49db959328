"""The base of every C-like renderer: scalar ops, loads and stores of an
analysed `braze.kernel`, spelled from rule tables.

A renderer subclass sets the tables (type names, operator and function
names, literal spellings) and overrides the few methods whose form differs
(how a failure is reported, how an integer literal is cast); it adds the
kernel's structure (loops on a CPU, threads and blocks on a GPU) on top.
Nothing here decides anything: the analysis (`codegen/analysis.py`) says what
is computed where; a renderer only spells it.

Operands are always named values (`v3`, `i0`, `n1`), so the spellings may
repeat an operand without evaluating anything twice.
"""

from __future__ import annotations

import math

from mlir import ir

from braze.codegen.analysis import (BINARY, BINARY_MATH, CASTS, DIVIDING, KERNEL_BODY_OPS, UNARY_MATH, WRAPPING,
                                    KernelAnalysis, may_divide_by_zero, type_name)
from braze.errors import BrazeError, format_location

# arith.cmpf / arith.cmpi predicates -> C operators. (Unordered float
# predicates other than `une` never appear in the kernel form.)
CMPF = {1: "==", 2: ">", 3: ">=", 4: "<", 5: "<=", 13: "!="}
CMPI = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">=", 6: "<", 7: "<=", 8: ">", 9: ">="}
BINARY_OPERATORS = {"arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/",
                    "arith.andi": "&", "arith.ori": "|", "arith.xori": "^"}
WRAPPING_OPERATORS = {"arith.addi": "+", "arith.subi": "-", "arith.muli": "*"}
assert set(BINARY_OPERATORS) == set(BINARY) and set(WRAPPING_OPERATORS) == set(WRAPPING)


class CStyleRenderer:
    """Spells the scalar ops of one kernel. Subclasses fill the tables."""

    language = "C"
    extension = ".c"
    # Element type (analysis.type_name) -> how memory holds it, and what it
    # computes in (half types compute in float between loads and stores).
    storage_types: dict[str, str] = {}
    compute_types: dict[str, str] = {}
    # The unsigned 64-bit type: wrapping integer arithmetic computes in it.
    uint64 = "uint64_t"
    # math.<name> (and math.powf, math.atan2, arith.remf) -> function name,
    # per compute type ("float", "double").
    functions: dict[str, dict[str, str]] = {}
    # Helper functions of the prelude (every target defines them alike).
    nan_max, nan_min = "bz_nan_max", "bz_nan_min"
    half_load = {"bf16": "bz_bf16_to_f32", "f16": "bz_f16_to_f32"}
    half_store = {"bf16": "bz_f32_to_bf16", "f16": "bz_f32_to_f16"}
    half_round = {"bf16": "bz_round_bf16", "f16": "bz_round_f16"}
    bool_literals = ("false", "true")
    # Ops spelled by a template over their operands ({0}, {1}) and the
    # result's compute type ({type}); the others have an op_<dialect>_<name> rule.
    templates = {
        "arith.negf": "-{0}",
        "arith.maximumf": "{nan_max}({0}, {1})",
        "arith.minimumf": "{nan_min}({0}, {1})",
        "arith.maxsi": "({0} > {1} ? {0} : {1})",
        "arith.minsi": "({0} < {1} ? {0} : {1})",
        "math.absi": "({0} < 0 ? ({type})(0 - ({uint64}){0}) : {0})",
        "arith.select": "({0} ? {1} : {2})",
    }
    int64_min = "INT64_MIN"

    def __init__(self, analysis: KernelAnalysis):
        self.a = analysis
        self.names: dict[ir.Value, str] = {}
        self.counter = 0

    # -- tables ---------------------------------------------------------
    def storage_type(self, type_: ir.Type) -> str:
        return self._type(self.storage_types, type_)

    def compute_type(self, type_: ir.Type) -> str:
        return self._type(self.compute_types, type_)

    def _type(self, table: dict, type_: ir.Type) -> str:
        name = type_name(type_)
        if name not in table:
            raise BrazeError(f"kernel {self.a.name}: the {self.language} renderer has no type for {name}")
        return table[name]

    def function(self, op, name: str, c_type: str) -> str:
        spelled = self.functions.get(name, {}).get(c_type)
        if spelled is None:
            raise self.fail(op, f"has no {self.language} form for {c_type}")
        return spelled

    # -- spellings a subclass may change -------------------------------
    def float_literal(self, value: float, c_type: str) -> str:
        if math.isnan(value):
            return self.special_float("nan", c_type)
        if math.isinf(value):
            return ("-" if value < 0 else "") + self.special_float("inf", c_type)
        return repr(float(value)) + ("f" if c_type == "float" else "")

    def special_float(self, kind: str, c_type: str) -> str:
        """`kind` is "nan" or "inf"."""
        raise NotImplementedError

    def int_literal(self, value: int, c_type: str) -> str:
        return f"(({c_type}){value})"

    def cast(self, c_type: str, expression: str) -> str:
        return f"({c_type})({expression})"

    def failure(self, c_type: str) -> str:
        """An expression that records an integer division by zero and yields 0."""
        raise NotImplementedError

    # -- naming ---------------------------------------------------------
    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def fail(self, op, message: str) -> BrazeError:
        return BrazeError(
            f"{self.language} renderer: '{op.operation.name}' at "
            f"{format_location(op.operation.location)}: {message}")

    # -- memory ---------------------------------------------------------
    def result_dim(self, number: int, dim: int) -> str:
        """Dim `dim` of result `number`: static, or read from `sizes`."""
        size = self.a.results[number].type.shape[dim]
        if size != ir.ShapedType.get_dynamic_size():
            return str(size)
        return f"sizes[{self.a.sizes_offset('result', number) + dim}]"

    def offset(self, which: str, number: int, indices: list[str]) -> str:
        """The element offset of `indices`: results are contiguous row-major;
        inputs may be views, read through their strides (`stride<n>_<dim>`,
        the innermost being 1)."""
        if not indices:
            return "0"
        if which == "input":
            terms = [f"{index} * stride{number}_{dim}" for dim, index in enumerate(indices[:-1])]
            return " + ".join(terms + [indices[-1]])
        expression = indices[0]
        for dim in range(1, len(indices)):
            expression = f"({expression}) * {self.result_dim(number, dim)} + {indices[dim]}"
        return expression

    def open_reduce_stage(self, op, body):
        """What every renderer's `braze.reduce` stage starts from: the
        reduction kind, the computed value's type, a fresh name for the
        accumulator, the lines computing one reduction point (`body(roots,
        before)` spells the stage's ops in the renderer's loop form, then the
        stage's stores), the reduced value's expression and the names before
        the stage (to restore once the loop is closed)."""
        operand = op.operation.operands[0]
        value_type = self.compute_type(operand.type)
        name = self.fresh()
        saved = dict(self.names)
        stage = next(stage for stage in self.a.stages if stage.reduce is op)
        lines = body(stage.roots, stage.before) + [self.store_line(store) for store in stage.stores]
        return op.attributes["kind"].value, value_type, name, lines, self.names[operand], saved

    def store_line(self, op) -> str:
        """The assignment of a braze.store, under its guard."""
        value = op.operation.operands[0]
        number = op.attributes["result"].value
        indices = [self.names[v] for v in op.operation.operands[1:]]
        expression = self.names[value]
        element = type_name(value.type)
        if element in self.half_store:
            expression = f"{self.half_store[element]}({expression})"
        target = f"out{number}[{self.offset('result', number, indices)}] = {expression};"
        guards = [f"i{dim} == 0" for dim in self.a.store_guards(op)]
        if guards:
            target = f"if ({' && '.join(guards)}) {target}"
        return target

    # -- scalar ops -----------------------------------------------------
    def expression(self, op) -> str:
        """The expression of a scalar op over already-named operands."""
        name = op.operation.name
        operands = [self.names[v] for v in op.operation.operands]
        result_type = op.operation.results[0].type
        c_type = self.compute_type(result_type)
        if name in BINARY_OPERATORS:
            expression = f"{operands[0]} {BINARY_OPERATORS[name]} {operands[1]}"
            return self.cast(c_type, expression) if name in ("arith.andi", "arith.ori", "arith.xori") else expression
        if name in WRAPPING_OPERATORS:
            # Integer arithmetic wraps, as in PyTorch: compute it unsigned.
            symbol = WRAPPING_OPERATORS[name]
            if type_name(result_type) == "i1":
                return f"({c_type})(({operands[0]} {symbol} {operands[1]}) & 1)"
            if type_name(result_type) == "index":
                # A position in a tensor, never near overflow: signed, so the
                # C compiler sees a read at `i + 32` as contiguous in i (the
                # unsigned form makes it a gather, which bf16 has none of).
                return f"{operands[0]} {symbol} {operands[1]}"
            return f"({c_type})(({self.uint64}){operands[0]} {symbol} ({self.uint64}){operands[1]})"
        if name in DIVIDING:
            # b == 0 fails the kernel (PyTorch raises); INT_MIN / -1 wraps
            # (and its remainder is 0) rather than trapping.
            a, b = operands
            if name == "arith.divsi":
                by_minus_one = f"({c_type})(0 - ({self.uint64}){a})"
                quotient = f"({c_type})({a} / {b})"
            else:
                by_minus_one, quotient = self.int_literal(0, c_type), f"({c_type})({a} % {b})"
            if not may_divide_by_zero(op):
                return quotient  # a positive constant divisor: neither 0 nor -1
            return f"({b} == 0 ? {self.failure(c_type)} : {b} == -1 ? {by_minus_one} : {quotient})"
        if name.startswith("math.") and name[5:] in UNARY_MATH:
            return f"{self.function(op, name, c_type)}({operands[0]})"
        if name in BINARY_MATH:
            return f"{self.function(op, name, c_type)}({operands[0]}, {operands[1]})"
        if name in CASTS:
            value = f"({c_type}){operands[0]}"
            target = type_name(result_type)
            if target not in self.half_round or self._only_stored(op):
                return value  # a stored half value is rounded by the store's conversion
            return f"{self.half_round[target]}({value})"
        if name in self.templates:
            return self.templates[name].format(*operands, type=c_type, uint64=self.uint64,
                                               nan_max=self.nan_max, nan_min=self.nan_min)
        rule = getattr(self, "op_" + name.replace(".", "_"), None)
        if rule is None or name not in KERNEL_BODY_OPS:
            raise self.fail(op, f"has no {self.language} form")
        return rule(op, operands, result_type, c_type)

    @staticmethod
    def _only_stored(op) -> bool:
        uses = list(op.operation.results[0].uses)
        return bool(uses) and all(use.owner.name == "braze.store" for use in uses)

    def op_arith_constant(self, op, operands, result_type, c_type):
        attribute = op.attributes["value"]
        if isinstance(attribute, ir.FloatAttr):
            return self.float_literal(attribute.value, c_type)
        if isinstance(attribute, (ir.IntegerAttr, ir.BoolAttr)):
            value, name = attribute.value, type_name(result_type)
            if name == "i1":
                return self.bool_literals[bool(value)]
            if name in ("i64", "index") and value == -(2**63):
                return self.int64_min
            return self.int_literal(value, c_type)
        raise self.fail(op, f"has no {self.language} literal for {attribute}")

    def op_arith_cmpf(self, op, operands, result_type, c_type):
        predicate = op.attributes["predicate"].value
        if predicate not in CMPF:
            raise self.fail(op, f"unsupported predicate {predicate}")
        return f"({operands[0]} {CMPF[predicate]} {operands[1]})"

    def op_arith_cmpi(self, op, operands, result_type, c_type):
        return f"({operands[0]} {CMPI[op.attributes['predicate'].value]} {operands[1]})"

    def op_tensor_extract(self, op, operands, result_type, c_type):
        number = self.a.input_number(op.operation.operands[0])
        load = f"{operands[0]}[{self.offset('input', number, operands[1:])}]"
        element = type_name(result_type)
        return f"{self.half_load[element]}({load})" if element in self.half_load else load

    def define(self, op, out: list[str], indent: str = "") -> None:
        """`const T vN = <expression>;` for the op's result."""
        result = op.operation.results[0]
        name = self.fresh()
        self.names[result] = name
        out.append(f"{indent}const {self.compute_type(result.type)} {name} = {self.expression(op)};")

    @classmethod
    def missing_rules(cls) -> list[str]:
        """The kernel-body ops this renderer has no spelling for."""
        generic = set(BINARY) | set(WRAPPING) | set(DIVIDING) | set(CASTS) | {"braze.reduce", "braze.store"}
        missing = []
        for name in sorted(KERNEL_BODY_OPS - generic):
            if name.startswith("math.") and name[5:] in UNARY_MATH or name in BINARY_MATH:
                if not all(t in cls.functions.get(name, {}) for t in ("float", "double")
                           if t in cls.compute_types.values()):
                    missing.append(name)
            elif name not in cls.templates and not hasattr(cls, "op_" + name.replace(".", "_")):
                missing.append(name)
        return missing
