"""The Triton target without a GPU: its kernels run in Triton's interpreter
(TRITON_INTERPRET=1, on CPU tensors; tests/python/conftest.py sets it for
the session, as Triton reads it once per process) against eager, and
compile ahead of time for sm_90 (cubin) and gfx942 (hsaco) through Triton's
own compiler, in a child process.
The capture suite's runs are in test_run.py (shared with opencl and metal);
the autotuner's configuration space and cache are here too."""

import json
import os
import subprocess
import sys
import warnings

import pytest
import torch
from conftest import need
from kernels import MODEL_NAMES, model_kernels

import braze
from braze import target as targets
from braze.codegen.triton.emitter import PERSISTENT_LIMIT, render_module
from braze.runtime.autotune import Tuner, config_space, shape_class
from braze.target.triton import aot_compile
from braze.testing.kernels import kernel_form
from braze.testing.modules import Apply

# The AOT checks' targets: an H100/H200 and an MI300.
GPUS = {"cuda:90": "cubin", "hip:gfx942": "hsaco"}


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    need("the triton target", targets.get("triton").compiler_missing())


@pytest.fixture
def compiled_mode(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    need("the triton target", targets.get("triton").compiler_missing())


def _compile(function, args, **kwargs):
    return braze.compile(Apply(function), args, target="triton", **kwargs)


def _close(actual, expected, tolerance=1e-5):
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype
        torch.testing.assert_close(a, e, rtol=tolerance, atol=tolerance, equal_nan=True)


# -- the interpreter --------------------------------------------------------
@pytest.mark.parametrize("width", [300, 3000])
def test_persistent_and_looped_reductions_match_eager(interpreter, width):
    def f(x):
        return (x.sum(-1), x.amax(-1), x.amin(-1), x.argmax(-1), x.argmin(-1), torch.softmax(x, -1),
                torch.log_softmax(x, -1), x.var(-1))

    x = torch.randn(5, width)
    x[1, 2000 % width] = float("nan")
    x[2, :] = 0.5  # ties: the first index wins
    x[3, width // 3] = x[3, width - 1] = 9.0  # the maximum twice, in different blocks
    x[4, 7] = x[4, width - 2] = -9.0
    compiled = _compile(f, (x,))
    source = compiled.stats["source"].read_text()
    if width <= PERSISTENT_LIMIT:
        assert "RBLOCK: tl.constexpr = 512" in source and "for roffset" not in source
    else:
        assert "RBLOCK: tl.constexpr, INDEX: tl.constexpr)" in source and "for roffset in range(0, rnumel, RBLOCK):" in source
    _close(compiled(x), f(x))


def test_index_type_is_32_bits_only_when_every_offset_fits():
    """The launcher's INDEX: the farthest element of each tensor through its
    strides (meta tensors: shapes without storage), the domain's points."""
    import triton.language as tl

    from braze.runtime.triton import index_type

    assert index_type([torch.empty(4, 8)], 32, 256) == tl.int32
    near = torch.empty_strided((2**9, 2), (2**20, 1), device="meta")  # farthest element 2**29 + 1
    far = torch.empty_strided((2**11, 2), (2**20, 1), device="meta")  # a view reaching 2**31 - 2**20 + 2
    assert index_type([near], 2**10, 256) == tl.int32
    assert index_type([near, far], 2**12, 256) == tl.int64
    assert index_type([torch.empty(1).expand(2**16, 2**16)], 2**32, 256) == tl.int64  # points, not storage
    assert index_type([torch.empty(0, 2**40 // 8, device="meta")], 0, 256) == tl.int32  # empty: nothing read


def test_64_bit_indices_give_the_same_results(interpreter, monkeypatch):
    """Every kernel with INDEX = tl.int64 (the limit lowered to nothing)
    matches eager as the 32-bit ones do: strided and broadcast reads,
    persistent and looped reductions, argmax."""
    import braze.runtime.triton as runtime

    monkeypatch.setattr(runtime, "INDEX_LIMIT", 0)

    def f(x, y):
        return torch.softmax(x.t() * y, -1), x.sum(0), x.argmax(1), torch.tanh(x[:, ::2]).amax(1)

    x, y = torch.randn(2000, 6), torch.randn(1, 2000)
    _close(_compile(f, (x, y))(x, y), f(x, y))


def test_a_dynamic_reduced_dim_loops_and_serves_every_size(interpreter):
    def f(x):
        return torch.softmax(x, -1), x.argmax(-1), (x > 0).any(-1), (x > -3).all(-1)

    width = torch.export.Dim("width", min=2, max=5000)
    compiled = _compile(f, (torch.randn(3, 40),), dynamic_shapes=(({1: width},),))
    assert "for roffset" in compiled.stats["source"].read_text()
    for size in (2, 700, 2500):
        x = torch.randn(3, size)
        _close(compiled(x), f(x))


def test_math_functions_match_eager(interpreter):
    # tanh ... fmod go through libdevice (numpy stand-ins in the interpreter).
    def f(x, y):
        a = x.abs() + 0.5
        return (torch.tanh(x), torch.expm1(x), torch.log1p(a), torch.tan(x), torch.asin(x.clamp(-1, 1)),
                torch.acos(x.clamp(-1, 1)), torch.atan(x), torch.sinh(x), torch.cosh(x), torch.trunc(3 * x),
                torch.round(3 * x), torch.pow(a, y), torch.atan2(x, y), torch.fmod(3 * x, y),
                torch.erf(x), torch.rsqrt(a), torch.sqrt(a), torch.exp2(x), torch.log2(a),
                torch.nn.functional.gelu(x), torch.sigmoid(x), torch.floor(x), torch.ceil(x))

    x, y = torch.randn(64) * 1.5, torch.rand(64) + 0.5
    _close(_compile(f, (x, y))(x, y), f(x, y), 1e-5)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float64])
def test_integer_bool_and_double_kernels_match_eager(interpreter, dtype):
    def f(x, y):
        if dtype == torch.bool:
            return x & y, x | ~y, x ^ y, (x & y).any(0), x.all(0), x.to(torch.float32) * 2
        if dtype == torch.float64:
            return x * 1.1 + y, torch.exp(x), x.sum(0), x.amax(0), (x / y).to(torch.float32)
        return x * y + 7, x // y.abs().clamp(min=1), x % 5, x.sum(0), x.amax(0), x.argmax(0), torch.maximum(x, y)

    if dtype == torch.bool:
        x, y = torch.rand(9, 33) > 0.5, torch.rand(9, 33) > 0.3
    elif dtype == torch.float64:
        x, y = torch.randn(9, 33, dtype=dtype), torch.rand(9, 33, dtype=dtype) + 1
    else:
        x, y = torch.randint(-50, 50, (9, 33), dtype=dtype), torch.randint(-9, 9, (9, 33), dtype=dtype)
    _close(_compile(f, (x, y))(x, y), f(x, y), 1e-12)


def test_bf16_rounds_to_nearest_even_like_eager(interpreter):
    def f(x):
        return (x * 3).to(torch.bfloat16), x.to(torch.bfloat16).float() + 1, torch.exp(x.to(torch.bfloat16))

    x = torch.randn(1000) * 4
    x[:3] = torch.tensor([float("nan"), float("inf"), 3.0e38])
    x[3:6] = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8)])  # ties: to even
    rounded, widened, exp = _compile(f, (x,))(x)
    expected = f(x)
    _close((rounded, widened), expected[:2], 0)  # conversions: exact
    # exp in float32 (numpy's here) may differ from torch's by an ulp, and
    # so its bfloat16 by one.
    torch.testing.assert_close(exp, expected[2], rtol=2 ** -7, atol=0, equal_nan=True)


