"""A `braze.flash_attention` in the C-like GPU renderers (CUDA, HIP, OpenCL
C, Metal): FlashAttention's online softmax, one thread per query row.

A block takes `q_block` query rows of one batch and head (the op's
schedule, from the target's `attention_blocks` through
braze-lower-attention): one thread per row, `q_block` threads, blocks
numbered by batch and head (row-major), then query block. The block stages
its query rows once into shared memory (transposed, `[E][q_block]`, so the
threads of a block read neighbouring words), then walks the keys in blocks
of `kv_block`: the threads stage the key and value rows of the block
(widened to the accumulator's type, keys past S as 0), and each thread

* scores its row against the block's keys in registers (each query element
  read once per block, every key element a broadcast read), scales and
  masks them,
* updates its row's running max and sum, rescales its accumulator row by
  `exp(old max - new max)` and adds the probabilities times the value rows.

After the last block the thread stores its accumulator row over its sum
once, in the result's type. Two barriers per key block (staged; consumed).
Accumulation is f32 (f64 for f64); f16/bf16 probabilities are rounded to
the element type before their product with v, as eager's softmax result is
and as the Triton kernel does. The semantics are the CPU's and Triton's
(codegen/cpp/attention.py, codegen/triton/attention.py):

* a soft cap bends the scaled score first (`softcap * tanh(score /
  softcap)`, the target's tanh);
* an additive mask is added to the scaled score, a boolean one keeps a key
  where it is true; `causal` keeps keys up to the row's index (and the walk
  stops after the block's last row); keys past S are not scored;
* a NaN score makes its row NaN; a row with no key kept has sum 0 and is 0,
  or NaN with `masked_rows_nan`;
* `gqa`: query head h reads key/value head h / (Hq / Hk);
* a static 1 among k's, v's or the mask's dims broadcasts (read at 0),
  everything else is read through its strides.

L and S may be dynamic; the head dims must be static (they size the
thread's registers and the shared tiles), and the tiles must fit
`SHARED_BYTES`. The ABI is the kernels' (codegen/gpu.py): inputs q, k, v
(and the mask), the result, `sizes` (the domain [B..., L, Ev, S, E(, Hk)],
every input's strides, the result's dims), `failed`.
"""

from __future__ import annotations

from mlir import ir

from braze.codegen.attention import AttentionAnalysis
from braze.codegen.gpu import SHARED_SIZES, GpuRenderer, sizes_lines
from braze.codegen.gpu_gemm import scalar_renderer
from braze.errors import BrazeError

# The shared memory a block may declare: Metal's threadgroup memory and the
# OpenCL full profile's guaranteed local memory, the smallest of the family
# (CUDA's static limit is 48 KiB). With q_block 32 and kv_block 16 an f32
# attention of head dims up to 128 fits.
SHARED_BYTES = 32 * 1024
ELEMENTS = ("f32", "f16", "bf16", "f64")
STRATEGY = "attention_rows"


