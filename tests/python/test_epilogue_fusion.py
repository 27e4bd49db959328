"""braze-epilogue-fusion and the CPU's fused GEMM end to end: for every kind
of fusion (bias, pointwise chains with broadcast operands and casts, row
statistics, extra outputs), in f32 and bf16, the reference interpreter gives
the same before and after the pass, the compiled program matches it (and
eager PyTorch for modules), and the edge cases (M = 1, K not a multiple of
any block, dynamic M, decode shapes) hold. A control compiles each case
with epilogue_fusion off: its GEMMs stay library calls."""

import pytest
import torch

import braze
import braze.reference
import braze.codegen

# name -> (IR, input shapes with "M" for the rows, dtype).
CASES = {
    # nn.Linear + GELU: the weight transposed by a permute, M dynamic.
    "linear_gelu": ("""
func.func @f(%x: tensor<?x67xDT>, %w: tensor<48x67xDT>, %b: tensor<48xDT>) -> tensor<?x48xDT> {
  %t = braze.permute %w [1, 0] : tensor<48x67xDT> -> tensor<67x48xDT>
  %y = braze.addmm %b, %x, %t : tensor<48xDT>, tensor<?x67xDT>, tensor<67x48xDT> -> tensor<?x48xDT>
  %g = braze.gelu %y : tensor<?x48xDT>
  return %g : tensor<?x48xDT>
}""", [("M", 67), (48, 67), (48,)]),
    # Residual + LayerNorm: the add and the mean's sum fused, the rest a kernel.
    "residual_layernorm": ("""
func.func @f(%x: tensor<?x40xDT>, %w: tensor<40x24xDT>, %r: tensor<?x24xDT>) -> tensor<?x24xDT> {
  %p = braze.matmul %x, %w : tensor<?x40xDT>, tensor<40x24xDT> -> tensor<?x24xDT>
  %y = braze.add %p, %r : tensor<?x24xDT>, tensor<?x24xDT> -> tensor<?x24xDT>
  %c = braze.cast %y : tensor<?x24xDT> to tensor<?x24xf32>
  %mean = braze.mean %c dims [1] keepdim : tensor<?x24xf32> -> tensor<?x1xf32>
  %d = braze.sub %c, %mean : tensor<?x24xf32>, tensor<?x1xf32> -> tensor<?x24xf32>
  %sq = braze.mul %d, %d : tensor<?x24xf32>, tensor<?x24xf32> -> tensor<?x24xf32>
  %var = braze.mean %sq dims [1] keepdim : tensor<?x24xf32> -> tensor<?x1xf32>
  %eps = braze.constant dense<1.0e-5> : tensor<f32>
  %ve = braze.add %var, %eps : tensor<?x1xf32>, tensor<f32> -> tensor<?x1xf32>
  %rs = braze.rsqrt %ve : tensor<?x1xf32>
  %n = braze.mul %d, %rs : tensor<?x24xf32>, tensor<?x1xf32> -> tensor<?x24xf32>
  %o = braze.cast %n : tensor<?x24xf32> to tensor<?x24xDT>
  return %o : tensor<?x24xDT>
}""", [("M", 40), (40, 24), ("M", 24)]),
    # RMSNorm's sum of squares, a per-row scale ([M, 1], read by m).
    "rmsnorm_rows": ("""
func.func @f(%x: tensor<?x33xDT>, %w: tensor<33x20xDT>, %s: tensor<?x1xDT>) -> tensor<?x20xDT> {
  %p = braze.matmul %x, %w : tensor<?x33xDT>, tensor<33x20xDT> -> tensor<?x20xDT>
  %y = braze.mul %p, %s : tensor<?x20xDT>, tensor<?x1xDT> -> tensor<?x20xDT>
  %sq = braze.mul %y, %y : tensor<?x20xDT>, tensor<?x20xDT> -> tensor<?x20xDT>
  %ms = braze.sum %sq dims [1] keepdim : tensor<?x20xDT> -> tensor<?x1xDT>
  %rs = braze.rsqrt %ms : tensor<?x1xDT>
  %n = braze.mul %y, %rs : tensor<?x20xDT>, tensor<?x1xDT> -> tensor<?x20xDT>
  return %n : tensor<?x20xDT>
}""", [("M", 33), (33, 20), ("M", 1)]),
    # Attention scores: batched, K transposed by a permute, scale and mask,
    # softmax's row max fused.
    "scores_softmax": ("""
func.func @f(%q: tensor<3x?x16xDT>, %k: tensor<3x9x16xDT>, %mask: tensor<9xDT>) -> tensor<3x?x9xDT> {
  %kt = braze.permute %k [0, 2, 1] : tensor<3x9x16xDT> -> tensor<3x16x9xDT>
  %s = braze.bmm %q, %kt : tensor<3x?x16xDT>, tensor<3x16x9xDT> -> tensor<3x?x9xDT>
  %c = braze.constant dense<0.25> : tensor<DT>
  %scaled = braze.mul %s, %c : tensor<3x?x9xDT>, tensor<DT> -> tensor<3x?x9xDT>
  %masked = braze.add %scaled, %mask : tensor<3x?x9xDT>, tensor<9xDT> -> tensor<3x?x9xDT>
  %m = braze.max %masked dims [2] keepdim : tensor<3x?x9xDT> -> tensor<3x?x1xDT>
  %d = braze.sub %masked, %m : tensor<3x?x9xDT>, tensor<3x?x1xDT> -> tensor<3x?x9xDT>
  %e = braze.exp %d : tensor<3x?x9xDT>
  %sum = braze.sum %e dims [2] keepdim : tensor<3x?x9xDT> -> tensor<3x?x1xDT>
  %p = braze.div %e, %sum : tensor<3x?x9xDT>, tensor<3x?x1xDT> -> tensor<3x?x9xDT>
  return %p : tensor<3x?x9xDT>
}""", [(3, "M", 16), (3, 9, 16), (9,)]),
    # The transposed lhs (a permute), the pre-activation returned too (an
    # extra output), SiLU.
    "transposed_extra_output": ("""
func.func @f(%xt: tensor<29x?xDT>, %w: tensor<29x18xDT>) -> (tensor<?x18xDT>, tensor<?x18xDT>) {
  %x = braze.permute %xt [1, 0] : tensor<29x?xDT> -> tensor<?x29xDT>
  %p = braze.matmul %x, %w : tensor<?x29xDT>, tensor<29x18xDT> -> tensor<?x18xDT>
  %g = braze.silu %p : tensor<?x18xDT>
  return %p, %g : tensor<?x18xDT>, tensor<?x18xDT>
}""", [(29, "M"), (29, 18)]),
}

