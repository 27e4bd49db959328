//===- CostModel.h - time estimates of ops and collectives -----*- C++ -*-===//
//
// The roofline the cost-driven passes share (braze-overlap's cost mode): an
// op takes the longer of its bytes over the memory bandwidth and its flops
// over the peak rate; a collective takes the link's latency plus the bytes
// each rank sends over the link's bandwidth. It is the model of the compile
// report's timeline (pylib/braze/report/cost.py), with its defaults; dynamic
// dims count as 1.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_TRANSFORMS_COSTMODEL_H
#define BRAZE_TRANSFORMS_COSTMODEL_H

#include "Dialect/BrazeOps.h"

#include "mlir/IR/Operation.h"

namespace braze {
/// What the estimates assume: one device's memory bandwidth (bytes/s) and
/// peak arithmetic rate (flops/s), and each rank's link (bytes/s, seconds
/// per collective).
struct Machine {
  double memoryBandwidth = 100e9;
  double peakFlops = 1e12;
  double linkBandwidth = 12.5e9;
  double linkLatency = 10e-6;
};

/// Bytes of a ranked tensor of int or float elements (dynamic dims as 1);
/// 0 for any other type.
int64_t tensorBytes(mlir::Type type);

/// Arithmetic of a kernel's scalar body at one point of its domain (not
/// index arithmetic, constants or loads).
int64_t pointFlops(KernelOp kernel);

/// Seconds `op` computes for: 0 for views, constants and parameters; a
/// kernel's (or combo's) body arithmetic times its domain; a GEMM's
/// multiply-adds from its shapes; every op's tensor operands read and
/// results written once.
double computeSeconds(mlir::Operation *op, const Machine &machine);

/// Seconds the collective `start` is in flight: the link's latency plus the
/// bytes each rank sends as ring algorithms do over a group of n (an
/// all_reduce 2(n-1)/n of its buffer, an all_gather (n-1) inputs, a
/// reduce_scatter and an all_to_all (n-1)/n, a broadcast the buffer once).
double collectiveSeconds(mlir::Operation *start, const Machine &machine);
} // namespace braze

#endif // BRAZE_TRANSFORMS_COSTMODEL_H
