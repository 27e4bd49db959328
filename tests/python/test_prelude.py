"""The C++ prelude of generated CPU kernels (pylib/braze/codegen/cpp/prelude.h):
every function, called from `#pragma omp simd` loops, against torch; the loops
must vectorize; half conversions bit-exact over all 65536 patterns."""

import ctypes
import ctypes.util
import os
import platform
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import braze
from braze.runtime.native_cache import NativeCache, compiler
from braze.target.cpu import compile_flags

PRELUDE = Path(braze.__file__).parent / "codegen" / "cpp" / "prelude.h"
# What generated code is compiled with. No extra flag changes a result (we never
# read errno nor FP exception flags); without them sqrt/rsqrt stay scalar, so does
# almost every loop on a host without AVX-512 (no masked operations), and float
# sin/cos/tan where gcc's tuning refuses gathers.
FLAGS = compile_flags()  # as the CPU backend compiles

F32, F64, I32, I64, U16, U8 = "float", "double", "int32_t", "int64_t", "uint16_t", "uint8_t"
# kernel name -> (argument types, result type, expression, vectorizes)
KERNELS = {}
# float computes these in double; double calls libm (not vectorized)
LIBM_IN_DOUBLE = ("erf", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "log1p", "exp2", "log2")
for t, s in ((F32, "f"), (F64, "d")):
    for f in ("exp", "expm1", "log", "tanh", "sigmoid", "sqrt", "rsqrt", "roundeven") + LIBM_IN_DOUBLE:
        KERNELS[f"{f}_{s}"] = ((t,), t, f"bz_{f}(a[i])", not (f in LIBM_IN_DOUBLE and t == F64))
    for f in ("pow", "atan2", "nan_max", "nan_min", "mod", "floordiv"):
        fmod_based = f in ("mod", "floordiv")
        KERNELS[f"{f}_{s}"] = ((t, t), t, f"bz_{f}(a[i], b[i])",
                               not fmod_based and not (f in ("pow", "atan2") and t == F64))
for t, s in ((I32, "i"), (I64, "l")):
    for f in ("mod", "floordiv"):  # no SIMD integer division on x86
        KERNELS[f"{f}_{s}"] = ((t, t), t, f"bz_{f}(a[i], b[i])", False)
for h in ("bf16", "f16"):
    KERNELS[f"{h}_to_f32"] = ((U16,), F32, f"bz_{h}_to_f32(a[i])", True)
    KERNELS[f"f32_to_{h}"] = ((F32,), U16, f"bz_f32_to_{h}(a[i])", True)
    KERNELS[f"round_{h}"] = ((F32,), F32, f"bz_round_{h}(a[i])", True)
for f8 in ("e4m3fn", "e5m2"):
    KERNELS[f"{f8}_to_f32"] = ((U8,), F32, f"bz_{f8}_to_f32(a[i])", True)
# the erf-form GELU exactly as the CPU backend emits it (its hottest use of bz_erf)
KERNELS["gelu_f"] = ((F32,), F32, "0.5f * a[i] * (1.0f + bz_erf(a[i] * 0.7071067690849304f))", True)

CTYPES = {F32: np.float32, F64: np.float64, I32: np.int32, I64: np.int64, U16: np.uint16, U8: np.uint8}


def kernel_source():
    """The prelude, then one loop per kernel; returns the text and each loop's line."""
    lines = PRELUDE.read_text().splitlines()
    loop_lines = {}
    for name, (args, result, expression, _) in KERNELS.items():
        params = ", ".join(f"const {t}* __restrict {p}" for t, p in zip(args, "ab"))
        lines.append(f'extern "C" void k_{name}({params}, {result}* __restrict y, long n) {{')
        lines.append("#pragma omp simd")
        lines.append(f"  for (long i = 0; i < n; i++) y[i] = {expression};")
        loop_lines[name] = len(lines)
        lines.append("}")
    return "\n".join(lines) + "\n", loop_lines