# Decode shapes (a static M of at most 16): the GEMV form, weight [N, K]
# (nn.Linear's; N = 83 leaves a short last group of weight rows) and
# [K, N]; with row statistics (sum, max) its second pass over the rows.
DECODE = {
    "decode_linear": ("""
func.func @f(%x: tensor<MxKxDT>, %w: tensor<83xKxDT>, %b: tensor<83xDT>) -> tensor<Mx83xDT> {
  %t = braze.permute %w [1, 0] : tensor<83xKxDT> -> tensor<Kx83xDT>
  %y = braze.addmm %b, %x, %t : tensor<83xDT>, tensor<MxKxDT>, tensor<Kx83xDT> -> tensor<Mx83xDT>
  %g = braze.relu %y : tensor<Mx83xDT>
  return %g : tensor<Mx83xDT>
}""", [("M", "K"), (83, "K"), (83,)]),
    "decode_row_major": ("""
func.func @f(%x: tensor<MxKxDT>, %w: tensor<Kx80xDT>, %r: tensor<Mx80xDT>) -> tensor<Mx80xDT> {
  %y = braze.matmul %x, %w : tensor<MxKxDT>, tensor<Kx80xDT> -> tensor<Mx80xDT>
  %s = braze.add %y, %r : tensor<Mx80xDT>, tensor<Mx80xDT> -> tensor<Mx80xDT>
  return %s : tensor<Mx80xDT>
}""", [("M", "K"), ("K", 80), ("M", 80)]),
    "decode_residual_layernorm": ("""
func.func @f(%x: tensor<MxKxDT>, %w: tensor<83xKxDT>, %r: tensor<Mx83xDT>) -> tensor<Mx83xDT> {
  %t = braze.permute %w [1, 0] : tensor<83xKxDT> -> tensor<Kx83xDT>
  %p = braze.matmul %x, %t : tensor<MxKxDT>, tensor<Kx83xDT> -> tensor<Mx83xDT>
  %y = braze.add %p, %r : tensor<Mx83xDT>, tensor<Mx83xDT> -> tensor<Mx83xDT>
  %c = braze.cast %y : tensor<Mx83xDT> to tensor<Mx83xf32>
  %mean = braze.mean %c dims [1] keepdim : tensor<Mx83xf32> -> tensor<Mx1xf32>
  %d = braze.sub %c, %mean : tensor<Mx83xf32>, tensor<Mx1xf32> -> tensor<Mx83xf32>
  %sq = braze.mul %d, %d : tensor<Mx83xf32>, tensor<Mx83xf32> -> tensor<Mx83xf32>
  %var = braze.mean %sq dims [1] keepdim : tensor<Mx83xf32> -> tensor<Mx1xf32>
  %eps = braze.constant dense<1.0e-5> : tensor<f32>
  %ve = braze.add %var, %eps : tensor<Mx1xf32>, tensor<f32> -> tensor<Mx1xf32>
  %rs = braze.rsqrt %ve : tensor<Mx1xf32>
  %n = braze.mul %d, %rs : tensor<Mx83xf32>, tensor<Mx1xf32> -> tensor<Mx83xf32>
  %o = braze.cast %n : tensor<Mx83xf32> to tensor<Mx83xDT>
  return %o : tensor<Mx83xDT>
}""", [("M", "K"), (83, "K"), ("M", 83)]),
    "decode_row_major_softmax": ("""
func.func @f(%x: tensor<MxKxDT>, %w: tensor<Kx80xDT>) -> tensor<Mx80xDT> {
  %s = braze.matmul %x, %w : tensor<MxKxDT>, tensor<Kx80xDT> -> tensor<Mx80xDT>
  %m = braze.max %s dims [1] keepdim : tensor<Mx80xDT> -> tensor<Mx1xDT>
  %d = braze.sub %s, %m : tensor<Mx80xDT>, tensor<Mx1xDT> -> tensor<Mx80xDT>
  %e = braze.exp %d : tensor<Mx80xDT>
  %sum = braze.sum %e dims [1] keepdim : tensor<Mx80xDT> -> tensor<Mx1xDT>
  %p = braze.div %e, %sum : tensor<Mx80xDT>, tensor<Mx1xDT> -> tensor<Mx80xDT>
  return %p : tensor<Mx80xDT>
}""", [("M", "K"), ("K", 80)]),
}

