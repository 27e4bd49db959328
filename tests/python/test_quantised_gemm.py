"""Scaled and quantised GEMMs: torch._scaled_mm (8-bit float operands,
per-tensor and row-wise scales, a bias, a runtime global scale) and the
int8-weight dequantise-then-GEMM pattern, captured and run on the CPU as
fused GEMMs that read the narrow operands in place. Numerics against eager
PyTorch (eager runs _scaled_mm on the CPU), the reference interpreter the
same before and after braze-epilogue-fusion, torch.compile without a
fallback, the edge cases (M = 1 decode, K not a multiple of any block,
dynamic M) and bad scales as clear errors."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import braze
import braze.reference
from braze.errors import BrazeError

FLOAT8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
# Output dtype -> tolerance relative to the largest value (bf16 and f16
# round the result once; the f32 products differ in summation order only).
OUT_DTYPES = {"f32": (torch.float32, 1e-5), "bf16": (torch.bfloat16, 1e-2), "f16": (torch.float16, 2e-3)}


def _close(actual, expected, tolerance):
    assert actual.dtype == expected.dtype
    scale = max(expected.float().abs().max().item(), 1.0)
    error = (actual.float() - expected.float()).abs().max().item()
    assert error <= tolerance * scale, f"max error {error} (scale {scale})"


def _no_eager_fallback(run):
    """Runs `run` and fails if braze sent a graph to eager PyTorch."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run()
    assert not [w for w in caught if "eager PyTorch" in str(w.message)], [str(w.message) for w in caught]
    return result


def _float8_operands(rows, depth, columns, lhs_type, rhs_type, row_wise, seed=0):
    """fp8 lhs [M, K], the weight [N, K] (passed transposed, column-major as
    _scaled_mm wants it) and their f32 scales."""
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(rows, depth, generator=g) * 4).to(lhs_type)
    w = (torch.randn(columns, depth, generator=g) * 4).to(rhs_type)
    if row_wise:
        sa = torch.rand(rows, 1, generator=g) + 0.05
        sb = torch.rand(1, columns, generator=g) + 0.05
    else:
        sa, sb = torch.rand((), generator=g) + 0.05, torch.rand((), generator=g) + 0.05
    return a, w, sa, sb


class _ScaledLinear(torch.nn.Module):
    """An fp8 linear layer: its weight an fp8 parameter, the input already
    quantised, the scales passed at run time (a global scale is a runtime
    scalar tensor), optionally a bias and a GELU after it."""

    def __init__(self, weight, bias, out_dtype, gelu=False):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.bias = None if bias is None else torch.nn.Parameter(bias, requires_grad=False)
        self.out_dtype, self.gelu = out_dtype, gelu

    def forward(self, a, scale_a, scale_b):
        y = torch._scaled_mm(a, self.weight.t(), scale_a, scale_b, bias=self.bias, out_dtype=self.out_dtype)
        return F.gelu(y) if self.gelu else y


@pytest.mark.parametrize("out", OUT_DTYPES)
@pytest.mark.parametrize("row_wise", [False, True], ids=["per_tensor", "row_wise"])
@pytest.mark.parametrize("types", [("e4m3", "e4m3"), ("e5m2", "e4m3")])
@pytest.mark.parametrize("bias", [False, True], ids=["", "bias"])
def test_scaled_mm_matches_eager(out, row_wise, types, bias):
    """braze.compile of torch._scaled_mm, M dynamic (1, 5 and 70 rows: the
    GEMV form is for static M only, so these run the panels) with K = 67 (a
    multiple of no block), against eager's _scaled_mm on the same inputs."""
    out_dtype, tolerance = OUT_DTYPES[out]
    a, w, sa, sb = _float8_operands(5, 67, 40, FLOAT8[types[0]], FLOAT8[types[1]], row_wise)
    b = torch.randn(40).to(out_dtype) if bias else None
    model = _ScaledLinear(w, b, out_dtype)
    compiled = braze.compile(model, (a, sa, sb), dynamic_shapes=(
        {0: torch.export.Dim("rows", max=512)}, {0: torch.export.Dim("rows", max=512)} if row_wise else None, None))
    assert compiled.stats["fused_gemms"] == 1 and compiled.stats["gemms"] == 0
    for rows in (1, 5, 70):
        a, _, sa, sb = _float8_operands(rows, 67, 40, FLOAT8[types[0]], FLOAT8[types[1]], row_wise, seed=rows)
        _close(compiled(a, sa, sb), model(a, sa, sb), tolerance)