def is_gcc():
    version = subprocess.run([*shlex.split(compiler()), "--version"], capture_output=True, text=True).stdout
    return "Free Software Foundation" in version


def build(directory, flags):
    """The kernels' library and, with gcc, the lines of the loops it vectorized."""
    source, loop_lines = kernel_source()
    report = directory / "vectorized.txt"
    gcc = is_gcc()
    flags = tuple(flags) + ((f"-fopt-info-vec-optimized={report}",) if gcc else ())
    library = NativeCache(directory=directory / "cache", flags=flags).load(source)
    if not gcc:
        return library, None
    vectorized = {int(line.split(":")[1]) for line in report.read_text().splitlines() if "loop vectorized" in line}
    return library, {name for name, line in loop_lines.items() if line in vectorized}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build(tmp_path_factory.mktemp("prelude"), FLAGS)


@pytest.fixture(scope="module")
def call(built):
    library = built[0]

    def run(name, *inputs):
        args, result, _, _ = KERNELS[name]
        arrays = [np.ascontiguousarray(np.asarray(x, dtype=CTYPES[t])) for x, t in zip(inputs, args)]
        out = np.empty(arrays[0].size, dtype=CTYPES[result])
        pointers = [a.ctypes.data_as(ctypes.c_void_p) for a in (*arrays, out)]
        getattr(library, f"k_{name}")(*pointers, ctypes.c_long(out.size))
        return out

    return run


def test_loops_vectorize(built):
    if built[1] is None:
        if os.environ.get("BRAZE_REQUIRE_TOOLCHAINS"):
            pytest.fail(f"{compiler()} is not gcc: no vectorization report")
        pytest.skip("the vectorization report is a gcc option")
    assert built[1] == {name for name, kernel in KERNELS.items() if kernel[3]}


SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-45, -1e-45,
            1.1754942e-38, -1.1754942e-38, 3.4028235e38, -3.4028235e38, 88.72283, 88.72284, -87.33654,
            -103.97208, -103.97209, 89.0, -104.0, 9.0, 10.0, 3.92, 0.921875, -0.921875, 0.5625, -0.5625,
            20.0, -20.0, 1e-8, -1e-8]


def wide_floats(rng, count, dtype=np.float32):
    """Random finite values of every magnitude, both signs (log-uniform)."""
    span = 38 if dtype == np.float32 else 308
    mags = 10.0 ** rng.uniform(-span - 7 if dtype == np.float32 else -span - 15, span, count)
    return (mags * rng.choice([-1.0, 1.0], count)).astype(dtype)


def inputs(function, dtype, rng):
    """Specials, plus dense values where the function is not constant, plus wide random ones."""
    limits = {"exp": (-105, 90), "expm1": (-20, 90), "log": (0, 10), "tanh": (-12, 12),
              "sigmoid": (-110, 40), "erf": (-5, 5), "sqrt": (0, 1e4), "rsqrt": (0, 1e4),
              "sin": (-10, 10), "cos": (-10, 10), "tan": (-10, 10), "asin": (-1, 1), "acos": (-1, 1),
              "atan": (-20, 20), "sinh": (-90, 90), "cosh": (-90, 90), "log1p": (-1, 10),
              "exp2": (-151, 129), "log2": (0, 10), "roundeven": (-10, 10)}
    if dtype == np.float64:
        limits.update(exp=(-750, 712), expm1=(-40, 712), sigmoid=(-750, 40), tanh=(-22, 22),
                      sinh=(-711, 711), cosh=(-711, 711), exp2=(-1075, 1025))
    lo, hi = limits[function]
    tiny = rng.uniform(-1, 1, 50_000) * 10.0 ** rng.uniform(-40, 0, 50_000)
    parts = [np.array(SPECIALS, dtype=dtype), rng.uniform(lo, hi, 250_000).astype(dtype),
             wide_floats(rng, 100_000, dtype), tiny.astype(dtype)]
    if function in ("log", "sqrt", "rsqrt"):
        parts.append(np.abs(wide_floats(rng, 300_000, dtype)))
    return np.concatenate(parts)


