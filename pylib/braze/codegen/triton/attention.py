"""A `braze.flash_attention` in Triton: one `@triton.jit` function, the
online-softmax attention of FlashAttention.

A program takes BLOCK_M query rows of one batch and head (grid axis 0: the
query blocks; axis 1: the batch and heads, row-major), loads them once and
walks the keys in blocks of BLOCK_N: the block's scores are one `tl.dot`
(f32 products, f64 for f64; f32 operands in IEEE precision, as eager's),
scaled and masked in registers; each row's running max and sum are
updated, the accumulator rescaled by `exp(old max - new max)`, and the
probabilities times the value block added with a second `tl.dot` (f16/bf16
probabilities rounded to the element type first, as eager's softmax result
is). After the last block each row is its accumulator over its sum, stored
once in the result's type. The semantics are the CPU kernel's
(codegen/cpp/attention.py) and the host op's:

* an additive mask is added to the scaled score, a boolean one keeps a key
  where it is true; `causal` keeps keys up to the row's index (and the walk
  stops after the block's last row); keys past S score -inf;
* a NaN score makes its row NaN; a row with no key kept has sum 0 and is 0,
  or NaN with `masked_rows_nan`;
* `gqa`: query head h reads key/value head h / (Hq / Hk);
* a static 1 among k's, v's or the mask's dims broadcasts (read with
  stride 0), everything else is read through its strides.

E and Ev are blocks of `BLOCK_E` and `BLOCK_EV` (their powers of two, at
least 16, as `tl.dot` needs; the launcher passes them, so they may be
dynamic). Parameters, in order: the kernel ABI's (codegen/triton/emitter.py:
inputs q, k, v, mask, the result, dynamic extents `n<d>` of the domain
[B..., L, Ev, S, E(, Hk)], every input's strides), then BLOCK_M, BLOCK_N,
BLOCK_E and BLOCK_EV as `tl.constexpr`.
"""

from __future__ import annotations

from mlir import ir

from braze.codegen.attention import AttentionAnalysis
from braze.codegen.triton.emitter import TYPES, abi_parameters, source_lines
from braze.codegen.triton.gemm import batch_indices
from braze.errors import BrazeError

# Element types `tl.dot` takes here.
DOT_TYPES = ("f32", "f16", "bf16", "f64")