DTYPES = {"f32": (torch.float32, 2e-5), "bf16": (torch.bfloat16, 2e-2)}


def _inputs(shapes, rows, dtype, seed=0, k=None):
    g = torch.Generator().manual_seed(seed)
    made = []
    for shape in shapes:
        sizes = [rows if s == "M" else k if s == "K" else s for s in shape]
        made.append(torch.randn(sizes, generator=g).to(dtype))
    return made


def _close(actual, expected, tolerance):
    if expected.numel() == 0:
        return actual.shape == expected.shape
    scale = max(expected.float().abs().max().item(), 1.0)
    return (actual.float() - expected.float()).abs().max().item() <= tolerance * scale


# The CPU fuses f16/bf16 GEMMs only at decode shapes by default
# (epilogue_fusion_halves); these tests ask for the fused GEMM's half path.
HALVES = {"epilogue_fusion_halves": True}


def _check(text, inputs, tolerance, fused=True):
    before = braze.reference.run(braze.parse(text), *inputs)
    module = braze.parse(text)
    braze.run_pipeline(module, "func.func(braze-epilogue-fusion)")
    assert ("braze.fused_gemm" in str(module)) == fused
    after = braze.reference.run(module, *inputs)
    for b, a in zip(before, after):
        assert _close(a, b, tolerance), "the reference interpreter differs after the pass"
    program = braze.compile_mlir(text, options=HALVES)
    assert program.stats["fused_gemms"] == (1 if fused else 0)
    for b, out in zip(before, program(*inputs)):
        assert out.dtype == b.dtype
        assert _close(out, b, tolerance), f"compiled fused GEMM differs: {(out.float() - b.float()).abs().max()}"
    control = braze.compile_mlir(text, options={"epilogue_fusion": False})
    assert control.stats["fused_gemms"] == 0 and control.stats["gemms"] == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows", [1, 37, 300])