def ulp_error(actual, reference, dtype):
    """|actual - reference| in units of the last place of `reference` rounded to dtype;
    0 where both are the same value, both NaN, or the same infinity."""
    info = np.finfo(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = reference.astype(dtype)
        unit = np.spacing(np.minimum(np.abs(rounded), info.max).astype(dtype)).astype(np.float64)
        error = np.abs(actual.astype(np.float64) - reference) / unit
    same = (actual == rounded) | (np.isnan(actual) & np.isnan(reference))
    return np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))


def exact_sigmoid(x):
    """torch.sigmoid in float64 overflows exp(-x) to 0 below -709; e/(1+e) does not."""
    e = torch.exp(-x.abs())
    return torch.where(x >= 0, 1 / (1 + e), e / (1 + e))


REFERENCES = {"exp": torch.exp, "expm1": torch.expm1, "log": torch.log, "tanh": torch.tanh,
              "sigmoid": exact_sigmoid, "erf": torch.erf, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
              "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos,
              "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "log1p": torch.log1p,
              "exp2": torch.exp2, "log2": torch.log2, "roundeven": torch.round}
# float32 against the exact value; float64 against torch (whose float64 sqrt is
# not correctly rounded, so sqrt gets 1 ulp there). float erf trades accuracy for
# speed (GELU is bound by it): 2.12 ulp, 1.26e-7 absolute over all floats. The
# functions a float computes in double round once: at most half an ulp (and a hair).
IN_DOUBLE = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "log1p", "exp2", "log2")
MAX_ULP_F32 = {"exp": 1.5, "expm1": 2, "log": 1, "tanh": 2, "sigmoid": 2.5, "erf": 2.2, "sqrt": 0.5, "rsqrt": 2,
               "roundeven": 0, **dict.fromkeys(IN_DOUBLE, 0.501)}
MAX_ULP_F64 = {"exp": 1.5, "expm1": 2.5, "log": 1.5, "tanh": 2.5, "sigmoid": 2.5, "erf": 1.5, "sqrt": 1, "rsqrt": 1.5,
               "roundeven": 0, **dict.fromkeys(IN_DOUBLE, 2)}  # libm against torch (Sleef): ~1 ulp each
# torch's float32 sinh and cosh overflow from 88.72 (its exp's limit) where the
# results are finite up to 89.4, and its log1p flushes subnormal results to 0:
# there, the exact value is the reference and torch's float32 result is not.
TORCH_F32_INEXACT = ("sinh", "cosh", "log1p")


@pytest.mark.parametrize("function", list(REFERENCES))
def test_unary_float32(call, function):
    rng = np.random.default_rng(1)
    x = inputs(function, np.float32, rng)
    y = call(f"{function}_f", x)
    exact = REFERENCES[function](torch.from_numpy(x).double()).numpy()
    error = ulp_error(y, exact, np.float32)
    assert error.max() <= MAX_ULP_F32[function], (x[error.argmax()], y[error.argmax()], exact[error.argmax()])
    # against torch's own float32 result: close everywhere, special values identical
    ours, theirs = torch.from_numpy(y), REFERENCES[function](torch.from_numpy(x))
    if function in TORCH_F32_INEXACT:
        off = torch.from_numpy(ulp_error(theirs.numpy(), exact, np.float32) >= 1)
        theirs = torch.where(off, torch.from_numpy(exact).float(), theirs)
    # atol: one subnormal step; torch.sigmoid flushes results below ~1e-38 to 0
    torch.testing.assert_close(ours, theirs, rtol=5e-7, atol=1e-37 if function == "sigmoid" else 3e-45,
                               equal_nan=True)
    special = ~torch.from_numpy(np.isfinite(x)) | (theirs == 0) | ~theirs.isfinite()
    torch.testing.assert_close(ours[special], theirs[special], rtol=0, atol=0, equal_nan=True)
    signed = special & ~theirs.isnan()
    assert torch.equal(ours[signed].signbit(), theirs[signed].signbit())