class AttentionRenderer:
    def __init__(self, analysis: AttentionAnalysis):
        self.a = a = analysis
        if a.element not in DOT_TYPES:
            raise BrazeError(f"flash attention {a.name}: the Triton renderer has no tl.dot of {a.element} "
                             f"operands (it spells {', '.join(DOT_TYPES)})")
        self.accumulator = TYPES["f64"] if a.element == "f64" else TYPES["f32"]
        self.precision = ', input_precision="ieee"' if a.element in ("f32", "f64") else ""
        self.helpers: set[str] = set()

    def parameters(self) -> list[str]:
        a = self.a
        tiles = [f"{name}: tl.constexpr" for name in ("BLOCK_M", "BLOCK_N", "BLOCK_E", "BLOCK_EV")]
        return abi_parameters(a.inputs, 1, False, a.domain) + tiles

    def _offset(self, number: int, index: list[tuple[int, str]]) -> str:
        """Input `number`'s element offset at (dim, index expression) pairs;
        a broadcast dim is not stepped."""
        terms = [f"{i} * s{number}_{d}" for d, i in index if not self.a.broadcasts(number, d)]
        return " + ".join(terms) or "0"

    def _scores(self) -> list[str]:
        """The lines that scale and mask the block's raw `scores`."""
        a = self.a
        lines = [f"        scores = {a.capped('scores', 'libdevice.tanh', repr)}"]
        if a.causal:
            lines.append('        scores = tl.where(s > l, float("-inf"), scores)')
        elif a.mask is not None:
            mask_rank = a.mask.type.rank
            frame = [f"i{d}" for d in range(a.batch)] + ["l", "s"]
            index = [(j, frame[a.rank - mask_rank + j]) for j in range(mask_rank)]
            load = f"tl.load(mask + {self._offset(3, [(d, i) for d, i in index if i in ('l', 's')])}, mask=tile_mask)"
            if a.mask_element == "i1":
                lines.append(f'        scores = tl.where({load} != 0, scores, float("-inf"))')
            else:
                lines.append(f"        scores = scores + {load}.to({self.accumulator})")
        lines.append('        scores = tl.where(tile_mask, scores, float("-inf"))  # keys past S')
        return lines

    def render(self) -> str:
        a = self.a
        b = a.batch
        l, ev, s, e = (f"n{d}" for d in (a.l, a.ev, a.s, a.e))
        shape = ", ".join("?" if size is None else str(size) for size in a.domain)
        words = [w for w, on in (("causal", a.causal), ("gqa", a.gqa), ("masked rows NaN", a.masked_rows_nan)) if on]
        if a.mask is not None:
            words.insert(0, "boolean mask" if a.mask_element == "i1" else "additive mask")
        lines = [f"    # {source_lines(a.op.operation.location)}: flash attention [{shape}] ([B..., L, Ev, S, E"
                 + (", Hk" if a.gqa else "") + "])" + "".join(f", {w}" for w in words)]
        for dim, size in enumerate(a.domain):
            if size is not None:
                lines.append(f"    n{dim} = tl.full([], {size}, tl.int64)")
        lines += batch_indices(b)
        head = [(d, f"i{d}") for d in range(b)]
        kv_head = head
        if a.gqa:  # each key/value head serves `group` query heads
            lines.append(f"    group = n{b - 1} // tl.maximum(n{a.key_heads}, 1)")
            kv_head = head[:-1] + [(b - 1, f"(i{b - 1} // group)")]
        lines += [
            "    first = tl.program_id(0).to(tl.int64) * BLOCK_M",
            "    l = first + tl.arange(0, BLOCK_M)[:, None]",
            f"    mask_l = l < {l}",
            "    e = tl.arange(0, BLOCK_E)",
            "    ev = tl.arange(0, BLOCK_EV)[None, :]",
            f"    q = tl.load(in0 + {self._offset(0, head + [(b, 'l'), (b + 1, 'e[None, :]')])}, "
            f"mask=mask_l & (e[None, :] < {e}), other=0.0)",
            f"    key = in1 + {self._offset(1, kv_head)}",
            f"    value = in2 + {self._offset(2, kv_head)}",
        ]
        if a.mask is not None:
            mask_rank = a.mask.type.rank
            batch_dims = [(j, f"i{a.rank - mask_rank + j}") for j in range(mask_rank) if a.rank - mask_rank + j < b]
            lines.append(f"    mask = in3 + {self._offset(3, batch_dims)}")
        # Causal: the keys after the block's last row are masked for all of its rows.
        keys = f"tl.minimum({s}, first + BLOCK_M)" if a.causal else s
        element = TYPES[a.element]
        lines += [
            f'    row_max = tl.full([BLOCK_M, 1], float("-inf"), {self.accumulator})',
            f"    row_sum = tl.zeros([BLOCK_M, 1], {self.accumulator})",
            f"    acc = tl.zeros([BLOCK_M, BLOCK_EV], {self.accumulator})",
            f"    for s0 in range(0, {keys}, BLOCK_N):",
            "        s = s0 + tl.arange(0, BLOCK_N)[None, :]",
            f"        tile_mask = mask_l & (s < {s})",
            f"        key_block = tl.load(key + {self._offset(1, [(b, 's'), (b + 1, 'e[:, None]')])}, "
            f"mask=(s < {s}) & (e[:, None] < {e}), other=0.0)",
            f"        scores = tl.dot(q, key_block{self.precision})",
        ]
        lines += self._scores()
        empty = 'float("nan")' if a.masked_rows_nan else "0.0"
        probabilities = "weights"
        if a.element in ("f16", "bf16"):
            # Rounded to nearest even as eager's softmax result is (the interpreter's own
            # conversion to bfloat16 truncates: `_round_bf16` first makes it exact).
            if a.element == "bf16":
                self.helpers.add("_round_bf16")
            probabilities = f"{'_round_bf16(weights)' if a.element == 'bf16' else 'weights'}.to({element})"
        lines += [
            "        # The max over the kept scores: a NaN score makes its row NaN through its weight.",
            '        block_max = tl.max(tl.where(scores != scores, float("-inf"), scores), axis=1, keep_dims=True)',
            "        new_max = tl.maximum(row_max, block_max)",
            "        # A row with no key kept yet keeps weights 0 (exp(-inf)) and nothing to rescale.",
            '        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)',
            "        weights = tl.exp(scores - safe_max)",
            "        correction = tl.exp(row_max - safe_max)",
            "        row_sum = row_sum * correction + tl.sum(weights, axis=1, keep_dims=True)",
            "        row_max = new_max",
            "        s_rows = s0 + tl.arange(0, BLOCK_N)[:, None]",
            f"        value_block = tl.load(value + {self._offset(2, [(b, 's_rows'), (b + 1, 'ev')])}, "
            f"mask=(s_rows < {s}) & (ev < {ev}), other=0.0)",
            f"        acc = tl.dot({probabilities}, value_block, acc * correction{self.precision})",
            f"    empty = {empty}  # a row with no key kept",
            "    out = tl.where(row_sum == 0.0, empty, acc / tl.where(row_sum == 0.0, 1.0, row_sum))",
        ]
        stored = "out"
        if a.element == "bf16":  # Triton's store conversion truncates
            self.helpers.add("_round_bf16")
            stored = "_round_bf16(out)"
        lines.append(f"    tl.store(out0 + ({a.result_row('l')}) * {ev} + ev, {stored}, mask=mask_l & (ev < {ev}))")
        signature = f"def {a.name}({', '.join(self.parameters())}):"
        return "\n".join(["@triton.jit", signature] + lines)


def render(op: ir.OpView, number: int) -> tuple[str, object, set]:
    """The function of flash attention `op` (the `number`-th kernel of its
    module), its KernelSpec and the prelude helpers it calls."""
    analysis = AttentionAnalysis(op, f"attention_{number}")
    renderer = AttentionRenderer(analysis)
    source = renderer.render()
    spec = analysis.spec()
    spec.strategy = "attention"
    return source, spec, renderer.helpers


def head_blocks(spec, extents: list) -> dict:
    """BLOCK_E and BLOCK_EV of an attention over domain `extents`: the head
    dims' powers of two, at least 16 (`tl.dot`'s smallest)."""
    batch = spec.input_types[0].rank - 2
    e, ev = extents[batch + 3], extents[batch + 1]
    if e is None or ev is None:
        raise BrazeError(f"kernel {spec.name}: its head dims are dynamic, so its BLOCK_E and BLOCK_EV are "
                         f"chosen at launch; compile it ahead of time from a static shape")
    return {"BLOCK_E": max(16, 1 << max(0, e - 1).bit_length()),
            "BLOCK_EV": max(16, 1 << max(0, ev - 1).bit_length())}
