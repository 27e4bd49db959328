"""The Triton emitter (codegen/triton/emitter.py): the kernel form as
`@triton.jit` functions over blocks, one Python module per function; fused
GEMMs (gemm.py) and flash attention (attention.py) as tiled tl.dot kernels."""

from braze.codegen.triton.emitter import EXTENSION, LANGUAGE, TritonRenderer, render_module, render_unit

__all__ = ["EXTENSION", "LANGUAGE", "TritonRenderer", "render_module", "render_unit"]