def test_fusion_kinds(case, dtype, rows):
    text, shapes = CASES[case]
    torch_dtype, tolerance = DTYPES[dtype]
    _check(text.replace("DT", dtype), _inputs(shapes, rows, torch_dtype, seed=rows), tolerance)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", DECODE)
@pytest.mark.parametrize("rows,depth", [(1, 64), (2, 17), (4, 67), (7, 33), (16, 200)])
def test_decode_gemv(case, dtype, rows, depth):
    text, shapes = DECODE[case]
    torch_dtype, tolerance = DTYPES[dtype]
    text = text.replace("DT", dtype).replace("Mx", f"{rows}x").replace("xK", f"x{depth}").replace("Kx", f"{depth}x")
    _check(text, _inputs(shapes, rows, torch_dtype, seed=depth, k=depth), tolerance)


ROW_MAJOR_BATCHED = """
func.func @f(%x: tensor<3xMxKxDT>, %w: tensor<3xKxNxDT>, %b: tensor<NxDT>) -> tensor<3xMxNxDT> {
  %p = braze.bmm %x, %w : tensor<3xMxKxDT>, tensor<3xKxNxDT> -> tensor<3xMxNxDT>
  %y = braze.add %p, %b : tensor<3xMxNxDT>, tensor<NxDT> -> tensor<3xMxNxDT>
  return %y : tensor<3xMxNxDT>
}"""


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,depth,cols", [(1, 70, 16500), (4, 300, 4200), (16, 300, 1100), (3, 1001, 37),
                                              (4, 5, 8), (0, 9, 8)])
def test_row_major_gemv_blocks_and_slices(dtype, rows, depth, cols):
    """The GEMV over B [K, N] splits N into blocks whose partial sums fit
    GEMV_SUMS_FLOATS (16500 columns at M = 1, 4200 at M = 4, 1100 at M = 16:
    two blocks) and K into slices summed in order afterwards (K = 1001: 16
    slices of 63 rows, steps of 8 and single rows), per batch; K = 5: single
    rows only; M = 0.
    bf16 takes the GEMV at M = 1-4 only (GEMV_HALF_ROW_MAJOR_ROWS)."""
    if dtype == "bf16" and rows not in range(1, 5):
        pytest.skip("a bf16 product outside M = 1-4 multiplies in panels")
    text = ROW_MAJOR_BATCHED.replace("DT", dtype).replace("Mx", f"{rows}x").replace("xK", f"x{depth}")
    text = text.replace("Kx", f"{depth}x").replace("xN", f"x{cols}").replace("<N", f"<{cols}")
    torch_dtype, tolerance = DTYPES[dtype]
    inputs = _inputs([(3, rows, depth), (3, depth, cols), (cols,)], rows, torch_dtype, seed=depth)
    (expected,) = braze.reference.run(braze.parse(text), *inputs)
    program = braze.compile_mlir(text)
    assert program.stats["fused_gemms"] == 1
    assert "col_blocks" in program.stats["source"].read_text()
    (actual,) = program(*inputs)
    assert _close(actual, expected, tolerance * 4)