def test_opinfo_samples_match_eager_in_the_interpreter(interpreter):
    """One float32 OpInfo sample per op (an eighth of the ops by default; all
    of them, in float32 and bfloat16, with BRAZE_SLOW_TESTS=1)."""
    pytest.importorskip("expecttest", reason="OpInfo's database needs expecttest")
    from braze.testing.opinfo import opinfos, run_op, summarize

    full = os.environ.get("BRAZE_SLOW_TESTS") == "1"
    dtypes = (torch.float32, torch.bfloat16) if full else (torch.float32,)
    names = sorted(opinfos())
    bad, passed = [], 0
    for name in names if full else names[::8]:
        results = run_op(opinfos()[name], {"triton": (dtypes, 1)})
        bad += [f"{r.op} {r.dtype} {r.outcome}: {r.detail}" for r in results if r.outcome in ("mismatch", "error")]
        passed += summarize(results)["pass"]
    assert not bad, "\n".join(bad)
    assert passed >= (150 if full else 10)


def test_integer_division_by_zero_in_a_reduction_is_an_error(interpreter):
    program = braze.compile_mlir("""
    func.func @f(%a: tensor<4x3000xi64>, %b: tensor<4x3000xi64>) -> tensor<4xi64> {
      %q = braze.div %a, %b : tensor<4x3000xi64>, tensor<4x3000xi64> -> tensor<4x3000xi64>
      %s = braze.sum %q dims [1] : tensor<4x3000xi64> -> tensor<4xi64>
      return %s : tensor<4xi64>
    }""", target="triton")
    a = torch.randint(-100, 100, (4, 3000))
    b = torch.randint(1, 9, (4, 3000))
    torch.testing.assert_close(program(a, b)[0], torch.div(a, b, rounding_mode="trunc").sum(1))
    b[3, 2999] = 0
    with pytest.raises(braze.BrazeError, match="integer division by zero"):
        program(a, b)


