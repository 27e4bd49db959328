//===- FoldLayouts.cpp - the braze-fold-layouts pass ----------------------===//
//
// Absorbs layout ops (permute, expand, slice, reshape) into their consumers so
// that no layout is materialised by a host-side copy: kernels read the source
// through an index map, GEMMs read strided views (a batched product over
// several batch dims instead of one merged batch that no view expresses), and
// where neither serves, one braze kernel copies. The strides and index maps
// it builds on are Transforms/ViewFolding.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"
#include "Transforms/SizeBounds.h"
#include "Transforms/ViewFolding.h"

#include "mlir/IR/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "braze-fold-layouts"

namespace braze {
#define GEN_PASS_DEF_BRAZEFOLDLAYOUTS
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
constexpr int64_t kDynamic = ShapedType::kDynamic;

//===----------------------------------------------------------------------===//
// Batched products over several batch dims
//===----------------------------------------------------------------------===//

/// The finest batch shape both `a` and `b` split into (size-1 dims
/// dropped), or nothing when their dims do not line up.
std::optional<SmallVector<int64_t>> commonBatch(ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b) {
  SmallVector<int64_t> left, right, common;
  for (int64_t size : a)
    if (size != 1)
      left.push_back(size);
  for (int64_t size : b)
    if (size != 1)
      right.push_back(size);
  if (llvm::any_of(left, ShapedType::isDynamic) ||
      llvm::any_of(right, ShapedType::isDynamic))
    return std::nullopt;
  size_t i = 0, j = 0;
  int64_t x = 0, y = 0;
  while (i < left.size() || j < right.size() || x > 1 || y > 1) {
    if (x <= 1) {
      if (i == left.size())
        return std::nullopt;
      x = left[i++];
    }
    if (y <= 1) {
      if (j == right.size())
        return std::nullopt;
      y = right[j++];
    }
    int64_t small = std::min(x, y);
    if (x % small || y % small)
      return std::nullopt;
    common.push_back(small);
    x /= small;
    y /= small;
  }
  return common;
}

/// An operand of a batched product before the reshape that merged its batch
/// dims: the reshape's input when it keeps the matrix dims.
Value unmergedOperand(Value operand) {
  auto reshape = operand.getDefiningOp<ReshapeOp>();
  if (!reshape)
    return operand;
  RankedTensorType from = typeOf(reshape.getInput()), to = typeOf(operand);
  if (from.getRank() < 2 ||
      from.getShape().take_back(2) != to.getShape().take_back(2))
    return operand;
  return reshape.getInput();
}

/// The sizes a reshape of `from` to `type` lists for `type`'s dynamic dims,
/// which are among its matrix (last two) dims, as `from`'s are.
SmallVector<Value> matrixSizes(OpBuilder &builder, Location loc, Value from,
                               RankedTensorType type) {
  SmallVector<Value> sizes;
  if (type.getNumDynamicDims() < 2)
    return sizes; // one dynamic dim follows from the element count
  int64_t offset = typeOf(from).getRank() - type.getRank();
  for (int64_t dim = 0; dim < type.getRank(); ++dim)
    if (type.isDynamicDim(dim))
      sizes.push_back(tensor::DimOp::create(builder, loc, from, dim + offset));
  return sizes;
}

/// `type`'s shape with `batch` for its batch dims: [batch..., rows, cols].
SmallVector<int64_t> withMatrixDims(ArrayRef<int64_t> batch,
                                    RankedTensorType type) {
  SmallVector<int64_t> shape(batch);
  llvm::append_range(shape, type.getShape().take_back(2));
  return shape;
}

/// The strides of `value` ([batch..., rows, cols]) viewed as [batch, rows,
/// cols], or nothing when that view would copy.
std::optional<SmallVector<int64_t>> batchStrides(Value value,
                                                 ArrayRef<int64_t> batch) {
  RankedTensorType type = typeOf(value);
  SmallVector<int64_t> shape = withMatrixDims(batch, type);
  std::optional<Layout> layout = viewLayout(value);
  bool same = ArrayRef<int64_t>(shape) == type.getShape();
  if (layout)
    return same ? layout->strides
                : viewStrides(type.getShape(), *layout, shape);
  if (!same)
    return std::nullopt;
  // Read as it is (a copy's result): row-major, as far as sizes are known.
  SmallVector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (int64_t dim = shape.size() - 1; dim >= 0; --dim) {
    strides[dim] = stride;
    stride = ShapedType::isDynamic(stride) || ShapedType::isDynamic(shape[dim])
                 ? kDynamic
                 : stride * shape[dim];
  }
  return strides;
}

/// How many library calls the runtime makes for a batched product whose
/// operands have these strides over `batch` (its result is contiguous):
/// one per index of the batch dims before the trailing ones a single
/// stride steps through in both (a dynamic stride is taken to step through
/// none, so this is an upper bound).
int64_t productCalls(ArrayRef<int64_t> batch,
                     ArrayRef<SmallVector<int64_t>> operandStrides) {
  int64_t first = 0;
  for (ArrayRef<int64_t> strides : operandStrides) {
    int64_t merged = batch.size() - 1;
    while (merged > 0 && !ShapedType::isDynamic(strides[merged]) &&
           strides[merged - 1] == strides[merged] * batch[merged])
      --merged;
    first = std::max(first, merged);
  }
  int64_t calls = 1;
  for (int64_t size : batch.take_front(first))
    calls *= size;
  return calls;
}

/// `value` ([batch..., rows, cols]) as [batch, rows, cols]: a view that only
/// splits or drops dims (batchStrides has its strides).
Value withBatch(OpBuilder &builder, Location loc, Value value,
                ArrayRef<int64_t> batch) {
  RankedTensorType type = typeOf(value);
  SmallVector<int64_t> shape = withMatrixDims(batch, type);
  if (ArrayRef<int64_t>(shape) == type.getShape())
    return value;
  RankedTensorType viewType = type.clone(shape);
  return ReshapeOp::create(builder, loc, viewType, value,
                           matrixSizes(builder, loc, value, viewType))
      .getResult();
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct FoldLayoutsPass
    : braze::impl::BrazeFoldLayoutsBase<FoldLayoutsPass> {
  using BrazeFoldLayoutsBase::BrazeFoldLayoutsBase;

  void remark(Operation *op, const Twine &message) {
    if (remarks)
      op->emitRemark() << message;
  }

  /// bmm(reshape(x), reshape(y)) whose reshapes merge batch dims no stride
  /// expresses -> reshape(bmm(x', y')) over the batch dims both split into.
  void foldBatches(BmmOp bmm) {
    Value lhs = unmergedOperand(bmm.getLhs()), rhs = unmergedOperand(bmm.getRhs());
    auto copies = [](Value operand) {
      auto reshape = operand.getDefiningOp<ReshapeOp>();
      return reshape && !viewLayout(operand).has_value() &&
             viewLayout(reshape.getInput()).has_value();
    };
    if (!copies(bmm.getLhs()) && !copies(bmm.getRhs()))
      return;
    RankedTensorType lhsType = typeOf(lhs), rhsType = typeOf(rhs);
    std::optional<SmallVector<int64_t>> batch =
        commonBatch(lhsType.getShape().drop_back(2), rhsType.getShape().drop_back(2));
    if (!batch || batch->empty()) {
      remark(bmm, "batch dims of the operands do not split alike: a copy "
                  "kernel makes the merged batch");
      return;
    }
    std::optional<SmallVector<int64_t>> lhsStrides = batchStrides(lhs, *batch);
    std::optional<SmallVector<int64_t>> rhsStrides = batchStrides(rhs, *batch);
    if (!lhsStrides || !rhsStrides) {
      remark(bmm, "an operand's batch dims do not split as views: a copy "
                  "kernel makes the merged batch");
      return;
    }
    // Each call is a library call from Python: 128 calls of MaxViT's
    // [2, 49, 32] x [2, 32, 49] windows took 11 ms where a copy and one
    // call took 1.1 (docs/cpu.md).
    int64_t calls = productCalls(*batch, {*lhsStrides, *rhsStrides});
    if (calls > maxProductCalls) {
      remark(bmm, "a batched product over strided views would make " +
                      Twine(calls) + " library calls: a copy kernel makes "
                      "the merged batch");
      return;
    }
    OpBuilder builder(bmm);
    Location loc = bmm.getLoc();
    Value newLhs = withBatch(builder, loc, lhs, *batch);
    Value newRhs = withBatch(builder, loc, rhs, *batch);
    RankedTensorType resultType = typeOf(bmm.getResult());
    SmallVector<int64_t> shape = withMatrixDims(*batch, resultType);
    Value product = BmmOp::create(builder, loc, resultType.clone(shape), newLhs, newRhs);
    Value merged = ReshapeOp::create(builder, loc, resultType, product,
                                     matrixSizes(builder, loc, product, resultType));
    bmm.getResult().replaceAllUsesWith(merged);
    bmm.erase();
    ++numBatchedProducts;
    remark(product.getDefiningOp(), "batched product over " +
                                        Twine(shape.size() - 2) +
                                        " batch dims reads strided views");
  }

  /// A GEMM operand that a BLAS cannot read in place becomes a copy kernel.
  void copyUnreadableOperands(Operation *gemm) {
    for (OpOperand &operand : gemm->getOpOperands()) {
      if (isa<AddmmOp>(gemm) && operand.getOperandNumber() == 0)
        continue; // the bias broadcasts: torch reads any strides
      Value value = operand.get();
      std::optional<Layout> layout = viewLayout(value);
      if (layout && isMatrixLayout(typeOf(value).getShape(), *layout))
        continue;
      if (!copyReadsInPlace(value)) {
        remark(gemm, "operand #" + Twine(operand.getOperandNumber()) +
                         " needs a copy that no copy kernel makes (a dynamic "
                         "shape, or no index map): left as is");
        continue;
      }
      OpBuilder builder(gemm);
      operand.set(copyKernel(builder, gemm->getLoc(), value));
      ++numCopyKernels;
      remark(gemm, "operand #" + Twine(operand.getOperandNumber()) +
                       (layout ? " has no unit stride" : " is no strided view") +
                       ": one copy kernel makes it contiguous");
    }
  }

  /// Why no copy kernel can make `concat` (nothing when one can): at most
  /// maxCopiedPieces pieces (each costs every element a select), static
  /// shapes but for one piece's length along the concat's dim (a dynamic
  /// KV cache's past), which the symbol ranges say is never 0 (every piece
  /// is read at every element, so none may be empty).
  std::optional<std::string> whyNotCopied(ConcatOp concat, SizeBounds &bounds) {
    if (static_cast<int64_t>(concat.getInputs().size()) > maxCopiedPieces)
      return "more than " + std::to_string(maxCopiedPieces) + " pieces";
    int64_t dim = concat.getDim();
    SmallVector<Value> dynamic;
    for (Value piece : concat.getInputs()) {
      RankedTensorType type = typeOf(piece);
      for (int64_t d = 0; d < type.getRank(); ++d)
        if (type.isDynamicDim(d) && d != dim)
          return std::string("a dynamic dim other than the concat's");
      if (type.isDynamicDim(dim))
        dynamic.push_back(piece);
    }
    if (dynamic.size() > 1)
      return std::string("more than one piece of a dynamic length");
    if (!dynamic.empty() && bounds.leastOfDim(dynamic.front(), dim) < 1)
      return std::string("a piece of a dynamic length that may be 0");
    return std::nullopt;
  }

  /// Concats still read whole once kernels read the pieces they could (by a
  /// graph output, attention's keys and values: a KV cache grown by a
  /// step), whose pieces a copy kernel can read (`whyNotCopied`).
  SmallVector<ConcatOp> concatsToCopy(func::FuncOp func) {
    SmallVector<ConcatOp> concats;
    SizeBounds bounds(func);
    func.walk([&](ConcatOp concat) {
      // A concat only concats read folds into their copy kernels.
      if (llvm::all_of(concat->getUsers(),
                       [](Operation *user) { return isa<ConcatOp>(user); }))
        return;
      if (std::optional<std::string> why = whyNotCopied(concat, bounds)) {
        remark(concat, "still read whole, but no copy kernel makes it (" +
                           Twine(*why) + "): left as is");
        return;
      }
      concats.push_back(concat);
    });
    return concats;
  }

  /// One copy kernel, reading the concat's pieces, makes the concat for
  /// its readers: torch's cat copies on one thread. A dynamic length is
  /// the dynamic piece's plus the others'.
  void copyConcat(ConcatOp concat) {
    OpBuilder builder(concat);
    builder.setInsertionPointAfter(concat);
    Location loc = concat.getLoc();
    int64_t dim = concat.getDim();
    SmallVector<Value> dynamicSizes;
    if (typeOf(concat.getResult()).isDynamicDim(dim)) {
      int64_t others = 0;
      Value length;
      for (Value piece : concat.getInputs()) {
        if (typeOf(piece).isDynamicDim(dim))
          length = tensor::DimOp::create(builder, loc, piece, dim);
        else
          others += typeOf(piece).getDimSize(dim);
      }
      dynamicSizes.push_back(arith::AddIOp::create(
          builder, loc, length,
          arith::ConstantIndexOp::create(builder, loc, others)));
    }
    Value copy = copyKernel(builder, loc, concat.getResult(), dynamicSizes);
    concat.getResult().replaceAllUsesExcept(copy, copy.getDefiningOp());
    ++numCopyKernels;
    remark(concat, "still read whole: one copy kernel reads its " +
                       Twine(concat.getInputs().size()) + " pieces");
  }

  void runOnOperation() override {
    // 1. Batched products whose merged batch would copy read strided views
    //    over the batch dims instead.
    // 2. Kernels read views' sources through index maps, and concats'
    //    pieces through selects.
    // 3. GEMM operands a BLAS cannot read in place, every other reshape
    //    that would copy, and concats read whole by something other than a
    //    kernel become copy kernels.
    // 4. Concats and views nothing reads any more are erased (also after
    //    step 2).
    func::FuncOp func = getOperation();
    SmallVector<BmmOp> products;
    func.walk([&](BmmOp bmm) { products.push_back(bmm); });
    for (BmmOp bmm : products)
      foldBatches(bmm);
    func.walk([&](KernelOp kernel) { numFoldedViews += foldViewsIntoKernel(kernel); });
    // What kernels no longer read (a padded max pool's slices of its padded
    // input) must not keep a concat read whole in step 3.
    eraseUnread(func);
    SmallVector<Operation *> gemms;
    func.walk([&](Operation *op) {
      if (isa<MatmulOp, BmmOp, AddmmOp>(op))
        gemms.push_back(op);
    });
    for (Operation *gemm : gemms)
      copyUnreadableOperands(gemm);
    SmallVector<ReshapeOp> reshapes;
    func.walk([&](ReshapeOp reshape) { reshapes.push_back(reshape); });
    for (ReshapeOp reshape : reshapes) {
      if (reshape.use_empty() || viewLayout(reshape.getResult()) ||
          !viewLayout(reshape.getInput()))
        continue;
      if (!hasIndexMap(reshape) || !reshape.getType().hasStaticShape()) {
        remark(reshape, "no strided view has this shape, and no copy kernel "
                        "makes it (a dynamic shape, or no index map): left "
                        "as is");
        continue;
      }
      OpBuilder builder(reshape);
      reshape.getResult().replaceAllUsesWith(
          copyKernel(builder, reshape.getLoc(), reshape.getResult()));
      ++numCopyKernels;
      remark(reshape, "no strided view has this shape: one copy kernel "
                      "makes it");
    }
    for (ConcatOp concat : concatsToCopy(func))
      copyConcat(concat);
    eraseUnread(func);
  }

  /// Erases the concats and views nothing reads (any more), readers first:
  /// a concat of a concat, a view of a view.
  static void eraseUnread(func::FuncOp func) {
    SmallVector<Operation *> views;
    func.walk([&](Operation *op) {
      if (isView(op) || isa<ConcatOp>(op))
        views.push_back(op);
    });
    for (Operation *view : llvm::reverse(views))
      if (view->use_empty())
        view->erase();
  }
};
} // namespace