@pytest.mark.parametrize("rows", [1, 2, 4])
def test_bf16_gemv_with_and_without_bf16_dot_products(rows, monkeypatch):
    """A bf16 GEMV multiplies pairs of bf16 neighbours where the compiler
    targets AVX512-BF16 (`bz_dot_bf16_pairs`, under the kernel's #if) and
    widens to f32 otherwise: both builds of one source, K = 4127 (128 steps
    of 32 and a tail of 31), against the reference interpreter."""
    text, shapes = DECODE["decode_linear"]
    text = text.replace("DT", "bf16").replace("Mx", f"{rows}x").replace("xK", "x4127").replace("Kx", "4127x")
    inputs = _inputs(shapes, rows, torch.bfloat16, seed=rows, k=4127)
    (expected,) = braze.reference.run(braze.parse(text), *inputs)
    for compiler in (None, "g++ -mno-avx512bf16"):
        if compiler:
            monkeypatch.setenv("CXX", compiler)
        program = braze.compile_mlir(text)
        assert "bz_dot_bf16_pairs<" in program.stats["source"].read_text()
        assert _close(program(*inputs)[0], expected, DTYPES["bf16"][1]), compiler


@pytest.mark.parametrize("case,depth,rows", [("linear_gelu", 67, 16), ("linear_gelu", 67, 300),
                                             ("linear_gelu", 4163, 17), ("linear_gelu", 0, 5),
                                             ("residual_layernorm", 40, 37), ("scores_softmax", 16, 33),
                                             ("transposed_extra_output", 29, 37)])
def test_bf16_panels_with_and_without_amx(case, depth, rows, monkeypatch):
    """bf16 panels multiply in `bz_gemm_bf16_pairs` where the CPU has
    AVX512-BF16 and no AMX, and through MKL otherwise: both forms (the CPU's
    flags set for the render), and the pairs form built without AVX512-BF16
    (its #else: the library), against the reference interpreter. The cases
    read B in place (a transposed bf16 weight) and packed (row-major B, an
    odd K), A transposed, batched, rows of one group of 16 and of several of
    32, K = 4163 in two blocks, K = 0. On a CPU without AVX512-BF16 -march=native
    builds the library's form of every source."""
    import braze.codegen.cpp.gemm as gemm

    text, shapes = CASES[case]
    default_depth = {"linear_gelu": 67, "residual_layernorm": 40, "scores_softmax": 16,
                     "transposed_extra_output": 29}[case]
    text = text.replace("DT", "bf16").replace(f"{default_depth}x", f"{depth}x").replace(f"x{default_depth}x",
                                                                                         f"x{depth}x")
    shapes = [tuple(depth if size == default_depth else size for size in shape) for shape in shapes]
    inputs = _inputs(shapes, rows, torch.bfloat16, seed=rows)
    expected = braze.reference.run(braze.parse(text), *inputs)
    for flags, compiler, pairs in (({"avx512_bf16"}, None, True), ({"avx512_bf16", "amx_bf16"}, None, False),
                                   ({"avx512_bf16"}, "g++ -mno-avx512bf16", True)):
        monkeypatch.setattr(gemm, "cpu_flags", lambda flags=flags: frozenset(flags))
        if compiler:
            monkeypatch.setenv("CXX", compiler)
        program = braze.compile_mlir(text, options=HALVES)
        assert program.stats["fused_gemms"] == 1
        assert ("bz_gemm_bf16_pairs<" in program.stats["source"].read_text()) == pairs
        for actual, wanted in zip(program(*inputs), expected):
            assert _close(actual, wanted, DTYPES["bf16"][1]), (flags, compiler)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_lone_gemms_at_decode_shapes_are_fused_gemms(dtype):
    """The CPU's decode-rows (4): a lone nn.Linear at M = 4, a batched
    product of single rows and a lone matmul at M = 2 become fused GEMMs
    (the GEMV; f64's panels) and match eager; at M = 5 the linear stays the
    library's."""
    from braze.testing.modules import Apply

    def lone(x, w, b, q, k, y, v):
        return torch.nn.functional.linear(x, w, b), torch.bmm(q, k), y @ v

    g = torch.Generator().manual_seed(3)
    for rows, fused in ((4, 3), (5, 2)):
        shapes = [(rows, 300), (70, 300), (70,), (8, 1, 64), (8, 64, 16), (2, 33), (33, 9)]
        inputs = [torch.randn(shape, generator=g).to(dtype) for shape in shapes]
        compiled = braze.compile(Apply(lone), tuple(inputs))
        assert compiled.stats["fused_gemms"] == fused and compiled.stats["gemms"] == 3 - fused
        tolerance = DTYPES["bf16"][1] if dtype == torch.bfloat16 else 2e-5
        for actual, expected in zip(compiled(*inputs), lone(*inputs)):
            assert actual.dtype == expected.dtype and _close(actual, expected, tolerance)