def test_without_the_interpreter_or_a_gpu_the_target_says_what_is_missing(compiled_mode):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(braze.BrazeError, match="no CUDA or ROCm device.*TRITON_INTERPRET=1.*braze\\[triton\\]"):
        braze.compile(Apply(torch.relu), (torch.randn(4),), target="triton")


# -- ahead-of-time compiles ---------------------------------------------------
def _schedules(specs):
    """Each kernel with its schedule's own launch configuration."""
    return [(spec, config_space(spec)[0]) for spec in specs.values()]


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_every_capture_suite_kernel_compiles_ahead_of_time(gpu):
    need("the triton target", targets.get("triton").compiler_missing())
    jobs = []
    for model in MODEL_NAMES:
        _, kernels = model_kernels(model)
        source, specs = render_module(kernels)
        jobs.append((source, _schedules(specs)))
    binaries = aot_compile(jobs, gpu)
    assert [len(b) for b in binaries] == [len(kernels) for _, kernels in jobs] and all(binaries)
    for binary in (b for module in binaries for b in module):
        assert binary[:4] == b"\x7fELF"  # a cubin, or an hsaco code object


def test_every_strategy_and_config_compiles_ahead_of_time():
    """Persistent and looped reductions, argmax, bf16, a dynamic extent, a
    strided input, division: every configuration of the space, with 32- and
    64-bit indices, for sm_90."""
    need("the triton target", targets.get("triton").compiler_missing())
    text = """
    func.func @f(%x: tensor<?x3000xbf16>, %y: tensor<?x300xf32>, %a: tensor<8xi64>, %b: tensor<8xi64>)
        -> (tensor<?xbf16>, tensor<?xi64>, tensor<?x300xf32>, tensor<8xi64>) {
      %s = braze.sum %x dims [1] : tensor<?x3000xbf16> -> tensor<?xbf16>
      %m = braze.argmax %y dims [1] : tensor<?x300xf32> -> tensor<?xi64>
      %e = braze.tanh %y : tensor<?x300xf32>
      %q = braze.div %a, %b : tensor<8xi64>, tensor<8xi64> -> tensor<8xi64>
      return %s, %m, %e, %q : tensor<?xbf16>, tensor<?xi64>, tensor<?x300xf32>, tensor<8xi64>
    }"""
    triton = targets.get("triton")
    _, kernels = kernel_form(braze.parse(text), triton.pipeline(triton.options({"combo_kernels": False})))
    source, specs = render_module(kernels)
    assert {spec.strategy for spec in specs.values()} == {"points", "persistent", "looped"}
    every = [(spec, config, index) for spec in specs.values() for config in config_space(spec)
             for index in ("int32", "int64")]
    (binaries,) = aot_compile([(source, every)], "cuda:90")
    assert len(binaries) == len(every) and all(b[:4] == b"\x7fELF" for b in binaries)