@pytest.mark.parametrize("function", list(REFERENCES))
def test_unary_float64(call, function):
    rng = np.random.default_rng(2)
    x = inputs(function, np.float64, rng)
    if function in ("sinh", "cosh"):  # torch's float64 ones overflow from 709.79, libm's from 710.48
        x = x[~(np.abs(x) > 709.78) | ~np.isfinite(x)]
    y = call(f"{function}_d", x)
    reference = REFERENCES[function](torch.from_numpy(x)).numpy()
    error = ulp_error(y, reference, np.float64)
    assert error.max() <= MAX_ULP_F64[function], (x[error.argmax()], y[error.argmax()], reference[error.argmax()])
    special = (~np.isfinite(x) | (x == 0)) & ~np.isnan(reference)
    assert np.array_equal(np.signbit(y[special]), np.signbit(reference[special]))


def test_erf_float32_dense(call):
    """float erf on every 61st float below 4.5 (17.8 million, both signs), where it
    is not yet +-1, against float64: absolute, ulp and relative error bounds, odd
    symmetry, monotonicity, and exactly +-1 where erf rounds to it."""
    bits = np.arange(0, np.float32(4.5).view(np.uint32), 61, dtype=np.uint32)
    x = bits.view(np.float32)  # increasing, from +0
    y = call("erf_f", x)
    exact = torch.erf(torch.from_numpy(x).double()).numpy()
    error = np.abs(y - exact)
    assert error.max() <= 1.3e-7, x[error.argmax()]
    assert ulp_error(y, exact, np.float32).max() <= 2.2
    normal = exact >= np.finfo(np.float32).tiny  # relative error as such: small |x| keeps it too
    relative = error[normal] / exact[normal]
    assert relative.max() <= 1.85e-7, x[normal][relative.argmax()]
    small = normal & (x < 0.7)  # the odd-polynomial branch
    assert (error[small] / exact[small]).max() <= 1.25e-7
    assert np.array_equal(call("erf_f", -x).view(np.uint32), y.view(np.uint32) ^ np.uint32(0x80000000))
    # monotone but for a few 1-ulp steps down (rounding of the exp2 argument)
    steps = np.diff(y.astype(np.float64))
    assert (steps >= -np.spacing(y[1:])).all() and (steps < 0).sum() <= 20
    assert (y[x >= 3.92] == 1).all() and (y[x < 3.914] < 1).all()  # exactly: 1 from 3.9192 on


def test_gelu_float32(call):
    """The erf-form GELU kernel against float64, within what its erf error allows, and
    close to torch's float32 GELU (whose error depends on the kernel torch picks for
    the CPU: up to 1.3e-6 with AVX-512, 3.8e-7 elsewhere)."""
    rng = np.random.default_rng(7)
    x = np.concatenate([np.linspace(-10, 10, 4_000_001, dtype=np.float32),
                        (rng.standard_normal(4_000_000) * 3).astype(np.float32),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30], dtype=np.float32)])
    ours = torch.from_numpy(call("gelu_f", x))
    xt = torch.from_numpy(x)
    exact = torch.nn.functional.gelu(xt.double())
    theirs = torch.nn.functional.gelu(xt)
    torch.testing.assert_close(ours.double(), exact, rtol=1e-6, atol=2e-7, equal_nan=True)
    finite = xt.isfinite()
    # 0.5 x (1 + erf(x/sqrt2)): erf's 1.26e-7 and the sum's rounding (2^-24 below 2),
    # scaled by x/2, then the two products' roundings (within one ulp of the result)
    ulp = torch.from_numpy(np.spacing(np.abs(exact.float().numpy()))).double()
    allowed = 0.5 * xt.double().abs() * (1.26e-7 + 2.0**-24) + ulp
    error = (ours.double() - exact).abs()
    assert (error[finite] <= allowed[finite]).all(), x[(error / allowed).nan_to_num(0).argmax()]
    # torch's vectorized float32 GELU gives NaN at +inf (float64: inf); ours, as the formula, inf
    torch.testing.assert_close(ours[finite], theirs[finite], rtol=1e-6, atol=1.5e-6)