@pytest.mark.parametrize("row_wise", [False, True], ids=["per_tensor", "row_wise"])
@pytest.mark.parametrize("rows", [1, 16, 300])
def test_scaled_mm_static_rows_and_epilogue(row_wise, rows):
    """A static M (1 and 16: the GEMV form; 300: panels) with a bias and a
    GELU fused after the scales, bf16 out."""
    a, w, sa, sb = _float8_operands(rows, 131, 72, torch.float8_e4m3fn, torch.float8_e4m3fn, row_wise, seed=rows)
    model = _ScaledLinear(w, torch.randn(72).bfloat16(), torch.bfloat16, gelu=True)
    compiled = braze.compile(model, (a, sa, sb))
    assert compiled.stats["fused_gemms"] == 1
    _close(compiled(a, sa, sb), model(a, sa, sb), 2e-2)


def test_scaled_mm_torch_compile_without_fallback():
    """torch.compile(backend="braze") captures _scaled_mm (per tensor, the
    global scale a runtime scalar tensor: a new value needs no recompile)."""
    a, w, sa, sb = _float8_operands(9, 64, 48, torch.float8_e4m3fn, torch.float8_e4m3fn, row_wise=False)
    model = _ScaledLinear(w, torch.randn(48), torch.float32)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="braze")
    for scale in (sb, sb * 3):
        _close(_no_eager_fallback(lambda: compiled(a, sa, scale)), model(a, sa, scale), 1e-5)


def test_scaled_mm_float8_result_runs_through_torch():
    """A result rounded to fp8 (with scale_result) is not fused: it runs
    through torch._scaled_mm and matches eager exactly."""
    a, w, sa, sb = _float8_operands(8, 64, 32, torch.float8_e4m3fn, torch.float8_e4m3fn, row_wise=False)
    sr = torch.tensor(2.0)

    def f(a, w, sa, sb, sr):
        return torch._scaled_mm(a, w.t(), sa, sb, scale_result=sr, out_dtype=torch.float8_e4m3fn)

    compiled = braze.compile(f, (a, w, sa, sb, sr))
    assert compiled.stats["fused_gemms"] == 0 and compiled.stats["gemms"] == 1
    assert torch.equal(compiled(a, w, sa, sb, sr).float(), f(a, w, sa, sb, sr).float())


SCALED_MM = """
func.func @f(%a: tensor<?x67xf8E4M3FN>, %w: tensor<40x67xf8E5M2>, %sa: tensor<SA>, %sb: tensor<SB>,
             %bias: tensor<40xbf16>) -> tensor<?x40xbf16> {
  %t = braze.permute %w [1, 0] : tensor<40x67xf8E5M2> -> tensor<67x40xf8E5M2>
  %y = braze.scaled_mm %a, %t scales(%sa, %sb : tensor<SA>, tensor<SB>) bias(%bias : tensor<40xbf16>)
      : (tensor<?x67xf8E4M3FN>, tensor<67x40xf8E5M2>) -> tensor<?x40xbf16>
  %g = braze.silu %y : tensor<?x40xbf16>
  return %g : tensor<?x40xbf16>
}"""