def test_the_opinfo_samples_kernels_compile_ahead_of_time():
    """One float32 OpInfo sample per op (an eighth of the ops, for sm_90, by
    default; with BRAZE_SLOW_TESTS=1 every op, float32 and bfloat16, for
    sm_90 and gfx942)."""
    pytest.importorskip("expecttest", reason="OpInfo's database needs expecttest")
    need("the triton target", targets.get("triton").compiler_missing())
    from braze.testing.opinfo import opinfos, sample_model

    full = os.environ.get("BRAZE_SLOW_TESTS") == "1"
    dtypes = (torch.float32, torch.bfloat16) if full else (torch.float32,)
    triton = targets.get("triton")
    names = sorted(opinfos())
    jobs = []
    for name in names if full else names[::8]:
        info = opinfos()[name]
        for dtype in dtypes:
            if dtype not in info.supported_dtypes("cpu"):
                continue
            sample = next(iter(info.sample_inputs("cpu", dtype, requires_grad=False)), None)
            if sample is None:
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    program = braze.export(*sample_model(info, sample))
            except braze.BrazeError:
                continue  # refused or untraceable: test_opinfo covers those outcomes
            _, kernels = kernel_form(program.module, triton.pipeline(triton.options({"combo_kernels": False})))
            if kernels:
                source, specs = render_module(kernels)
                jobs.append((source, _schedules(specs)))
    assert len(jobs) >= (120 if full else 6)
    for gpu in sorted(GPUS) if full else ["cuda:90"]:
        binaries = aot_compile(jobs, gpu)  # a refused kernel fails here, naming each
        assert all(b[:4] == b"\x7fELF" for module in binaries for b in module)


def test_a_triton_compile_error_names_the_kernel_and_the_message():
    need("the triton target", targets.get("triton").compiler_missing())
    _, kernels = model_kernels("mlp")
    source, specs = render_module(kernels)
    # The first pointwise kernel's mask (the model's GEMMs are fused ones, which have none).
    at = source.index("xmask = x <")
    name = next(n for n in reversed(list(specs)) if 0 <= source.rfind(f"def {n}(", 0, at))
    broken = source[:at] + source[at:].replace("xmask = x <", "xmask = undefined_name <", 1)
    with pytest.raises(braze.BrazeError, match=f"(?s)could not compile 1 kernel.*kernel {name} .*undefined_name"):
        aot_compile([(broken, _schedules({name: specs[name]}))], "cuda:90")


def test_interpreted_and_compiled_kernels_do_not_mix_in_one_process(tmp_path):
    """Triton reads TRITON_INTERPRET once, at its first import: a program
    asking for the other mode later is a BrazeError, not a crash."""
    script = tmp_path / "mix.py"
    script.write_text(
        "import os, torch, triton, braze\n"
        "from braze.testing.modules import Apply\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "try:\n"
        "    braze.compile(Apply(torch.relu), (torch.randn(4),), target='triton')\n"
        "except braze.BrazeError as error:\n"
        "    print(error)\n")
    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environment)
    assert "cannot run interpreted in this process: triton was imported for compiled kernels" in run.stdout, run.stderr


# -- autotuning ---------------------------------------------------------------
def _specs(text):
    triton = targets.get("triton")
    _, kernels = kernel_form(braze.parse(text), triton.pipeline(triton.options({"combo_kernels": False})))
    return list(render_module(kernels)[1].values())


ROWS = """
func.func @f(%x: tensor<?x?xf32>, %y: tensor<64x100xf32>) -> (tensor<?xf32>, tensor<64xf32>, tensor<?x?xf32>) {
  %s = braze.sum %x dims [1] : tensor<?x?xf32> -> tensor<?xf32>
  %t = braze.sum %y dims [1] : tensor<64x100xf32> -> tensor<64xf32>
  %e = braze.exp %x : tensor<?x?xf32>
  return %s, %t, %e : tensor<?xf32>, tensor<64xf32>, tensor<?x?xf32>
}"""