def test_special_values(call):
    inf, nan = np.inf, np.nan
    expected = {
        "exp": {-inf: 0.0, inf: inf, nan: nan, -0.0: 1.0, -1000.0: 0.0, 1000.0: inf},
        "log": {0.0: -inf, -1.0: nan, inf: inf, -inf: nan, nan: nan, 1.0: 0.0},
        "log ": {-0.0: -inf},
        "tanh": {inf: 1.0, -inf: -1.0, -0.0: -0.0, nan: nan, 50.0: 1.0},
        "erf": {inf: 1.0, -inf: -1.0, -0.0: -0.0, nan: nan, 10.0: 1.0},
        "sigmoid": {inf: 1.0, -inf: 0.0, nan: nan, 0.0: 0.5, 1000.0: 1.0, -1000.0: 0.0},
        "expm1": {inf: inf, -inf: -1.0, -0.0: -0.0, nan: nan, 1e-45: 1e-45, -1e-45: -1e-45},
        "sqrt": {-1.0: nan, inf: inf, -0.0: -0.0},
        "rsqrt": {0.0: inf, inf: 0.0, -1.0: nan},
        "rsqrt ": {-0.0: -inf},  # a dict cannot hold both zeros
        "sin": {inf: nan, -inf: nan, nan: nan, -0.0: -0.0},
        "cos": {inf: nan, -inf: nan, nan: nan, -0.0: 1.0},
        "tan": {inf: nan, -inf: nan, nan: nan, -0.0: -0.0},
        "asin": {1.0: np.pi / 2, -1.0: -np.pi / 2, 1.5: nan, -inf: nan, nan: nan, -0.0: -0.0},
        "acos": {1.0: 0.0, -1.0: np.pi, -1.5: nan, inf: nan, nan: nan, 0.0: np.pi / 2},
        "atan": {inf: np.pi / 2, -inf: -np.pi / 2, nan: nan, -0.0: -0.0},
        "sinh": {inf: inf, -inf: -inf, nan: nan, -0.0: -0.0, 1000.0: inf, -1000.0: -inf},
        "cosh": {inf: inf, -inf: inf, nan: nan, -0.0: 1.0, 1000.0: inf, -1000.0: inf},
        "log1p": {-1.0: -inf, -2.0: nan, inf: inf, -inf: nan, nan: nan, -0.0: -0.0},
        "exp2": {inf: inf, -inf: 0.0, nan: nan, -0.0: 1.0, 3.0: 8.0, -2000.0: 0.0, 2000.0: inf},
        "log2": {0.0: -inf, -1.0: nan, inf: inf, nan: nan, 8.0: 3.0, 0.5: -1.0},
        "roundeven": {0.5: 0.0, 1.5: 2.0, 2.5: 2.0, -0.5: -0.0, -2.5: -2.0, inf: inf, nan: nan},
    }
    for function, cases in expected.items():
        for suffix, dtype in (("f", np.float32), ("d", np.float64)):
            x = np.array(list(cases), dtype=dtype)
            y = call(f"{function.strip()}_{suffix}", x)
            want = np.array(list(cases.values()), dtype=np.float64).astype(dtype)
            assert np.array_equal(y, want, equal_nan=True), (function, suffix, x, y)
            signed = ~np.isnan(want)
            assert np.array_equal(np.signbit(y[signed]), np.signbit(want[signed])), (function, suffix, x, y)
    # denormal results are kept, not flushed
    assert call("exp_f", [-100.0])[0] == np.float32(np.exp(-100.0))
    assert call("sigmoid_f", [-100.0])[0] == np.float32(np.exp(-100.0))
    assert call("log_f", [1e-45])[0] == np.float32(np.log(1.401298464324817e-45))