@pytest.mark.parametrize("scales", [("1xf32", "1xf32"), ("?x1xf32", "1x40xf32")], ids=["per_tensor", "row_wise"])
def test_scaled_mm_reference_before_and_after_the_pass(scales):
    """The reference interpreter (eager's _scaled_mm before the pass, the
    fused GEMM's definition after) and the compiled program agree."""
    text = SCALED_MM.replace("SA", scales[0]).replace("SB", scales[1])
    a, w, sa, sb = _float8_operands(23, 67, 40, torch.float8_e4m3fn, torch.float8_e5m2, scales[0] != "1xf32")
    inputs = [a, w, sa.reshape(1) if sa.dim() == 0 else sa, sb.reshape(1) if sb.dim() == 0 else sb,
              torch.randn(40).bfloat16()]
    before = braze.reference.run(braze.parse(text), *inputs)[0]
    module = braze.parse(text)
    braze.run_pipeline(module, "func.func(braze-epilogue-fusion)")
    assert "braze.fused_gemm" in str(module) and "braze.scaled_mm" not in str(module)
    _close(braze.reference.run(module, *inputs)[0], before, 1e-2)
    _close(braze.compile_mlir(text)(*inputs)[0], before, 1e-2)


def test_scaled_mm_bad_scales_are_clear_errors():
    """Scales neither both per tensor nor both row-wise: the verifier names
    the shapes it wants."""
    text = SCALED_MM.replace("SA", "1xf32").replace("SB", "1x40xf32")
    with pytest.raises(BrazeError, match=r"scales must be both per tensor .* or both row-wise "
                                         r"\(lhs_scale \[M, 1\] = \[\?, 1\], rhs_scale \[1, N\] = \[1, 40\]\)"):
        braze.compile_mlir(text)


# -- int8 weights ---------------------------------------------------------