class GpuAttentionRenderer:
    def __init__(self, renderer_type, analysis: AttentionAnalysis):
        self.a = a = analysis
        self.r = scalar_renderer(renderer_type, analysis)
        if a.element not in ELEMENTS:
            raise BrazeError(f"flash attention {a.name}: the {self.r.language} renderer spells no {a.element} "
                             f"attention (it spells {', '.join(ELEMENTS)})")
        # f32 for f32/f16/bf16, f64 for f64 (a renderer without double refuses here).
        self.accumulator = self.r.compute_type(a.query.type.element_type)
        self.e, self.ev = a.domain[a.e], a.domain[a.ev]
        if self.e is None or self.ev is None:
            raise BrazeError(f"flash attention {a.name}: the {self.r.language} renderer needs static head dims "
                             "(they size each thread's accumulator and the shared tiles); E and Ev are "
                             f"{'?' if self.e is None else self.e} and {'?' if self.ev is None else self.ev}")
        self.threads = a.q_block
        needed = SHARED_SIZES[self.accumulator] * sum(count for _, count in self.shared())
        if needed > SHARED_BYTES:
            raise BrazeError(f"flash attention {a.name}: head dims E = {self.e} and Ev = {self.ev} with q_block "
                             f"{a.q_block} and kv_block {a.kv_block} need {needed} bytes of shared memory in "
                             f"{self.accumulator}, more than the {SHARED_BYTES} the {self.r.language} renderer "
                             "keeps to (smaller head dims, or a target whose attention_blocks are smaller)")

    def shared(self) -> list[tuple[str, int]]:
        """(name, elements) of each shared array, in the accumulator's type."""
        a = self.a
        return [("q_tile", max(self.e, 1) * a.q_block), ("k_tile", a.kv_block * max(self.e, 1)),
                ("v_tile", a.kv_block * max(self.ev, 1))]

    # -- pieces ---------------------------------------------------------
    def _unrolled(self, indent: str) -> list[str]:
        """What precedes a loop over the key block's scores: unrolled, they
        stay in registers."""
        return [indent + self.r.unroll] if self.r.unroll else []

    def _load(self, number: int, index: dict[int, str]) -> str:
        """Input `number` at `index` (its dim -> expression), halves widened
        to f32; a broadcast dim reads at 0."""
        a, r = self.a, self.r
        indices = ["0" if a.broadcasts(number, d) else f"({index[d]})" for d in range(a.inputs[number].type.rank)]
        load = f"in{number}[{r.offset('input', number, indices)}]"
        element = a.mask_element if number == 3 else a.element
        return f"{r.half_load[element]}({load})" if element in r.half_load else load

    def _stage(self, name: str, number: int, length: int, first: str, extent: str, head: dict[int, str]) -> list[str]:
        """The lines that stage `name`'s rows (input `number`, rows of
        `length`, row `first + j` for j of the tile, valid below `extent`)."""
        rows = self.a.q_block if name == "q_tile" else self.a.kv_block
        b = self.a.batch
        value = self._load(number, {**head, b: f"{first} + j", b + 1: "c"})
        # q is stored transposed ([E][q_block]): the block's threads read one element of each row at once.
        slot = f"c * {rows} + j" if name == "q_tile" else f"j * {length} + c"
        # max(length, 1): an empty head dim stages nothing, but its loop must still compile.
        return [f"  for (int t = row; t < {rows * length}; t += {self.threads}) {{",
                f"    const int j = t / {max(length, 1)}, c = t % {max(length, 1)};",
                f"    {name}[{slot}] = {first} + j < {extent} ? {value} : ({self.accumulator})0;",
                "  }"]

    def _kept(self) -> str:
        """The condition under which this row keeps key `s` (inside S)."""
        a = self.a
        if a.causal:
            return "s <= l"
        if a.mask is not None and a.mask_element == "i1":
            return f"{self._load(3, self._mask_index())} != 0"
        return ""

    def _mask_index(self) -> dict[int, str]:
        """The mask's dims as domain-frame expressions: [B..., L, S] aligned
        on the right."""
        a = self.a
        frame = [f"i{d}" for d in range(a.batch)] + ["l", "s"]
        mask_rank = a.mask.type.rank
        return {j: frame[a.rank - mask_rank + j] for j in range(mask_rank)}

    def _score(self) -> list[str]:
        """`score`: key j's scaled, masked score; -inf where not kept."""
        a, r = self.a, self.r
        infinity = r.special_float("inf", self.accumulator)
        scaled = a.capped("scores[j]", r.function(a.op, "math.tanh", self.accumulator),
                          lambda value: r.float_literal(value, self.accumulator))
        if a.mask is not None and a.mask_element != "i1":
            scaled += f" + {self._load(3, self._mask_index())}"
        kept = " && ".join(c for c in ("live", f"s < n{a.s}", self._kept()) if c)
        return ["      const int64_t s = s0 + j;",
                f"      const {self.accumulator} score = ({kept}) ? {scaled} : -{infinity};"]

    # -- the kernel -----------------------------------------------------
    def render(self) -> str:
        a, r = self.a, self.r
        b, acc_t = a.batch, self.accumulator
        qb, kvb, e, ev = a.q_block, a.kv_block, self.e, self.ev
        infinity = r.special_float("inf", acc_t)
        exp = r.function(a.op, "math.exp", acc_t)
        params = r.launch_parameters(GpuRenderer.parameters(r))
        lines = [f"{r.launch_prefix(self.threads)} {a.name}({', '.join(params)}) {{"]
        lines += sizes_lines(a)
        lines += [f"  {r.shared_space} {acc_t} {name}[{count}];" for name, count in self.shared()]
        lines += [f"  const int row = (int){r.local_id};",
                  f"  const int64_t q_blocks = (n{a.l} + {qb - 1}) / {qb};",
                  f"  const int64_t block = (int64_t){r.block_id};",
                  f"  const int64_t q0 = block % q_blocks * {qb};",
                  "  const int64_t batch = block / q_blocks;"]
        lines += r._decode("batch", list(range(b)), "  ")
        head = {d: f"i{d}" for d in range(b)}
        kv_head = dict(head)
        if a.gqa:  # each key/value head serves `group` query heads
            lines.append(f"  const int64_t group = n{b - 1} / (n{a.key_heads} > 1 ? n{a.key_heads} : 1);")
            kv_head[b - 1] = f"i{b - 1} / group"
        lines += ["  const int64_t l = q0 + row;",
                  "  // A row past L still stages its share and meets every barrier; it stores nothing.",
                  f"  const bool live = l < n{a.l};"]
        lines += self._stage("q_tile", 0, e, "q0", f"n{a.l}", head)
        # Causal: the keys after the block's last row are masked for all of its rows.
        keys = f"(n{a.s} < q0 + {qb} ? n{a.s} : q0 + {qb})" if a.causal else f"n{a.s}"
        probability = "weight"
        if a.element in r.half_round:  # rounded as eager's softmax result is, before its product with v
            probability = f"{r.half_round[a.element]}(weight)"
        lines += [
            f"  {acc_t} acc[{max(ev, 1)}];",
            f"  for (int c = 0; c < {ev}; ++c) acc[c] = ({acc_t})0;",
            f"  {acc_t} row_max = -{infinity}, row_sum = ({acc_t})0;",
            f"  const int64_t keys = {keys};",
            f"  for (int64_t s0 = 0; s0 < keys; s0 += {kvb}) {{",
            *["  " + line for line in self._stage("k_tile", 1, e, "s0", f"n{a.s}", kv_head)],
            *["  " + line for line in self._stage("v_tile", 2, ev, "s0", f"n{a.s}", kv_head)],
            f"    {r.barrier};",
            f"    {acc_t} scores[{kvb}];",
            *self._unrolled("    "),
            f"    for (int j = 0; j < {kvb}; ++j) scores[j] = ({acc_t})0;",
            f"    for (int c = 0; c < {e}; ++c) {{",
            f"      const {acc_t} q = q_tile[c * {qb} + row];",
            *self._unrolled("      "),
            f"      for (int j = 0; j < {kvb}; ++j) scores[j] += q * k_tile[j * {e} + c];",
            "    }",
            f"    {acc_t} block_max = -{infinity};",
            *self._unrolled("    "),
            f"    for (int j = 0; j < {kvb}; ++j) {{",
            *self._score(),
            "      scores[j] = score;",
            "      // A NaN score never wins the max: it makes its row NaN through its weight.",
            "      block_max = score > block_max ? score : block_max;",
            "    }",
            f"    const {acc_t} new_max = block_max > row_max ? block_max : row_max;",
            "    // A row with no key kept yet keeps weights 0 (exp(-inf)) and nothing to rescale.",
            f"    const {acc_t} safe_max = new_max == -{infinity} ? ({acc_t})0 : new_max;",
            f"    const {acc_t} correction = {exp}(row_max - safe_max);",
            "    row_sum *= correction;",
            f"    for (int c = 0; c < {ev}; ++c) acc[c] *= correction;",
            # The weights, then their products with the value rows: one loop holding both spilled
            # the accumulator to scratch on gfx90a (f16's rounding inlined inside the product).
            *self._unrolled("    "),
            f"    for (int j = 0; j < {kvb}; ++j) {{",
            f"      const {acc_t} weight = {exp}(scores[j] - safe_max);",
            "      row_sum += weight;",
            f"      scores[j] = {probability};",
            "    }",
            *self._unrolled("    "),
            f"    for (int j = 0; j < {kvb}; ++j)",
            f"      for (int c = 0; c < {ev}; ++c) acc[c] += scores[j] * v_tile[j * {ev} + c];",
            "    row_max = new_max;",
            f"    {r.barrier};  // every thread has read the tiles before they are staged again",
            "  }",
        ]
        empty = r.special_float("nan", acc_t) if a.masked_rows_nan else f"({acc_t})0"
        stored = f"row_sum == ({acc_t})0 ? {empty} : acc[c] / row_sum"
        if a.element in r.half_store:
            stored = f"{r.half_store[a.element]}({stored})"
        lines += ["  if (!live) return;",
                  f"  for (int c = 0; c < {ev}; ++c) out0[({a.result_row('l')}) * {ev} + c] = {stored};"]
        return "\n".join(lines + ["}"])


def render(renderer_type, op: ir.OpView, name: str) -> tuple[str, object]:
    """The launch function of flash attention `op`, named `name`, and its
    KernelSpec."""
    analysis = AttentionAnalysis(op, name)
    renderer = GpuAttentionRenderer(renderer_type, analysis)
    source = renderer.render()
    spec = analysis.spec()
    spec.threads, spec.strategy = renderer.threads, STRATEGY
    return source, spec