# FE_UNDERFLOW of <fenv.h>, which differs between architectures
FE_UNDERFLOW = {"x86_64": 0x10, "aarch64": 0x08}.get(platform.machine())


@pytest.mark.skipif(FE_UNDERFLOW is None, reason=f"FE_UNDERFLOW unknown on {platform.machine()}")
def test_exp_that_rounds_to_zero_does_not_underflow(call):
    """exp and sigmoid where the result rounds to 0 (a causal mask's -inf in a
    softmax) raise no underflow: on x86 every underflowing product costs a
    microcode assist, and such a softmax ran ten times slower. A subnormal
    result (exp(-90)) does underflow, which shows the flag is seen."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))

    def underflows(name, x):
        libm.feclearexcept(FE_UNDERFLOW)
        call(name, x)
        return bool(libm.fetestexcept(FE_UNDERFLOW))

    below = [-np.inf, -1e30, -1000.0]
    for suffix, lo, subnormal in (("f", -104.0, -90.0), ("d", -746.0, -720.5)):
        assert not underflows(f"exp_{suffix}", below + [lo] * 13), suffix
        assert not underflows(f"sigmoid_{suffix}", [np.inf, 1e30, -1e30, -np.inf] * 4), suffix
        assert underflows(f"exp_{suffix}", [subnormal] * 16), suffix


def test_trig_float32_every_magnitude(call):
    """sin, cos and tan of every 251st float bit pattern (17 million: every
    exponent, both signs, huge arguments whose reduction needs ~100 bits of
    2/pi) and of the floats nearest to multiples of pi/2 up to 2^20, against
    float64: correctly rounded but for the rare half-way hair."""
    bits = np.arange(0, 1 << 32, 251, dtype=np.uint64).astype(np.uint32)
    multiples = np.arange(1, 1 << 20, dtype=np.float64) * (np.pi / 2)
    near = multiples.astype(np.float32)
    x = np.concatenate([bits.view(np.float32), near, np.nextafter(near, np.float32(0)),
                        np.nextafter(near, np.float32(np.inf))])
    finite = np.isfinite(x)
    xd = torch.from_numpy(x).double()
    for function in ("sin", "cos", "tan"):
        y = call(f"{function}_f", x)
        exact = REFERENCES[function](xd).numpy()
        error = ulp_error(y, exact, np.float32)
        assert error.max() <= MAX_ULP_F32[function], (function, x[error.argmax()], y[error.argmax()])
        assert np.isnan(y[~finite]).all()


def test_atan2(call):
    rng = np.random.default_rng(8)
    values = np.array([0.0, -0.0, 1.0, -1.0, 3.5, -3.5, 1e-45, -1e-45, 3e38, -3e38, np.inf, -np.inf, np.nan])
    grid_y, grid_x = (a.ravel() for a in np.meshgrid(values, values))
    n = 1_000_000
    y = np.concatenate([grid_y, rng.standard_normal(n), wide_floats(rng, n)])
    x = np.concatenate([grid_x, rng.standard_normal(n), wide_floats(rng, n)])
    zero_or_not_finite = (y == 0) | (x == 0) | ~np.isfinite(y) | ~np.isfinite(x)
    grid = (np.arange(y.size) < grid_y.size) & zero_or_not_finite
    for suffix, dtype in (("f", np.float32), ("d", np.float64)):
        yt, xt = torch.from_numpy(y.astype(dtype)), torch.from_numpy(x.astype(dtype))
        ours = call(f"atan2_{suffix}", y, x)
        reference = torch.atan2(yt.double(), xt.double()).numpy()
        assert ulp_error(ours, reference, dtype).max() <= (0.501 if dtype == np.float32 else 1)
        # the C99 cases (zeros and infinities of either sign, NaN) exactly as torch
        theirs = torch.atan2(yt, xt).numpy()[grid]
        assert np.array_equal(ours[grid], theirs, equal_nan=True)
        signed = ~np.isnan(theirs)
        assert np.array_equal(np.signbit(ours[grid][signed]), np.signbit(theirs[signed]))


def test_pow(call):
    rng = np.random.default_rng(3)
    values = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf, np.nan,
              1e-45, 16777216.0, -16777217.0, 8388609.0, -8388609.0, 1e30, -1e30]
    grid_x, grid_y = (a.ravel() for a in np.meshgrid(values, values))
    n = 300_000
    x = np.concatenate([grid_x, rng.uniform(0, 20, n), -rng.integers(0, 40, n) * rng.uniform(0.5, 1.5, n).round(1),
                        wide_floats(rng, n)]).astype(np.float32)
    y = np.concatenate([grid_y, rng.uniform(-30, 30, n), rng.integers(-30, 30, n).astype(float),
                        rng.uniform(-2, 2, n)]).astype(np.float32)
    grid = torch.from_numpy(np.arange(x.size) < grid_x.size)
    for suffix, dtype in (("f", np.float32), ("d", np.float64)):
        ours = call(f"pow_{suffix}", x, y)
        xt, yt = torch.from_numpy(x.astype(dtype)), torch.from_numpy(y.astype(dtype))
        exact = torch.pow(xt.double(), yt.double()).numpy()  # float: through double, not rounded twice
        assert ulp_error(ours, exact, dtype).max() <= 1.0
        # the C99 special cases exactly as torch (float64 torch.pow may differ by an ulp elsewhere)
        theirs = torch.pow(xt, yt)
        special = grid & (~theirs.isfinite() | (theirs == 0) | (theirs.abs() == 1))
        theirs = theirs[special]
        torch.testing.assert_close(torch.from_numpy(ours)[special], theirs, rtol=0, atol=0, equal_nan=True)
        signed = ~theirs.isnan()
        assert torch.equal(torch.from_numpy(ours)[special][signed].signbit(), theirs[signed].signbit())


def test_nan_max_min(call):
    values = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.5, -7.25])
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    for suffix, dtype in (("f", torch.float32), ("d", torch.float64)):
        at, bt = torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype)
        for name, reference in (("nan_max", torch.maximum), ("nan_min", torch.minimum)):
            ours = torch.from_numpy(call(f"{name}_{suffix}", a, b))
            torch.testing.assert_close(ours, reference(at, bt), rtol=0, atol=0, equal_nan=True)


def test_integer_floordiv_mod(call):
    rng = np.random.default_rng(4)
    for suffix, dtype in (("i", np.int32), ("l", np.int64)):
        info = np.iinfo(dtype)
        edges = np.array([0, 1, -1, 2, -2, 7, -7, info.max, info.min, info.min + 1], dtype=dtype)
        a, b = (v.ravel() for v in np.meshgrid(edges, edges))
        a = np.concatenate([a, rng.integers(info.min, info.max, 100_000, dtype=dtype, endpoint=True),
                            rng.integers(-100, 100, 100_000, dtype=dtype)])
        b = np.concatenate([b, rng.integers(info.min, info.max, 100_000, dtype=dtype, endpoint=True),
                            rng.integers(-9, 9, 100_000, dtype=dtype)])
        keep = (b != 0) & ~((a == info.min) & (b == -1))  # torch traps on both
        at, bt = torch.from_numpy(a[keep]), torch.from_numpy(b[keep])
        assert np.array_equal(call(f"floordiv_{suffix}", a[keep], b[keep]), torch.floor_divide(at, bt).numpy())
        assert np.array_equal(call(f"mod_{suffix}", a[keep], b[keep]), torch.remainder(at, bt).numpy())
        # INT_MIN // -1 wraps instead of trapping
        assert call(f"floordiv_{suffix}", [info.min], [-1])[0] == info.min
        assert call(f"mod_{suffix}", [info.min], [-1])[0] == 0


def test_float_floordiv_mod(call):
    rng = np.random.default_rng(5)
    values = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -3.0, 1e-40, np.inf, -np.inf, np.nan, 1e30, -7.0])
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    a = np.concatenate([a, rng.uniform(-100, 100, 50_000), wide_floats(rng, 50_000).astype(np.float64)])
    b = np.concatenate([b, rng.uniform(-10, 10, 50_000), wide_floats(rng, 50_000).astype(np.float64)])
    for suffix, dtype in (("f", np.float32), ("d", np.float64)):
        at, bt = torch.from_numpy(a.astype(dtype)), torch.from_numpy(b.astype(dtype))
        for name, reference in (("floordiv", torch.floor_divide), ("mod", torch.remainder)):
            ours = torch.from_numpy(call(f"{name}_{suffix}", a, b))
            theirs = reference(at, bt)
            # torch's vectorized float32 fmod gives NaN when a/b overflows (or b is
            # subnormal); its scalar path, float64 and the prelude give the exact value.
            exact = reference(at.double(), bt.double()).to(theirs.dtype)
            theirs = torch.where(theirs.isnan() & ~exact.isnan(), exact, theirs)
            torch.testing.assert_close(ours, theirs, rtol=0, atol=0, equal_nan=True)


HALVES = {"bf16": torch.bfloat16, "f16": torch.float16}


@pytest.mark.parametrize("half", list(HALVES))
def test_half_to_float_all_patterns(call, half):
    bits = np.arange(1 << 16, dtype=np.uint16)
    ours = call(f"{half}_to_f32", bits)
    theirs = torch.from_numpy(bits.view(np.int16)).view(HALVES[half]).float().numpy()
    assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))  # NaN payloads too


@pytest.mark.parametrize("float8", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3fn", "e5m2"])
def test_float8_to_float_all_patterns(call, float8):
    """fp8 operands of scaled_mm and their GEMV (no table: the loop vectorises):
    every pattern, subnormals, zeros' signs, infinities (e5m2) and NaNs."""
    bits = np.arange(256, dtype=np.uint8)
    ours = call(f"{str(float8).split('_')[-1]}_to_f32", bits)
    theirs = torch.from_numpy(bits).view(float8).float().numpy()
    nan = np.isnan(theirs)
    assert np.array_equal(np.isnan(ours), nan)
    assert np.array_equal(ours[~nan].view(np.uint32), theirs[~nan].view(np.uint32))


