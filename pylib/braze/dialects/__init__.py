"""Python op classes of braze's dialects, as `mlir.dialects` holds upstream ones.

`braze.dialects.braze` is generated from dialects/BrazeOps.td.
"""
