"""Kinds of braze ops that several stages sort by, named once and free of
MLIR, so that the runtime (which loads AOT packages without MLIR) and the
emitters agree on them."""

# The ops a target's emitter turns into one generated function each, and
# the runtime launches as one compiled kernel.
GENERATED_OPS = ("braze.kernel", "braze.fused_gemm", "braze.flash_attention")