@pytest.mark.parametrize("rows", [1, 64])
def test_an_empty_depth_gives_the_epilogue_of_zeros(rows):
    """K = 0: the product is zeros (the BLAS needs row strides of at least
    1 for it, on the panel path; the GEMV reads nothing)."""
    def linear_gelu(x, w, b):
        return torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))

    from braze.testing.modules import Apply

    x, w, b = torch.randn(rows, 0), torch.randn(32, 0), torch.randn(32)
    compiled = braze.compile(Apply(linear_gelu), (x, w, b))
    assert compiled.stats["fused_gemms"] == 1
    torch.testing.assert_close(compiled(x, w, b), linear_gelu(x, w, b))


def test_nan_propagates_through_the_row_max():
    """A NaN in the product is the row's max, as eager's amax says."""
    text = CASES["scores_softmax"][0].replace("DT", "f32")
    q, k, mask = _inputs(CASES["scores_softmax"][1], 5, torch.float32)
    q[1, 2, 0] = float("nan")
    expected = braze.reference.run(braze.parse(text), q, k, mask)[0]
    out = braze.compile_mlir(text)(q, k, mask)[0]
    assert torch.isnan(out[1, 2]).all() and torch.isnan(expected[1, 2]).all()
    assert torch.equal(torch.isnan(out), torch.isnan(expected))


def test_every_c_like_renderer_spells_the_fused_gemm():
    """The GPU renderers spell a fused GEMM as a shared-memory tiled kernel
    (codegen/gpu_gemm.py; tests/python/targets/test_gpu_gemm.py runs it)."""
    text = CASES["linear_gelu"][0].replace("DT", "f32")
    module = braze.parse(text)
    braze.run_pipeline(module, "func.func(braze-epilogue-fusion)")
    for target in ("cuda", "hip", "opencl", "metal"):
        (emitted,) = braze.codegen.emit(module, target).values()
        assert [spec.strategy for spec in emitted.kernels.values()] == ["tiled_gemm"]


class _LinearGelu(torch.nn.Module):
    def __init__(self, d=48, hidden=96):
        super().__init__()
        self.up, self.down = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))


@pytest.mark.parametrize("dtype,options,fused", [(torch.float32, {}, 2), (torch.bfloat16, HALVES, 2),
                                                  (torch.bfloat16, {}, 0)])
def test_module_matches_eager(dtype, options, fused):
    """Linear + bias + GELU, Linear + residual + LayerNorm on 3-D input (the
    reshapes around the 2-D GEMMs), compiled by braze.compile, vs eager; in
    bf16 the CPU leaves the GEMMs (dynamic rows) to the library unless
    epilogue_fusion_halves asks for the fused GEMM."""
    torch.manual_seed(0)
    model = _LinearGelu().to(dtype).eval()
    x = torch.randn(2, 7, 48).to(dtype)
    compiled = braze.compile(model, (x,), dynamic_shapes=({1: torch.export.Dim("seq", max=64)},), options=options)
    assert compiled.stats["fused_gemms"] == fused and compiled.stats["gemms"] == 2 - fused
    for seq in (1, 7, 33):
        x = torch.randn(2, seq, 48).to(dtype)
        with torch.no_grad():
            expected = model(x)
        tolerance = 2e-4 if dtype == torch.float32 else 3e-2
        assert _close(compiled(x), expected, tolerance)


def test_torch_compile_backend():
    """torch.compile(backend="braze") runs the fused GEMMs (no fallback)."""
    torch.manual_seed(1)
    model = _LinearGelu().eval()
    x = torch.randn(3, 5, 48)
    with torch.no_grad():
        expected = model(x)
        actual = torch.compile(model, backend="braze")(x)
    assert _close(actual, expected, 2e-4)


