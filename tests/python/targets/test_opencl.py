"""What only the opencl target does: its build cache and threads option
(the shared runs are in test_run.py; OpInfo's samples on PoCL in
frontend/test_opinfo.py, on the captures the CPU's run uses)."""

import pytest
import torch
from conftest import need

import braze
from braze import target as targets


@pytest.fixture(autouse=True)
def opencl():
    need("the opencl target", targets.get("opencl").compiler_missing())


def test_second_compile_hits_the_cache():
    text = """
    func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
      %y = braze.exp %x : tensor<16xf32>
      return %y : tensor<16xf32>
    }"""
    first = braze.compile_mlir(text, target="opencl", options={"threads": 64})
    second = braze.compile_mlir(text, target="opencl", options={"threads": 64})
    assert second.stats["cache_hit"] and second.stats["source"] == first.stats["source"]
    x = torch.randn(16)
    torch.testing.assert_close(second(x)[0], torch.exp(x))
    with pytest.raises(braze.BrazeError, match="power of two"):
        braze.compile_mlir(text, target="opencl", options={"threads": 100})


def test_scaled_mm_runs_fused_or_through_torch():
    """braze.scaled_mm with its epilogue is one fused GEMM (the 8-bit floats
    widened as they are staged, codegen/gpu_gemm.py); with epilogue fusion
    off it runs as torch._scaled_mm (on a GPU, the vendor's fp8 GEMM) and
    its epilogue as a kernel."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(8, 64, generator=g).to(torch.float8_e4m3fn)
    w = torch.randn(32, 64, generator=g).to(torch.float8_e4m3fn)
    scale_a, scale_b = torch.rand(8, 1, generator=g), torch.rand(1, 32, generator=g)

    def f(a, w, scale_a, scale_b):
        return torch.nn.functional.gelu(torch._scaled_mm(a, w.t(), scale_a, scale_b, out_dtype=torch.float32))

    expected = f(a, w, scale_a, scale_b)
    for fusion, counts in ((True, (0, 1)), (False, (1, 0))):
        compiled = braze.compile(f, (a, w, scale_a, scale_b), target="opencl", options={"epilogue_fusion": fusion})
        assert (compiled.stats["gemms"], compiled.stats["fused_gemms"]) == counts
        assert (compiled(a, w, scale_a, scale_b) - expected).abs().max() <= 1e-5 * expected.abs().max()
