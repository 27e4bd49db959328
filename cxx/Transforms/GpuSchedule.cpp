//===- GpuSchedule.cpp - braze-gpu-schedule -------------------------------===//
//
// Annotates each braze.kernel and braze.fused_gemm with the launch shape the
// GPU renderers use.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"
#include "Transforms/SizeBounds.h"

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
/// A fused GEMM's block is kGemmThreadSide x kGemmThreadSide threads; it
/// walks K in blocks of kGemmTileK (one shared-memory stage each).
constexpr int64_t kGemmThreadSide = 16;
constexpr int64_t kGemmTileK = 16;

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

constexpr int64_t kInt32Limit = (int64_t(1) << 31) - (int64_t(1) << 24);

/// Whether the product of the bounds `boundOfDim(0..rank)` stays below
/// kInt32Limit (false where one is unbounded).
template <typename BoundOfDim>
bool countFitsInt32(BoundOfDim boundOfDim, int64_t rank) {
  int64_t count = 1;
  for (int64_t dim = 0; dim < rank; ++dim) {
    int64_t bound = boundOfDim(dim);
    if (ShapedType::isDynamic(bound))
      return false;
    count *= bound;
    if (count >= kInt32Limit)
      return false;
  }
  return true;
}

/// Whether every one of `tensors` has fewer than kInt32Limit elements.
bool tensorsFitInt32(ValueRange tensors, SizeBounds &bounds) {
  return llvm::all_of(tensors, [&](Value tensor) {
    return countFitsInt32(
        [&](int64_t dim) { return bounds.ofDim(tensor, dim); },
        cast<RankedTensorType>(tensor.getType()).getRank());
  });
}

/// Whether every extent, point number and element offset of `kernel` fits
/// an int: its domain and every tensor it reads or writes have fewer than
/// 2^31 - 2^24 elements, static or bounded by `braze.symbols` ranges (the
/// margin: the last block's threads number points past the end before
/// they return). A view an input is read through in place may reach
/// further: the runtime makes it contiguous.
bool fitsInt32(KernelOp kernel, SizeBounds &bounds) {
  return countFitsInt32(
             [&](int64_t dim) { return bounds.extent(kernel, dim); },
             kernel.getRank()) &&
         tensorsFitInt32(kernel.getInputs(), bounds) &&
         tensorsFitInt32(kernel.getResults(), bounds);
}

struct BrazeGpuSchedulePass
    : braze::impl::BrazeGpuScheduleBase<BrazeGpuSchedulePass> {
  using BrazeGpuScheduleBase::BrazeGpuScheduleBase;

  void runOnOperation() override {
    // 1. Check the options. 2. Per kernel: the static number of points or
    // reduction points, if known. 3. Choose the strategy, the threads per
    // block, the points per thread and the index width. 4. Per fused GEMM:
    // its tiles and index width.
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
    if (gemmTile < kGemmThreadSide || !llvm::isPowerOf2_64(gemmTile)) {
      emitError(getOperation().getLoc())
          << "braze-gpu-schedule: gemm-tile must be a power of two of at least "
          << kGemmThreadSide << ", got " << static_cast<int64_t>(gemmTile);
      return signalPassFailure();
    }
    // OpenCL's sub-groups are an extension (cl_khr_subgroups, which PoCL's
    // CPU device lacks) and their size is the device's choice.
    bool warpShuffles = target != "opencl";
    Builder builder(&getContext());
    SizeBounds bounds(getOperation());
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
      if (fitsInt32(kernel, bounds))
        schedule.push_back(
            builder.getNamedAttr("index_bits", builder.getI64IntegerAttr(32)));
      kernel->setAttr("braze.schedule", builder.getDictionaryAttr(schedule));
      ++numScheduled;
    });
    getOperation().walk([&](FusedGemmOp gemm) {
      gemm->setAttr("braze.schedule", gemmSchedule(gemm, builder, bounds));
      ++numGemms;
    });
  }

  /// A fused GEMM's tiles (see the pass description).
  DictionaryAttr gemmSchedule(FusedGemmOp gemm, Builder &builder,
                              SizeBounds &bounds) {
    auto lhs = cast<RankedTensorType>(gemm.getLhs().getType());
    int64_t mDim = lhs.getRank() - (gemm.getTransposeLhs() ? 1 : 2);
    int64_t rows = lhs.getDimSize(mDim);
    int64_t tileM = gemmTile;
    if (!ShapedType::isDynamic(rows) && rows < tileM)
      tileM = std::max<int64_t>(kGemmThreadSide, llvm::PowerOf2Ceil(rows));
    StringRef strategy =
        gemm.getReductions().empty() ? "tiled_gemm" : "tiled_gemm_rows";
    SmallVector<NamedAttribute> schedule{
        builder.getNamedAttr("strategy", builder.getStringAttr(strategy)),
        builder.getNamedAttr("threads", builder.getI64IntegerAttr(
                                            kGemmThreadSide * kGemmThreadSide)),
        builder.getNamedAttr("tile", builder.getDenseI64ArrayAttr(
                                         {tileM, gemmTile, kGemmTileK}))};
    // The outputs are [B..., M, N] (the statistics smaller), their dims
    // held by the operands. Tile starts and staged rows pass M or N by
    // less than a tile, which the margin below 2^31 covers.
    auto rhs = cast<RankedTensorType>(gemm.getRhs().getType());
    int64_t nDim = rhs.getRank() - (gemm.getTransposeRhs() ? 2 : 1);
    auto outputDimBound = [&](int64_t dim) {
      if (dim < lhs.getRank() - 2)
        return bounds.ofDim(gemm.getLhs(), dim);
      return dim == lhs.getRank() - 2 ? bounds.ofDim(gemm.getLhs(), mDim)
                                      : bounds.ofDim(gemm.getRhs(), nDim);
    };
    if (tensorsFitInt32(gemm->getOperands(), bounds) &&
        countFitsInt32(outputDimBound, lhs.getRank()))
      schedule.push_back(
          builder.getNamedAttr("index_bits", builder.getI64IntegerAttr(32)));
    return builder.getDictionaryAttr(schedule);
  }
};
} // namespace