def test_hand_written_scales_and_statistics():
    """A fused GEMM written by hand with a per-tensor lhs scale, per-column
    rhs scales, a scalar extra and both statistics, against the reference
    interpreter (also the GEMV form: static M = 3)."""
    for rows in ("?", "3"):
        text = f"""
func.func @f(%x: tensor<{rows}x19xf32>, %w: tensor<19x21xf32>, %sa: tensor<f32>, %sb: tensor<21xf32>,
             %k: tensor<f32>) -> (tensor<{rows}x21xf32>, tensor<{rows}xf32>, tensor<{rows}xf32>) {{
  %y, %s, %m = braze.fused_gemm %x, %w lhs_scale(%sa : tensor<f32>) rhs_scale(%sb : tensor<21xf32>)
      extras(%k : tensor<f32>) indexing ["scalar"] accumulator f32 reductions ["add", "max"]
      : (tensor<{rows}x19xf32>, tensor<19x21xf32>) -> tensor<{rows}x21xf32>, tensor<{rows}xf32>, tensor<{rows}xf32> {{
  ^bb0(%acc: f32, %c: f32):
    %v = arith.addf %acc, %c : f32
    %q = arith.mulf %v, %v : f32
    braze.gemm_yield %v, %q, %v : f32, f32, f32
  }}
  return %y, %s, %m : tensor<{rows}x21xf32>, tensor<{rows}xf32>, tensor<{rows}xf32>
}}"""
        inputs = _inputs([(3, 19), (19, 21), (), (21,), ()], 3, torch.float32)
        expected = braze.reference.run(braze.parse(text), *inputs)
        eager = (inputs[0] @ inputs[1]) * inputs[2] * inputs[3] + inputs[4]
        assert _close(expected[0], eager, 1e-5)
        for e, out in zip(expected, braze.compile_mlir(text)(*inputs)):
            assert _close(out, e, 2e-5)


@pytest.fixture(scope="module")
def plan_panels(tmp_path_factory):
    """The fused GEMM's panel plan (bz_plan_panels, bz_panel_rows), compiled
    alone: (batches, m, n, threads, whole_rows) -> (col_panels, cols, row
    panels' (first, count)), as the generated C++ computes them."""
    import ctypes

    from braze.codegen.cpp import gemm
    from braze.codegen.cpp.emitter import PRELUDE
    from braze.runtime.native_cache import NativeCache
    from braze.target.cpu import compile_flags

    source = "\n".join([PRELUDE, "#include <algorithm>\n#include <cstdlib>", gemm.GEMM_PRELUDE, f"""
extern "C" int64_t plan(int64_t batches, int64_t m, int64_t n, int64_t threads, int whole_rows, int64_t* out) {{
  const bz_panels p = bz_plan_panels(batches, m, n, threads, whole_rows, {gemm.PANEL_COLUMNS},
                                     {gemm.MIN_PANEL_COLUMNS}, {gemm.panel_floats()});
  out[0] = p.col_panels; out[1] = p.cols; out[2] = p.rows; out[3] = p.tasks;
  for (int64_t r = 0; r < p.row_panels; ++r) bz_panel_rows(r, m, p.row_panels, &out[4 + 2 * r], &out[5 + 2 * r]);
  return p.row_panels;
}}"""])
    library = NativeCache(directory=tmp_path_factory.mktemp("panels"), flags=tuple(compile_flags())).load(source)

    def run(batches, m, n, threads, whole_rows=False):
        out = (ctypes.c_int64 * 4100)()
        row_panels = library.plan(*(ctypes.c_int64(v) for v in (batches, m, n, threads)), int(whole_rows), out)
        rows = [(out[4 + 2 * r], out[5 + 2 * r]) for r in range(row_panels)]
        return out[0], out[1], out[2], out[3], rows

    return run


