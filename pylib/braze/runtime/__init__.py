"""braze runtime: native libraries wrapped with Cython (no MLIR needed here)."""