def all_half_values(half):
    bits = np.arange(1 << 16, dtype=np.uint16).view(np.int16)
    return torch.from_numpy(bits).view(HALVES[half]).float().numpy()


def half_cases(half, rng):
    """Edges, every half value, the midpoints between neighbours (ties) and the
    floats either side of them, and random bit patterns (every exponent, NaNs)."""
    values = all_half_values(half)
    finite = np.unique(values[np.isfinite(values)])
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    edges = np.array([0.0, np.inf, np.nan, 65504.0, 65519.996, 65520.0, 65536.0, 2.9802322e-08, 2.9802326e-08,
                      5.9604645e-08, 6.1035156e-05, 3.3895314e38, 3.4028235e38, 1e-45], dtype=np.float32)
    random = rng.integers(0, 1 << 32, 3_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([edges, -edges, values, mids, np.nextafter(mids, np.float32(0)),
                           np.nextafter(mids, np.float32(np.inf)), random])


@pytest.mark.parametrize("half", list(HALVES))
def test_float_to_half(call, half):
    x = half_cases(half, np.random.default_rng(6))
    ours = call(f"f32_to_{half}", x)
    theirs = torch.from_numpy(x).to(HALVES[half]).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(x)
    assert np.array_equal(ours[~nan], theirs[~nan])
    assert np.isnan(call(f"{half}_to_f32", ours[nan])).all()
    rounded = call(f"round_{half}", x)
    expected = torch.from_numpy(x).to(HALVES[half]).float().numpy()
    assert np.array_equal(rounded[~nan].view(np.uint32), expected[~nan].view(np.uint32))
    assert np.isnan(rounded[nan]).all()