class _Int8Linear(torch.nn.Module):
    """A weight-only int8 linear layer ([N, K] int8 weight, a scale per
    output channel), written in one of the ways people write it."""

    def __init__(self, columns, depth, dtype, form, bias=False, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        weight = torch.randint(-128, 128, (columns, depth), generator=g, dtype=torch.int8)
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.scale = torch.nn.Parameter((torch.rand(columns, generator=g) / 64).to(dtype), requires_grad=False)
        self.bias = torch.nn.Parameter(torch.randn(columns, generator=g).to(dtype), requires_grad=False) if bias else None
        self.dtype, self.form = dtype, form

    def forward(self, x):
        w, s = self.weight, self.scale
        if self.form == "matmul":  # x @ (w.to(dtype) * s[:, None]).t()
            y = x @ (w.to(self.dtype) * s[:, None]).t()
            return y if self.bias is None else y + self.bias
        if self.form == "linear":  # F.linear(x, w.to(dtype) * s[:, None], b)
            return F.linear(x, w.to(self.dtype) * s[:, None], self.bias)
        y = F.linear(x, w.to(self.dtype)) * s  # F.linear(x, w.to(dtype)) * s
        return y if self.bias is None else y + self.bias


INT8_TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 2e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("form", ["matmul", "linear", "scale_after"])
@pytest.mark.parametrize("bias", [False, True], ids=["", "bias"])
@pytest.mark.parametrize("depth", [67, 300])
def test_int8_weight_matches_eager(dtype, form, bias, depth):
    """Each form, dynamic M (1, 37, 300 rows) and K = 67 or 300 (f32: the
    widened blocks of K, WIDEN_DEPTH each, and a short last one), reads the
    int8 weight in place: one fused GEMM, no kernel making the dequantised
    weight, and eager's numbers (bf16: eager rounds w * s to bf16 before
    its product, braze scales the f32 accumulator: within bf16 rounding)."""
    model = _Int8Linear(48, depth, dtype, form, bias)
    x = torch.randn(5, depth).to(dtype)
    compiled = braze.compile(model, (x,), dynamic_shapes=({0: torch.export.Dim("rows", max=512)},))
    assert compiled.stats["fused_gemms"] == 1 and compiled.stats["kernels"] == 1
    for rows in (1, 37, 300):
        x = torch.randn(rows, depth).to(dtype)
        with torch.no_grad():
            _close(compiled(x), model(x), INT8_TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("rows", [1, 4, 16])
def test_int8_weight_decode(dtype, rows):
    """Decode shapes (a static M of at most 16): the GEMV form reads each
    int8 weight element once, as a float, for every row; 3-D input as an
    LLM's decode step gives it."""
    model = _Int8Linear(96, 200, dtype, "linear", bias=True, seed=rows)
    x = torch.randn(1, rows, 200).to(dtype)
    compiled = braze.compile(model, (x,))
    assert compiled.stats["fused_gemms"] == 1
    with torch.no_grad():
        _close(compiled(x), model(x), INT8_TOLERANCE[dtype])


def test_int8_weight_torch_compile_without_fallback():
    """torch.compile(backend="braze") on the int8 MLP projection."""
    model = _Int8Linear(64, 96, torch.float32, "linear", bias=True)
    x = torch.randn(3, 7, 96)
    torch._dynamo.reset()
    with torch.no_grad():
        out = _no_eager_fallback(lambda: torch.compile(model, backend="braze")(x))
        _close(out, model(x), 2e-5)


INT8_IR = """
func.func @f(%x: tensor<?x67xDT>, %w: tensor<48x67xi8>, %s: tensor<48xDT>) -> tensor<?x48xDT> {
  %wf = braze.cast %w : tensor<48x67xi8> to tensor<48x67xDT>
  %s2 = braze.reshape %s : tensor<48xDT> -> tensor<48x1xDT>
  %dq = braze.mul %wf, %s2 : tensor<48x67xDT>, tensor<48x1xDT> -> tensor<48x67xDT>
  %t = braze.permute %dq [1, 0] : tensor<48x67xDT> -> tensor<67x48xDT>
  %y = braze.matmul %x, %t : tensor<?x67xDT>, tensor<67x48xDT> -> tensor<?x48xDT>
  %g = braze.gelu %y : tensor<?x48xDT>
  return %g : tensor<?x48xDT>
}"""


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_int8_weight_reference_before_and_after_the_pass(dtype):
    """The reference interpreter gives the same before the pass (the
    dequantised weight made, then the product) and after (the int8 weight
    and its scale in the fused GEMM), and the compiled program matches."""
    name = {torch.float32: "f32", torch.bfloat16: "bf16"}[dtype]
    text = INT8_IR.replace("DT", name)
    g = torch.Generator().manual_seed(3)
    inputs = [torch.randn(37, 67, generator=g).to(dtype),
              torch.randint(-128, 128, (48, 67), generator=g, dtype=torch.int8),
              (torch.rand(48, generator=g) / 64).to(dtype)]
    before = braze.reference.run(braze.parse(text), *inputs)[0]
    module = braze.parse(text)
    braze.run_pipeline(module, "func.func(braze-epilogue-fusion)")
    assert "i8> to" not in str(module) and "braze.fused_gemm" in str(module)
    _close(braze.reference.run(module, *inputs)[0], before, INT8_TOLERANCE[dtype])
    _close(braze.compile_mlir(text)(*inputs)[0], before, INT8_TOLERANCE[dtype])
    control = braze.compile_mlir(text, options={"epilogue_fusion": False})
    assert control.stats["fused_gemms"] == 0 and control.stats["gemms"] == 1
    _close(control(*inputs)[0], before, INT8_TOLERANCE[dtype])


def test_int8_weight_dynamic_depth():
    """A dynamic K, empty included (the product is then zeros), through the
    blocked widening of an f32 product and its short last block."""
    text = """
func.func @f(%x: tensor<?x?xf32>, %w: tensor<48x?xi8>, %s: tensor<48xf32>) -> tensor<?x48xf32> {
  %wf = braze.cast %w : tensor<48x?xi8> to tensor<48x?xf32>
  %t = braze.permute %wf [1, 0] : tensor<48x?xf32> -> tensor<?x48xf32>
  %y = braze.matmul %x, %t : tensor<?x?xf32>, tensor<?x48xf32> -> tensor<?x48xf32>
  %z = braze.mul %y, %s : tensor<?x48xf32>, tensor<48xf32> -> tensor<?x48xf32>
  return %z : tensor<?x48xf32>
}"""
    program = braze.compile_mlir(text)
    assert program.stats["fused_gemms"] == 1
    g = torch.Generator().manual_seed(5)
    for depth in (0, 5, 300):
        x = torch.randn(40, depth, generator=g)
        w = torch.randint(-128, 128, (48, depth), generator=g, dtype=torch.int8)
        s = torch.rand(48, generator=g)
        _close(program(x, w, s)[0], (x @ w.float().t()) * s, 1e-5)