@pytest.mark.parametrize("batches,m,n", [(1, 6272, 384), (1, 394, 3072), (1, 394, 2304), (3, 300, 2200),
                                         (1, 1, 4096), (2, 7, 100), (1, 0, 256), (12, 197, 64)])
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("whole_rows", [False, True])
def test_panel_plan_balances_threads(plan_panels, batches, m, n, threads, whole_rows):
    """Every row and column in exactly one panel, no panel over the size cap
    (beyond 64 rows), tasks a multiple of the threads unless rows run out,
    and equal work per thread under OpenMP's static schedule (6272 rows on 2
    threads were panels of 5461 and 811 rows: one thread did 87%)."""
    from braze.codegen.cpp import gemm

    col_panels, cols, largest_rows, tasks, rows = plan_panels(batches, m, n, threads, whole_rows)
    assert tasks == batches * col_panels * len(rows)
    assert col_panels == 1 if whole_rows else (col_panels - 1) * cols < n <= col_panels * cols
    covered = [first + r for first, count in rows for r in range(count)]
    assert covered == list(range(m))
    counts = [count for _, count in rows]
    assert max(counts) - min(counts) <= 1 and largest_rows == max(1, max(counts))
    assert max(counts) <= max(64, gemm.panel_floats() // cols)
    if len(rows) < m:  # rows left to split: the tasks divide among the threads
        assert tasks % threads == 0
        per_thread = tasks // threads  # static schedule: contiguous, equal chunks
        widths = [min(cols, n - c * cols) for c in range(col_panels)]
        work = [sum(counts[(t // col_panels) % len(rows)] * widths[t % col_panels]
                    for t in range(w * per_thread, (w + 1) * per_thread)) for w in range(threads)]
        assert max(work) - min(work) <= max(widths) * per_thread


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("batches,columns", [(1, 2200), (3, 2200), (1, 100)])
def test_panels_share_out_among_threads(threads, batches, columns):
    """Large enough to run in parallel: column panels narrowed until they divide
    among the threads (2200 columns: 3 panels of 1024 on 2 threads become 4),
    rows split where columns cannot be (100 columns), batches counted in."""
    text = f"""
func.func @f(%x: tensor<{batches}x?x64xf32>, %w: tensor<{batches}x64x{columns}xf32>) -> tensor<{batches}x?x{columns}xf32> {{
  %p = braze.bmm %x, %w : tensor<{batches}x?x64xf32>, tensor<{batches}x64x{columns}xf32> -> tensor<{batches}x?x{columns}xf32>
  %g = braze.gelu %p : tensor<{batches}x?x{columns}xf32>
  return %g : tensor<{batches}x?x{columns}xf32>
}}"""
    x, w = _inputs([(batches, "M", 64), (batches, 64, columns)], 300, torch.float32)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        program = braze.compile_mlir(text)
        assert program.stats["fused_gemms"] == 1
        out = program(x, w)[0]
    finally:
        torch.set_num_threads(saved)
    assert _close(out, torch.nn.functional.gelu(torch.bmm(x, w)), 2e-5)


class Router(torch.nn.Module):
    """A mixture-of-experts router: 768 -> 4 logits and their softmax."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(768, 4, bias=False)

    def forward(self, x):
        return torch.softmax(self.gate(x), dim=-1)


def test_a_small_fused_gemm_calls_the_blas_outside_any_parallel_region():
    """Below the parallel threshold the panels run on the calling thread
    outside any OpenMP region (bz_parallel): MKL called inside an inactive
    `#pragma omp parallel if(false)` opened a nested team of its own on every
    call (Mixtral's router: 1.3-2.4 ms instead of 0.05)."""
    model = Router().eval()
    x = torch.randn(256, 768)
    program = braze.compile(model, (x,))
    assert program.stats["fused_gemms"] == 1
    source = program.stats["source"].read_text()
    (kernel,) = [text for text in source.split('extern "C" ')[1:] if "braze_kernel" in text[:60] and "bz_gemm(" in text]
    assert "bz_parallel(tasks > 1" in kernel and "#pragma omp parallel" not in kernel
    with torch.no_grad():
        torch.testing.assert_close(program(x), model(x), rtol=1e-5, atol=1e-6)