def test_the_config_space_is_small_and_starts_with_the_schedules_choice():
    looped, persistent, points = sorted(_specs(ROWS), key=lambda s: s.strategy)
    assert (looped.strategy, persistent.strategy, points.strategy) == ("looped", "persistent", "points")
    for spec in (looped, persistent, points):
        space = config_space(spec)
        assert 2 <= len(space) <= 12 and len(set(space)) == len(space)
        assert space[0].num_warps == spec.threads // 32  # the schedule's threads, in warps
        for config in space:
            assert config.xblock & (config.xblock - 1) == 0 and 1 <= config.num_warps <= 16
    assert all(c.rblock and c.rblock & (c.rblock - 1) == 0 for c in config_space(looped))
    assert all(c.rblock is None and c.xblock * 128 <= 4096 for c in config_space(persistent))  # 100 -> RBLOCK 128
    assert shape_class(looped, [1000, 3]) == (1024, 4)


def test_the_tuner_times_once_per_shape_class_and_keeps_the_winner_on_disk(tmp_path):
    (spec, *_) = [s for s in _specs(ROWS) if s.strategy == "looped"]
    space = config_space(spec)
    timings = {config: 1.0 + k for k, config in enumerate(space)}
    timings[space[3]] = 0.5
    measured = []

    def measure(run):
        run()
        return timings[measured[-1]]

    first = Tuner(tmp_path, measure=measure)
    chosen = first.choose(spec, "hash", (1024, 4), "cuda:test", measured.append)
    assert chosen == space[3] and first.benchmarks == len(space)
    assert first.choose(spec, "hash", (1024, 4), "cuda:test", measured.append) == chosen  # memo
    assert first.benchmarks == len(space)
    second = Tuner(tmp_path, measure=measure)  # another process: the disk entry
    assert second.choose(spec, "hash", (1024, 4), "cuda:test", measured.append) == chosen
    assert second.benchmarks == 0
    second.choose(spec, "hash", (2048, 4), "cuda:test", measured.append)  # a new shape class
    assert second.benchmarks == len(space)
    entries = list((tmp_path / "triton-tune").rglob("*.json"))
    assert len(entries) == 2  # one per shape class
    for entry in entries:
        entry.write_text("{not json")
    third = Tuner(tmp_path, measure=measure)
    assert third.choose(spec, "hash", (1024, 4), "cuda:test", measured.append) == chosen
    assert third.benchmarks == len(space)  # the corrupt entry was timed again
    assert sum(json.loads(e.read_text() if e.read_text() != "{not json" else "null") is not None
               for e in entries) == 1  # and rewritten


def test_when_every_config_fails_the_error_lists_them(tmp_path):
    (spec, *_) = [s for s in _specs(ROWS) if s.strategy == "points"]

    def refuse(config):
        raise RuntimeError(f"out of resources for {config.xblock}")

    tuner = Tuner(tmp_path, measure=lambda run: run())
    with pytest.raises(braze.BrazeError, match="every Triton launch configuration failed") as error:
        tuner.choose(spec, "hash", (), "cuda:test", refuse)
    assert all(str(config) in str(error.value) for config in config_space(spec))


def test_ranks_of_a_distributed_job_choose_the_same_config(tmp_path):
    from braze.comm.launch import spawn_group
    from tuning_workers import choose_with_rank_timings

    chosen = spawn_group(choose_with_rank_timings, 2, "shm", args=(str(tmp_path),), deadline=120.0)
    # Alone, rank 0 would take config 0 and rank 1 config 1; the slowest
    # time per config across ranks makes the last config everyone's best.
    (index, size), other = chosen[0], chosen[1]
    assert other == (index, size) and index == size - 1


def test_the_interpreter_takes_the_largest_blocks_without_timing(tmp_path):
    tuner = Tuner(tmp_path, measure=lambda run: pytest.fail("timed in the interpreter"))
    for spec in _specs(ROWS):
        chosen = tuner.choose(spec, "hash", (), "cpu", lambda config: None)
        assert chosen.xblock * (chosen.rblock or 1) == max(c.xblock * (c.rblock or 1) for c in config_space(spec))
    assert not (tmp_path / "triton-tune").exists()


def test_autotune_is_an_option_in_the_cache_key():
    triton = targets.get("triton")
    assert triton.options({"autotune": False}).key() != triton.options().key()
