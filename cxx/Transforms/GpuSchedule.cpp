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
struct BrazeGpuSchedulePass
    : braze::impl::BrazeGpuScheduleBase<BrazeGpuSchedulePass> {
  using BrazeGpuScheduleBase::BrazeGpuScheduleBase;

  void runOnOperation() override {
    // 1. Check the options. 2. Per kernel: the static number of reduction
    // points, if known. 3. Choose the strategy and the threads per block.
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
    Builder builder(&getContext());
    getOperation().walk([&](KernelOp kernel) {
      ArrayRef<int64_t> domain = kernel.getStaticDomain();
      StringRef strategy = "points";
      int64_t chosen = threads;
      if (!kernel.getReduce().empty()) {
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
        } else {
          strategy = "block_tree";
          if (known)
            chosen = std::min<int64_t>(
                threads, std::max<int64_t>(warp, llvm::PowerOf2Ceil(points)));
        }
      }
      kernel->setAttr(
          "braze.schedule",
          builder.getDictionaryAttr(
              {builder.getNamedAttr("strategy",
                                    builder.getStringAttr(strategy)),
               builder.getNamedAttr("threads",
                                    builder.getI64IntegerAttr(chosen))}));
      ++numScheduled;
    });
  }
};
} // namespace
