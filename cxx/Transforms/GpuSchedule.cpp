//===- GpuSchedule.cpp - braze-gpu-schedule -------------------------------===//
//
// Annotates each braze.kernel with the launch shape the GPU renderers use.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "braze-gpu-schedule"

namespace braze {
#define GEN_PASS_DEF_BRAZEGPUSCHEDULE
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// The number of elements of `shape`, or kDynamic when an extent is.
int64_t staticCount(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t extent : shape) {
    if (ShapedType::isDynamic(extent))
      return ShapedType::kDynamic;
    count *= extent;
  }
  return count;
}

/// Whether every extent, point number and element offset of `kernel` fits
/// an int: its domain and every tensor it reads or writes are static with
/// fewer than 2^31 - 2^24 elements (the margin: the last block's threads
/// number points past the end before they return). A view an input is read
/// through in place may reach further: the runtime makes it contiguous.
bool fitsInt32(KernelOp kernel) {
  constexpr int64_t limit = (int64_t(1) << 31) - (int64_t(1) << 24);
  auto fits = [&](ArrayRef<int64_t> shape) {
    int64_t count = staticCount(shape);
    return !ShapedType::isDynamic(count) && count < limit;
  };
  if (!fits(kernel.getStaticDomain()))
    return false;
  for (Type type : llvm::concat<const Type>(kernel.getInputs().getTypes(),
                                            kernel.getResultTypes()))
    if (!fits(cast<RankedTensorType>(type).getShape()))
      return false;
  return true;
}

struct BrazeGpuSchedulePass
    : braze::impl::BrazeGpuScheduleBase<BrazeGpuSchedulePass> {
  using BrazeGpuScheduleBase::BrazeGpuScheduleBase;

  void runOnOperation() override {
    // 1. Check the options. 2. Per kernel: the static number of points or
    // reduction points, if known. 3. Choose the strategy, the threads per
    // block, the points per thread and the index width.
    int64_t warp;
    if (target == "hip")
      warp = 64;
    else if (target == "cuda" || target == "opencl" || target == "metal")
      warp = 32;
    else {
      emitError(getOperation().getLoc())
          << "braze-gpu-schedule: unknown target '" << target
          << "' (cuda, hip, opencl, metal)";
      return signalPassFailure();
    }
    if (threads < warp || !llvm::isPowerOf2_64(threads)) {
      emitError(getOperation().getLoc())
          << "braze-gpu-schedule: threads must be a power of two of at least "
          << warp << " on " << target << ", got "
          << static_cast<int64_t>(threads);
      return signalPassFailure();
    }
    if (elements < 1 || !llvm::isPowerOf2_64(elements)) {
      emitError(getOperation().getLoc())
          << "braze-gpu-schedule: elements must be a power of two, got "
          << static_cast<int64_t>(elements);
      return signalPassFailure();
    }
    if (warpRow < 0) {
      emitError(getOperation().getLoc())
          << "braze-gpu-schedule: warp-row must be at least 0, got "
          << static_cast<int64_t>(warpRow);
      return signalPassFailure();
    }
    // OpenCL's sub-groups are an extension (cl_khr_subgroups, which PoCL's
    // CPU device lacks) and their size is the device's choice.
    bool warpShuffles = target != "opencl";
    Builder builder(&getContext());
    getOperation().walk([&](KernelOp kernel) {
      ArrayRef<int64_t> domain = kernel.getStaticDomain();
      StringRef strategy = "points";
      int64_t chosen = threads;
      int64_t perThread = 1;
      if (kernel.getReduce().empty()) {
        int64_t points = staticCount(domain);
        if (!ShapedType::isDynamic(points) && points >= vectorPoints)
          perThread = elements;
      } else {
        bool known = true;
        int64_t points = 1;
        for (int64_t dim : kernel.getReduce()) {
          if (ShapedType::isDynamic(domain[dim]))
            known = false;
          else
            points *= domain[dim];
        }
        if (known && points <= shortRow) {
          strategy = "row_per_thread";
        } else if (known && warpShuffles && points <= warpRow * warp) {
          strategy = "warp_tree";
        } else {
          strategy = "block_tree";
          if (known)
            chosen = std::min<int64_t>(
                threads, std::max<int64_t>(warp, llvm::PowerOf2Ceil(points)));
        }
      }
      SmallVector<NamedAttribute> schedule{
          builder.getNamedAttr("strategy", builder.getStringAttr(strategy)),
          builder.getNamedAttr("threads", builder.getI64IntegerAttr(chosen))};
      if (perThread > 1)
        schedule.push_back(builder.getNamedAttr(
            "elements", builder.getI64IntegerAttr(perThread)));
      if (fitsInt32(kernel))
        schedule.push_back(
            builder.getNamedAttr("index_bits", builder.getI64IntegerAttr(32)));
      kernel->setAttr("braze.schedule", builder.getDictionaryAttr(schedule));
      ++numScheduled;
    });
  }
};
} // namespace
