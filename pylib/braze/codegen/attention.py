"""What every emitter needs to know about a `braze.flash_attention`, free of
any target's spelling: its operands, how the mask is read, its schedule,
and the launch ABI (a `KernelSpec`, so the executor runs it as a kernel).

The domain of the spec is `[B..., L, Ev, S, E]`, then, with `gqa`, the
key/value heads `Hk`: `sizes` holds those extents, then every input's
strides, then the result's dims, as for a kernel. Extents are read from
the operands (`KernelSpec.extent_inputs`); q, k and v are read in place by
the BLAS when their rows have unit stride (`blas_inputs`). The result is
`[B..., L, Ev]` permuted by `result_order` (`result_row`).
"""

from __future__ import annotations

from mlir import ir

from braze.codegen.analysis import KernelSpec, type_name


def _grouped(expression: str) -> str:
    """`expression` in parentheses unless it is one name."""
    return expression if expression.isidentifier() else f"({expression})"


class AttentionAnalysis:
    def __init__(self, op: ir.OpView, name: str):
        self.op = op
        self.name = name
        attributes = op.attributes
        operands = list(op.operation.operands)
        self.query, self.key, self.value = operands[:3]
        self.mask = operands[3] if len(operands) > 3 else None
        self.inputs = operands
        self.result = op.operation.results[0]
        self.results = [self.result]
        self.scale = ir.FloatAttr(attributes["scale"]).value
        # Scores are `softcap * tanh(scale * q.k / softcap)` with a soft cap.
        self.softcap = ir.FloatAttr(attributes["softcap"]).value if "softcap" in attributes else None
        self.causal = "causal" in attributes
        self.gqa = "gqa" in attributes
        self.masked_rows_nan = "masked_rows_nan" in attributes
        self.grouped_heads = "grouped_heads" in attributes
        self.q_block = ir.IntegerAttr(attributes["q_block"]).value
        self.kv_block = ir.IntegerAttr(attributes["kv_block"]).value
        self.element = type_name(self.query.type.element_type)
        self.mask_element = type_name(self.mask.type.element_type) if self.mask is not None else None
        rank = self.rank = self.query.type.rank
        b = self.batch = rank - 2
        # Domain dims.
        self.l, self.ev, self.s, self.e = b, b + 1, b + 2, b + 3
        # The result's dims as domain dims: the attention's [B..., L, Ev] (domain dims 0 to b + 1), permuted.
        self.result_order = (list(ir.DenseI64ArrayAttr(attributes["result_order"])) if "result_order" in attributes
                             else list(range(rank)))
        self.key_heads = b + 4 if self.gqa else None
        dynamic = ir.ShapedType.get_dynamic_size()
        q, k, v = (list(t.type.shape) for t in (self.query, self.key, self.value))
        self.extent_inputs = [(0, d) for d in range(b)] + [(0, b), (2, b + 1), (1, b), (0, b + 1)]
        sizes = q[:b] + [q[b], v[b + 1], k[b], q[b + 1]]
        if self.gqa:
            self.extent_inputs.append((1, b - 1))
            sizes.append(k[b - 1])
        self.domain = [None if s == dynamic else s for s in sizes]
        checks = [(0, d, d) for d in range(b)] + [(0, b, self.l), (0, b + 1, self.e)]
        for number, shape, last in ((1, k, self.e), (2, v, self.ev)):
            for d in range(b):
                if self.gqa and d == b - 1:
                    checks.append((number, d, self.key_heads))
                elif shape[d] != 1:  # a static 1 broadcasts over the batch
                    checks.append((number, d, d))
            checks += [(number, b, self.s), (number, b + 1, last)]
        if self.mask is not None:
            mask_shape = list(self.mask.type.shape)
            frame = list(range(b)) + [self.l, self.s]  # [B..., L, S] as domain dims
            for j, size in enumerate(mask_shape):
                if size != 1:
                    checks.append((3, j, frame[rank - len(mask_shape) + j]))
        self.input_checks = sorted(checks)

    def capped(self, score: str, tanh: str, literal) -> str:
        """The scaled (and soft-capped) score expression of a raw `score`,
        in a renderer's spelling of tanh and of a literal."""
        if self.softcap is None:
            return f"{score} * {literal(self.scale)}"
        return f"{literal(self.softcap)} * {tanh}({score} * {literal(self.scale / self.softcap)})"

    def result_row(self, row: str) -> str:
        """The result's row (its offset in elements over Ev) of query row
        `row` of the batch and head that `i<d>` index along the batch dims
        (`n<d>` the domain's extents), row-major in `result_order`."""
        index = None
        for dim in self.result_order[:-1]:
            at = row if dim == self.l else f"i{dim}"
            index = at if index is None else f"{_grouped(index)} * n{dim} + {at}"
        return index or "0"

    def result_step(self, dim: int) -> str:
        """The distance in rows of the result between consecutive indices
        along domain dim `dim` (a batch dim or the query rows)."""
        order = self.result_order[:-1]
        return " * ".join(f"n{d}" for d in order[order.index(dim) + 1:]) or "1"

    def broadcasts(self, number: int, dim: int) -> bool:
        """Whether input `number` is read with stride 0 along `dim` (a
        static 1: broadcast; a dynamic dim never broadcasts)."""
        return self.inputs[number].type.shape[dim] == 1

    def spec(self) -> KernelSpec:
        spec = KernelSpec(self.name, self.domain, [self.s, self.e], [v.type for v in self.inputs],
                          [self.result.type])
        spec.result_shapes = [[("extent", d) if self.domain[d] is None else self.domain[d]
                               for d in self.result_order]]
        spec.input_checks = self.input_checks
        spec.extent_inputs = self.extent_inputs
        spec.blas_inputs = [0, 1, 2]
        spec.tile = (self.q_block, self.kv_block)
        return spec
