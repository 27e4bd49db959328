"""The CPU backend end to end: models and edge cases against eager PyTorch,
dynamic shapes, the compiled-library cache, and errors."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import braze
import braze.compiler  # the test patches it: loaded here, not by whichever test ran first

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "frontend"))
from test_models import MODELS, _inputs, _model, assert_close  # noqa: E402


@pytest.mark.parametrize("name", MODELS)
def test_compiled_models_match_eager(name):
    model, args = _model(name), _inputs(name)
    compiled = braze.compile(model, args)
    assert compiled.stats["kernels"] >= 1
    with torch.no_grad():
        assert_close(compiled(*args), model(*args))


def test_torch_compile_runs_on_the_cpu_backend(monkeypatch):
    compiled_graphs = []
    original = braze.compiler.compile_mlir

    def recording(*args, **kwargs):
        compiled_graphs.append(original(*args, **kwargs))
        return compiled_graphs[-1]

    monkeypatch.setattr(braze.compiler, "compile_mlir", recording)
    torch._dynamo.reset()
    model, (x,) = _model("mlp"), _inputs("mlp")
    with torch.no_grad():
        assert_close(torch.compile(model, backend="braze")(x), model(x))
    assert len(compiled_graphs) == 1 and compiled_graphs[0].stats["kernels"] >= 1


def test_dynamic_batch_three_sizes_one_compile():
    model = _model("prenorm_block")
    batch = torch.export.Dim("batch", min=1, max=64)
    compiled = braze.compile(model, (torch.randn(2, 8, 32),), dynamic_shapes=({0: batch},))
    for size in (1, 5, 33):
        x = torch.randn(size, 8, 32)
        with torch.no_grad():
            assert_close(compiled(x), model(x))
    with pytest.raises(braze.BrazeError, match="outside its range"):
        compiled(torch.randn(65, 8, 32))


SOFTMAX = """
func.func @softmax(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %m = braze.max %x dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
  %d = braze.sub %x, %m : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
  %e = braze.exp %d : tensor<?x64xf32>
  %s = braze.sum %e dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
  %q = braze.div %e, %s : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
  return %q : tensor<?x64xf32>
}
"""


def test_compile_mlir_runs_text_and_masks_with_infinities():
    program = braze.compile_mlir(SOFTMAX)
    x = torch.randn(7, 64)
    x[2, :10] = float("-inf")
    x[3, 5] = float("inf")
    x[4, 0] = float("nan")
    (y,) = program(x)
    torch.testing.assert_close(y, torch.softmax(x, -1), equal_nan=True)


def test_numpy_in_numpy_out():
    program = braze.compile_mlir(SOFTMAX)
    x = np.random.default_rng(0).standard_normal((3, 64), dtype=np.float32)
    (y,) = program(x)
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, torch.softmax(torch.from_numpy(x), -1).numpy(), rtol=1e-6)


def test_second_compile_hits_the_cache_without_a_compiler(logging_compiler):
    first = braze.compile_mlir(SOFTMAX)
    assert not first.stats["cache_hit"] and logging_compiler.runs == 1
    second = braze.compile_mlir(SOFTMAX)
    assert second.stats["cache_hit"] and logging_compiler.runs == 1
    x = torch.randn(2, 64)
    torch.testing.assert_close(second(x)[0], first(x)[0])


@pytest.mark.slow
def test_four_processes_compile_one_graph_into_one_artifact(private_cache, logging_compiler):
    script = textwrap.dedent(f"""
        import torch, braze
        program = braze.compile_mlir({SOFTMAX!r})
        x = torch.randn(3, 64)
        torch.testing.assert_close(program(x)[0], torch.softmax(x, -1))
    """)
    workers = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(4)]
    assert [w.wait(timeout=300) for w in workers] == [0, 0, 0, 0]
    assert logging_compiler.runs == 1
    libraries = list(private_cache.glob("*/*/lib.so"))
    assert len(libraries) == 1


def test_corrupted_cache_entry_is_rebuilt(private_cache, logging_compiler):
    braze.compile_mlir(SOFTMAX)
    (library,) = private_cache.glob("*/*/lib.so")
    library.unlink()  # a new file: this process still maps the old one
    library.write_bytes(b"not a shared library")
    program = braze.compile_mlir(SOFTMAX)
    assert logging_compiler.runs == 2 and not program.stats["cache_hit"]
    x = torch.randn(2, 64)
    torch.testing.assert_close(program(x)[0], torch.softmax(x, -1))


def test_compiler_failure_names_the_message_and_the_kept_source(monkeypatch):
    from braze.codegen.cpp import emitter

    monkeypatch.setattr(emitter, "PRELUDE", emitter.PRELUDE + "\n#error braze test failure\n")
    with pytest.raises(braze.BrazeError) as caught:
        braze.compile_mlir(SOFTMAX)
    message = caught.value.message
    assert "braze test failure" in message
    source = message.split(" on ")[1].split(";")[0]
    assert source.endswith("source.cpp") and "#error braze test failure" in open(source).read()


def test_integer_division_by_zero_is_an_error():
    program = braze.compile_mlir("""
    func.func @f(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
      %q = braze.div %a, %b : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
      return %q : tensor<4xi64>
    }""")
    a = torch.tensor([7, -7, 9, -2**63])
    (q,) = program(a, torch.tensor([2, 2, -1, -1]))
    assert q.tolist() == [3, -3, -9, -2**63]  # truncation; overflow wraps as in torch
    with pytest.raises(braze.BrazeError, match="integer division by zero"):
        program(a, torch.tensor([1, 0, 1, 1]))


def test_mismatched_dynamic_dims_are_refused_not_read_out_of_bounds():
    program = braze.compile_mlir("""
    func.func @f(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
      %s = braze.add %a, %b : tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
      return %s : tensor<?xf32>
    }""")
    with pytest.raises(braze.BrazeError, match="input #1 dim 0 is 3 but the kernel's domain has 5"):
        program(torch.randn(5), torch.randn(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_reductions_and_half_precision_match_eager(dtype):
    class Reductions(torch.nn.Module):
        def forward(self, x):
            return (x.sum(1), x.amax(0), x.mean((0, 1)), x.argmax(1),
                    torch.nn.functional.layer_norm(x, (x.shape[-1],)))

    model = Reductions()
    x = torch.randn(33, 4100).to(dtype)
    x[3, 7] = float("nan")
    compiled = braze.compile(model, (x,))
    # Sums of 4100 floats differ from eager's in the last bits, as eager's own
    # differ from the exact (double) sum: compare with double precision.
    expected = [r if r.dtype == torch.int64 else r.to(dtype) for r in model(x.double())]
    tolerance = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}.get(dtype, 1e-10)
    for got, want in zip(compiled(x), expected):
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance, equal_nan=True)


def test_long_sums_are_accurate():
    x = torch.rand(1, 1 << 22, dtype=torch.float32)
    program = braze.compile_mlir("""
    func.func @f(%x: tensor<1x?xf32>) -> tensor<1xf32> {
      %s = braze.sum %x dims [1] : tensor<1x?xf32> -> tensor<1xf32>
      return %s : tensor<1xf32>
    }""")
    exact = x.double().sum().item()
    assert abs(program(x)[0].item() - exact) / exact < 1e-6


def test_unknown_option_and_target_are_refused():
    with pytest.raises(braze.BrazeError, match="unknown compile option 'fuse_all'"):
        braze.compile_mlir(SOFTMAX, options={"fuse_all": True})
    with pytest.raises(braze.BrazeError, match="unknown target 'tpu'"):
        braze.compile_mlir(SOFTMAX, target="tpu")


def test_outputs_never_alias_inputs():
    program = braze.compile_mlir("""
    func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<2x2xf32>) {
      %r = braze.reshape %x : tensor<4xf32> -> tensor<2x2xf32>
      return %x, %r : tensor<4xf32>, tensor<2x2xf32>
    }""")
    x = torch.randn(4)
    same, reshaped = program(x)
    assert same.data_ptr() != x.data_ptr() and reshaped.data_ptr() != x.data_ptr()


def test_native_cache_keeps_kernel_source_readable(private_cache):
    program = braze.compile_mlir(SOFTMAX)
    source = program.stats["source"].read_text()
    assert "#pragma omp parallel" in source and "bz_exp" in source
    assert (program.stats["source"].parent / "lib.so").exists()


def test_bool_tensors_are_bytes_computed_as_bool():
    """i1 operands and results are uint8_t pointers in the kernels (gcc
    vectorizes a byte load converted to bool, not a bool load): a mask made
    by one kernel, read by a masked softmax and returned matches eager."""
    class MaskedSoftmax(torch.nn.Module):
        def forward(self, scores, keep):
            position = torch.arange(scores.shape[-1])
            hidden = (position[None, :] > position[:, None]) | ~keep
            return torch.softmax(scores.masked_fill(hidden, float("-inf")), -1), hidden

    model = MaskedSoftmax()
    keep = torch.rand(24) > 0.3
    keep[0] = True  # row 0 sees key 0 only: fully masked, it would be NaN
    args = (torch.randn(2, 24, 24), keep)
    compiled = braze.compile(model, args)
    source = compiled.stats["source"].read_text()
    kernels = source[source.index('extern "C"'):]  # after the prelude
    assert "bool*" not in kernels and re.search(r"const uint8_t\* __restrict in\d", kernels)
    for got, want in zip(compiled(*args), model(*args)):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)


def test_dependent_kernels_are_launched_one_after_the_other():
    program = braze.compile_mlir("""
    func.func @f(%x: tensor<4x8xf32>) -> tensor<8xf32> {
      %s = braze.sum %x dims [0] : tensor<4x8xf32> -> tensor<8xf32>
      %e = braze.exp %s : tensor<8xf32>
      return %e : tensor<8xf32>
    }""")
    assert program.stats["kernels"] == 2
    assert "_combo_" not in program.stats["source"].read_text()
    x = torch.randn(4, 8)
    torch.testing.assert_close(program(x)[0], x.sum(0).exp())


def test_strided_views_are_read_in_place_and_others_copied():
    program = braze.compile_mlir("""
    func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %s = braze.sub %a, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
      return %s : tensor<4x8xf32>
    }""")
    wide = torch.randn(4, 20)
    sliced = wide[:, 3:11]                       # outer stride 20: read in place
    broadcast = torch.randn(1, 8).expand(4, 8)   # outer stride 0
    transposed = torch.randn(8, 4).t()           # innermost stride 4: copied first
    for a, b in [(sliced, broadcast), (transposed, sliced), (broadcast, transposed)]:
        torch.testing.assert_close(program(a, b)[0], a - b)


def test_softmax_over_a_whole_tensor_keeps_its_row_buffer():
    """No parallel dims: the row buffer of exp lives in the single block."""
    class Softmax(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, 0)

    x = torch.randn(5)
    torch.testing.assert_close(braze.compile(Softmax(), (x,))(x), torch.softmax(x, 0))


def test_dead_gemm_results_are_overwritten_in_place_and_live_ones_are_not():
    program = braze.compile_mlir("""
    func.func @f(%a: tensor<4x3xf32>, %b: tensor<3x6xf32>, %c: tensor<3x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<24xf32>) {
      %m = braze.matmul %a, %b : tensor<4x3xf32>, tensor<3x6xf32> -> tensor<4x6xf32>
      %e = braze.exp %m : tensor<4x6xf32>
      %n = braze.matmul %a, %c : tensor<4x3xf32>, tensor<3x6xf32> -> tensor<4x6xf32>
      %r = braze.add %n, %e : tensor<4x6xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
      %v = braze.reshape %n : tensor<4x6xf32> -> tensor<24xf32>
      return %e, %r, %v : tensor<4x6xf32>, tensor<4x6xf32>, tensor<24xf32>
    }""", options={"fuse": False})
    steps = [s.run for s in program.program.steps if getattr(s.run, "name", "").startswith("braze_kernel")]
    # %m dies in its kernel; %n lives on through %v, and %e is returned.
    assert [step.reuse for step in steps] == [{0: 0}, {}]
    a, b, c = torch.randn(4, 3), torch.randn(3, 6), torch.randn(3, 6)
    e, r, v = program(a, b, c)
    torch.testing.assert_close(e, (a @ b).exp())
    torch.testing.assert_close(r, a @ c + (a @ b).exp())
    torch.testing.assert_close(v, (a @ c).reshape(24))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_column_reductions_match_eager(dtype):
    """Reductions over outer dims walk the innermost dim in SIMD lanes: full
    and partial blocks of lanes (200 = 64 + 64 + 64 + 8; 70 in one block),
    every kind, NaN, a row buffer (softmax over dim 0), and values stored
    beside the reduction."""
    class Columns(torch.nn.Module):
        def forward(self, x, y):
            return (x.sum(0), x.mean((0, 1)), x.amax(1), x.amin((0, 1)), x.argmax(0),
                    (x > 1).any(0), (x > -3).all(1), torch.softmax(y, 0), torch.sigmoid(y) * 2,
                    (torch.sigmoid(y) * 2).sum(0), y.var(0))

    model = Columns()
    x = torch.randn(3, 130, 200).to(dtype)
    x[1, 7, 9] = float("nan")
    y = torch.randn(333, 70).to(dtype)
    compiled = braze.compile(model, (x, y))
    assert "lane0" in compiled.stats["source"].read_text()
    tolerance = {torch.bfloat16: 2e-2, torch.float32: 1e-5}.get(dtype, 1e-10)
    for number, (got, want) in enumerate(zip(compiled(x, y), model(x, y))):
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance, equal_nan=True,
                                   msg=lambda m: f"output #{number}: {m}")


def test_column_reduction_over_a_dynamic_innermost_dim():
    program = braze.compile_mlir("""
    func.func @f(%x: tensor<?x?xf32>) -> tensor<?xf32> {
      %s = braze.sum %x dims [0] : tensor<?x?xf32> -> tensor<?xf32>
      return %s : tensor<?xf32>
    }""")
    for shape in [(1000, 1), (5, 63), (70, 130), (2, 1000)]:
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], x.sum(0), rtol=1e-5, atol=1e-5)


def test_values_stored_beside_a_reduction_are_written_by_its_loop():
    """An activation stored next to its mean (a squeeze-excitation block) is
    written while the mean's loop computes it: no second pass over the
    reduction points, no row buffer for its exp."""
    class ActivationAndMean(torch.nn.Module):
        def forward(self, x):
            y = torch.nn.functional.silu(x * 2)
            return y, y.mean(-1), y.mean(0)

    x = torch.randn(64, 300)
    compiled = braze.compile(ActivationAndMean(), (x,))
    source = compiled.stats["source"].read_text()
    assert "row_" not in source
    for kernel in source.split('extern "C"')[1:]:
        assert kernel.count("bz_exp(") <= 1
    for got, want in zip(compiled(x), ActivationAndMean()(x)):
        torch.testing.assert_close(got, want)


def test_only_kernels_evaluating_transcendentals_ask_for_wide_vectors():
    class Two(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(x) * 3, (x * 2).sum(-1)

    x = torch.randn(8, 100)
    compiled = braze.compile(Two(), (x,))
    parts = re.split(r'\n(?:extern "C"|static) ', compiled.stats["source"].read_text())[1:]
    kernels = [part for part in parts if re.match(r"(BZ_WIDE_VECTORS )?int braze_kernel_\d+\(", part)]
    assert sorted("BZ_WIDE_VECTORS" in k for k in kernels) == [False, True]
    assert all(("BZ_WIDE_VECTORS" in k) == ("bz_exp(" in k) for k in kernels)
    for got, want in zip(compiled(x), Two()(x)):
        torch.testing.assert_close(got, want)
