//===- FoldLayouts.cpp - the braze-fold-layouts pass ----------------------===//
//
// Absorbs layout ops (permute, expand, slice, reshape) into their consumers so
// that no layout is materialised by a host-side copy: kernels read the source
// through an index map, GEMMs read strided views (a batched product over
// several batch dims instead of one merged batch that no view expresses), and
// where neither serves, one braze kernel copies.
//
// At run time every op result that is not a view is contiguous, and views keep
// their source's strides; a reshape is a view when torch's stride rule allows
// it and a copy otherwise. The pass works out those strides (`viewLayout`)
// for static shapes, and for dynamic ones where the strides do not depend on
// the dynamic sizes.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/KernelEdits.h"
#include "Transforms/Passes.h"
#include "Transforms/SizeBounds.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#include <numeric>

#define DEBUG_TYPE "braze-fold-layouts"

namespace braze {
#define GEN_PASS_DEF_BRAZEFOLDLAYOUTS
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
constexpr int64_t kDynamic = ShapedType::kDynamic;

RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

bool isView(Operation *op) {
  return isa_and_present<PermuteOp, ExpandOp, SliceOp, ReshapeOp>(op);
}

//===----------------------------------------------------------------------===//
// Strides at run time
//===----------------------------------------------------------------------===//

/// The element strides a value has at run time (kDynamic where they depend
/// on a dynamic size); `contiguous` when they are row-major's.
struct Layout {
  SmallVector<int64_t> strides;
  bool contiguous = false;
};

Layout contiguousLayout(ArrayRef<int64_t> shape) {
  Layout layout{SmallVector<int64_t>(shape.size()), true};
  int64_t step = 1;
  for (int64_t dim = shape.size() - 1; dim >= 0; --dim) {
    layout.strides[dim] = step;
    step = ShapedType::isDynamic(step) || ShapedType::isDynamic(shape[dim])
               ? kDynamic
               : step * shape[dim];
  }
  return layout;
}

/// torch's rule for `view`: the strides of `from` (with `layout`) reshaped to
/// `to`, or nothing when no view has that shape (torch then copies).
std::optional<SmallVector<int64_t>> viewStrides(ArrayRef<int64_t> from,
                                                const Layout &layout,
                                                ArrayRef<int64_t> to) {
  if (layout.contiguous)
    return contiguousLayout(to).strides;
  if (llvm::any_of(from, ShapedType::isDynamic) ||
      llvm::any_of(to, ShapedType::isDynamic) ||
      llvm::any_of(layout.strides, ShapedType::isDynamic) || from.empty())
    return std::nullopt;
  ArrayRef<int64_t> stride = layout.strides;
  SmallVector<int64_t> result(to.size(), 1);
  int64_t viewDim = to.size() - 1;
  int64_t chunkBase = stride.back(), tensorCount = 1, viewCount = 1;
  for (int64_t dim = from.size() - 1; dim >= 0; --dim) {
    tensorCount *= from[dim];
    if (dim == 0 ||
        (from[dim - 1] != 1 && stride[dim - 1] != tensorCount * chunkBase)) {
      while (viewDim >= 0 && (viewCount < tensorCount || to[viewDim] == 1)) {
        result[viewDim] = viewCount * chunkBase;
        viewCount *= to[viewDim];
        --viewDim;
      }
      if (viewCount != tensorCount)
        return std::nullopt;
      if (dim > 0) {
        chunkBase = stride[dim - 1];
        tensorCount = viewCount = 1;
      }
    }
  }
  if (viewDim != -1)
    return std::nullopt;
  return result;
}

/// The run-time layout of `value`, or nothing when a reshape on the way makes
/// a copy (or a slice has operand bounds: its strides are unknown here).
std::optional<Layout> viewLayout(Value value) {
  Operation *op = value.getDefiningOp();
  ArrayRef<int64_t> shape = typeOf(value).getShape();
  if (!isView(op))
    return contiguousLayout(shape);
  std::optional<Layout> source = viewLayout(op->getOperand(0));
  if (!source)
    return std::nullopt;
  Layout layout;
  if (auto permute = dyn_cast<PermuteOp>(op)) {
    for (int64_t dim : permute.getPermutation())
      layout.strides.push_back(source->strides[dim]);
    layout.contiguous =
        source->contiguous && llvm::is_sorted(permute.getPermutation());
    return layout;
  }
  if (auto expand = dyn_cast<ExpandOp>(op)) {
    ArrayRef<int64_t> from = typeOf(expand.getInput()).getShape();
    int64_t offset = shape.size() - from.size();
    layout.strides.assign(offset, 0);
    for (auto [dim, size] : llvm::enumerate(from))
      layout.strides.push_back(size == 1 && shape[dim + offset] != 1
                                   ? 0
                                   : source->strides[dim]);
    layout.contiguous =
        source->contiguous && ArrayRef(shape).drop_front(offset) == from &&
        llvm::all_of(ArrayRef(shape).take_front(offset),
                     [](int64_t size) { return size == 1; });
    return layout;
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    std::optional<int64_t> step = slice.getStaticBound(2);
    if (!slice.getStaticBound(0) || !step)
      return std::nullopt;
    layout.strides = source->strides;
    int64_t &stride = layout.strides[slice.getDim()];
    if (!ShapedType::isDynamic(stride))
      stride *= *step;
    layout.contiguous = false;
    return layout;
  }
  auto reshape = cast<ReshapeOp>(op);
  std::optional<SmallVector<int64_t>> strides = viewStrides(
      typeOf(reshape.getInput()).getShape(), *source, shape);
  if (!strides)
    return std::nullopt;
  layout.strides = *strides;
  layout.contiguous = source->contiguous;
  return layout;
}

/// Whether a BLAS reads the last two dims of a tensor with `layout` and
/// `shape` in place: one of them has unit stride (or size 1).
bool isMatrixLayout(ArrayRef<int64_t> shape, const Layout &layout) {
  size_t rank = shape.size();
  for (size_t dim : {rank - 1, rank - 2})
    if (shape[dim] == 1 || layout.strides[dim] == 1)
      return true;
  return false;
}

//===----------------------------------------------------------------------===//
// Index maps: a kernel reads a view's source instead of the view
//===----------------------------------------------------------------------===//

/// Builds index arithmetic in front of one tensor.extract.
struct IndexBuilder {
  OpBuilder &builder;
  Location loc;
  Value constant(int64_t value) {
    return arith::ConstantIndexOp::create(builder, loc, value);
  }
  Value add(Value a, Value b) { return arith::AddIOp::create(builder, loc, a, b); }
  Value mul(Value a, int64_t b) {
    return b == 1 ? a : arith::MulIOp::create(builder, loc, a, constant(b));
  }
  // Indices are never negative: the signed forms (the kernel form's) serve.
  Value div(Value a, int64_t b) {
    return b == 1 ? a : arith::DivSIOp::create(builder, loc, a, constant(b));
  }
  Value rem(Value a, int64_t b) {
    return arith::RemSIOp::create(builder, loc, a, constant(b));
  }
};

/// The groups of a reshape: consecutive runs of `from` and `to` dims with the
/// same element count, size-1 dims joining the group before them; a dynamic
/// dim only alone, mapped to a dynamic dim (so at most one on each side:
/// then the element count makes them equal). Empty when the shapes do not
/// split so.
SmallVector<std::pair<SmallVector<int64_t>, SmallVector<int64_t>>>
reshapeGroups(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  SmallVector<std::pair<SmallVector<int64_t>, SmallVector<int64_t>>> groups;
  if (llvm::count_if(from, ShapedType::isDynamic) > 1 ||
      llvm::count_if(to, ShapedType::isDynamic) > 1)
    return groups;
  size_t i = 0, j = 0;
  auto staticAt = [](ArrayRef<int64_t> shape, size_t k) {
    return k < shape.size() && !ShapedType::isDynamic(shape[k]);
  };
  while (i < from.size() || j < to.size()) {
    SmallVector<int64_t> fromDims, toDims;
    int64_t fromCount = 1, toCount = 1;
    auto takeFrom = [&] {
      fromDims.push_back(i);
      fromCount *= from[i++];
    };
    auto takeTo = [&] {
      toDims.push_back(j);
      toCount *= to[j++];
    };
    if (i < from.size() && j < to.size() && ShapedType::isDynamic(from[i]) &&
        ShapedType::isDynamic(to[j])) {
      takeFrom();
      takeTo();
    } else {
      do {
        if (fromCount <= toCount && staticAt(from, i))
          takeFrom();
        else if (staticAt(to, j))
          takeTo();
        else if (staticAt(from, i))
          takeFrom();
        else
          return {};
      } while (fromCount != toCount);
    }
    while (i < from.size() && from[i] == 1)
      takeFrom();
    while (j < to.size() && to[j] == 1)
      takeTo();
    groups.push_back({fromDims, toDims});
  }
  return groups;
}

/// The indices into `view`'s source that read what `indices` read in
/// `view`, or nothing when no index map expresses the view.
std::optional<SmallVector<Value>> sourceIndices(Operation *view,
                                                ValueRange indices,
                                                IndexBuilder &index) {
  ArrayRef<int64_t> shape = typeOf(view->getResult(0)).getShape();
  ArrayRef<int64_t> from = typeOf(view->getOperand(0)).getShape();
  if (auto permute = dyn_cast<PermuteOp>(view)) {
    SmallVector<Value> result(indices.size());
    for (auto [dim, sourceDim] : llvm::enumerate(permute.getPermutation()))
      result[sourceDim] = indices[dim];
    return result;
  }
  if (isa<ExpandOp>(view)) {
    int64_t offset = shape.size() - from.size();
    SmallVector<Value> result;
    for (auto [dim, size] : llvm::enumerate(from))
      result.push_back(size == 1 && shape[dim + offset] != 1
                           ? index.constant(0)
                           : indices[dim + offset]);
    return result;
  }
  if (auto slice = dyn_cast<SliceOp>(view)) {
    std::optional<int64_t> start = slice.getStaticBound(0),
                           step = slice.getStaticBound(2);
    if (!start || !step)
      return std::nullopt;
    SmallVector<Value> result(indices);
    Value &sliced = result[slice.getDim()];
    sliced = index.mul(sliced, *step);
    if (*start != 0)
      sliced = index.add(sliced, index.constant(*start));
    return result;
  }
  auto groups = reshapeGroups(from, shape);
  if (groups.empty())
    return std::nullopt;
  SmallVector<Value> result(from.size());
  for (auto &[fromDims, toDims] : groups) {
    if (fromDims.size() == 1 && toDims.size() == 1) {
      result[fromDims[0]] = indices[toDims[0]];
      continue;
    }
    // Row-major position within the group, then split into the source dims
    // (the outermost needs no remainder).
    Value position;
    int64_t step = 1;
    for (int64_t dim : llvm::reverse(toDims)) {
      if (shape[dim] != 1) {
        Value term = index.mul(indices[dim], step);
        position = position ? index.add(position, term) : term;
      }
      step *= shape[dim];
    }
    if (!position)
      position = index.constant(0);
    step = 1;
    for (auto [k, dim] : llvm::enumerate(llvm::reverse(fromDims))) {
      Value quotient = from[dim] == 1 ? index.constant(0) : index.div(position, step);
      bool outermost = k + 1 == fromDims.size();
      result[dim] = outermost || from[dim] == 1 ? quotient : index.rem(quotient, from[dim]);
      step *= from[dim];
    }
  }
  return result;
}

/// Whether `view` can be read through an index map (see sourceIndices).
/// A slice is read so only where its sliced dim is static on both sides:
/// a kernel's shape checks take an input read at the point's own index to
/// have the domain's extent, which a larger source of a dynamic slice does
/// not (on the CPU the kernel reads such a slice as a strided view in
/// place, at the same cost).
bool hasIndexMap(Operation *view) {
  if (auto slice = dyn_cast<SliceOp>(view)) {
    int64_t dim = slice.getDim();
    return slice.getStaticBound(0) && slice.getStaticBound(2) &&
           !typeOf(slice.getInput()).isDynamicDim(dim) &&
           !typeOf(slice.getResult()).isDynamicDim(dim);
  }
  if (auto reshape = dyn_cast<ReshapeOp>(view))
    return !reshapeGroups(typeOf(reshape.getInput()).getShape(),
                          typeOf(reshape.getResult()).getShape())
                .empty();
  return isView(view);
}

/// Whether a kernel should read `view`'s source instead of `view`: permutes,
/// expands and slices always (an index map costs what strides cost, and a
/// transposed row then needs no copy); a reshape only where it is not a view
/// of a contiguous tensor (there the kernel reads a contiguous view).
bool worthFolding(Operation *view) {
  if (!isView(view) || !hasIndexMap(view))
    return false;
  if (auto reshape = dyn_cast<ReshapeOp>(view)) {
    std::optional<Layout> source = viewLayout(reshape.getInput());
    return !source || !source->contiguous;
  }
  return true;
}

/// Replaces kernel input `number` (a view) by the view's source, reading it
/// through the view's index map. Fails, changing nothing, when the input is
/// read other than by tensor.extract.
LogicalResult foldIntoKernel(KernelOp kernel, unsigned number) {
  BlockArgument argument = kernel.getInputArgument(number);
  Operation *view = kernel.getInputs()[number].getDefiningOp();
  if (!llvm::all_of(argument.getUsers(),
                    [](Operation *user) { return isa<tensor::ExtractOp>(user); }))
    return failure();
  Value source = view->getOperand(0);
  for (Operation *user : llvm::make_early_inc_range(argument.getUsers())) {
    auto extract = cast<tensor::ExtractOp>(user);
    OpBuilder builder(extract);
    IndexBuilder index{builder, extract.getLoc()};
    std::optional<SmallVector<Value>> indices =
        sourceIndices(view, extract.getIndices(), index);
    extract.getIndicesMutable().assign(*indices);
  }
  argument.setType(source.getType());
  kernel.getInputsMutable()[number].assign(source);
  return success();
}

/// Replaces kernel input `number` (a braze.concat whose pieces have static
/// sizes along its dim, but for at most one) by the pieces, each a kernel
/// input of its own: a read of the concat reads every piece at the index
/// clamped into it and selects the one the index falls in (the other reads
/// stay in bounds). Pieces of one size P (rotary embeddings' halves) are
/// read at the index modulo P and selected by the index divided by P
/// instead: no clamp, and braze-split-dims can make the two parts loops of
/// their own, so that each piece is read along its rows. A piece of a
/// dynamic size (a KV cache's past) is folded where every read of the
/// concat's dim is at a point index of the kernel: that dim's extent is
/// then the concat's length, and the pieces after the dynamic one start
/// at it less their static sizes. Fails, changing nothing, when the input
/// is read other than by tensor.extract.
LogicalResult foldConcatIntoKernel(KernelOp kernel, unsigned number) {
  auto concat = kernel.getInputs()[number].getDefiningOp<ConcatOp>();
  BlockArgument argument = kernel.getInputArgument(number);
  int64_t dim = concat.getDim();
  SmallVector<int64_t> sizes;
  std::optional<size_t> dynamicPiece;
  for (auto [j, piece] : llvm::enumerate(concat.getInputs())) {
    sizes.push_back(typeOf(piece).getDimSize(dim));
    if (ShapedType::isDynamic(sizes.back())) {
      if (dynamicPiece)
        return failure();
      dynamicPiece = j;
    }
  }
  if (!llvm::all_of(argument.getUsers(),
                    [](Operation *user) { return isa<tensor::ExtractOp>(user); }))
    return failure();
  // With a dynamic piece, the domain dim each read's index walks.
  auto pointDim = [&](tensor::ExtractOp extract) -> std::optional<unsigned> {
    auto index = dyn_cast<BlockArgument>(extract.getIndices()[dim]);
    if (!index || index.getOwner() != &kernel.getBody().front() ||
        index.getArgNumber() >= kernel.getRank())
      return std::nullopt;
    return index.getArgNumber();
  };
  if (dynamicPiece && !llvm::all_of(argument.getUsers(), [&](Operation *user) {
        return pointDim(cast<tensor::ExtractOp>(user)).has_value();
      }))
    return failure();
  // Every piece is read at every point: the dynamic one must never be
  // empty, as the symbol ranges (checked every call) say.
  if (dynamicPiece) {
    auto func = kernel->getParentOfType<func::FuncOp>();
    if (!func || SizeBounds(func).leastOfDim(concat.getInputs()[*dynamicPiece],
                                             dim) < 1)
      return failure();
  }
  Block &body = kernel.getBody().front();
  SmallVector<Value> pieces{argument};
  argument.setType(concat.getInputs().front().getType());
  kernel.getInputsMutable()[number].assign(concat.getInputs().front());
  for (Value piece : concat.getInputs().drop_front()) {
    pieces.push_back(body.addArgument(piece.getType(), kernel.getLoc()));
    kernel.getInputsMutable().append(piece);
  }
  int64_t equalSize =
      !dynamicPiece && llvm::all_equal(sizes) ? sizes.front() : 1;
  for (Operation *user : llvm::make_early_inc_range(argument.getUsers())) {
    auto extract = cast<tensor::ExtractOp>(user);
    OpBuilder builder(extract);
    Location loc = extract.getLoc();
    IndexBuilder index{builder, loc};
    Value position = extract.getIndices()[dim];
    // Where piece j starts: a constant up to the dynamic piece, the
    // concat's length (the extent of the dim the read walks) less the
    // sizes from j on after it.
    auto offsetOf = [&](size_t j) -> Value {
      if (!dynamicPiece || j <= *dynamicPiece)
        return index.constant(std::accumulate(sizes.begin(), sizes.begin() + j,
                                              int64_t(0)));
      return arith::SubIOp::create(
          builder, loc, kernel.getExtent(*pointDim(extract)),
          index.constant(std::accumulate(sizes.begin() + j, sizes.end(),
                                         int64_t(0))));
    };
    Value value;
    for (int64_t j = pieces.size() - 1; j >= 0; --j) {
      Value at;
      if (equalSize > 1) {
        at = index.rem(position, equalSize);
      } else if (sizes[j] == 1) {
        at = index.constant(0);
      } else {
        at = j == 0 ? position
                    : arith::SubIOp::create(builder, loc, position,
                                            offsetOf(j));
        if (j > 0)
          at = arith::MaxSIOp::create(builder, loc, at, index.constant(0));
        if (j + 1 < static_cast<int64_t>(pieces.size())) {
          // The piece's last index: its size less one.
          Value last =
              ShapedType::isDynamic(sizes[j])
                  ? arith::SubIOp::create(builder, loc, offsetOf(j + 1),
                                          index.add(offsetOf(j),
                                                    index.constant(1)))
                  : index.constant(sizes[j] - 1);
          at = arith::MinSIOp::create(builder, loc, at, last);
        }
      }
      SmallVector<Value> indices(extract.getIndices());
      indices[dim] = at;
      Value read = tensor::ExtractOp::create(builder, loc, pieces[j], indices);
      if (!value) {
        value = read;
        continue;
      }
      Value inside =
          equalSize > 1
              ? arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::slt,
                                      index.div(position, equalSize),
                                      index.constant(j + 1))
              : arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::slt,
                                      position, offsetOf(j + 1));
      value = arith::SelectOp::create(builder, loc, inside, read, value);
    }
    extract.replaceAllUsesWith(value);
    extract.erase();
  }
  return success();
}

/// Folds kernel input `number` once: a view chain's first view, or a
/// concat. Fails when there is nothing to fold.
LogicalResult foldInput(KernelOp kernel, unsigned number) {
  Operation *producer = kernel.getInputs()[number].getDefiningOp();
  if (worthFolding(producer))
    return foldIntoKernel(kernel, number);
  if (isa_and_present<ConcatOp>(producer))
    return foldConcatIntoKernel(kernel, number);
  return failure();
}

/// Folds every foldable view chain and concat of `kernel`'s inputs (a
/// concat's pieces join the inputs, their own views folded in turn);
/// returns how many views and concats it folded.
unsigned foldViewsIntoKernel(KernelOp kernel) {
  unsigned folded = 0;
  for (unsigned number = 0; number < kernel.getInputs().size(); ++number)
    while (succeeded(foldInput(kernel, number)))
      ++folded;
  if (folded)
    mergeRepeatedInputs(kernel);
  return folded;
}

/// A kernel copying `value` into a contiguous tensor; its views are then
/// folded into it, so it reads their source. Of a static shape, or with
/// `dynamicSizes` for its dynamic dims computed before it from what the
/// copy reads (a dynamic extent read from the view would keep the view).
Value copyKernel(OpBuilder &builder, Location loc, Value value,
                 ValueRange dynamicSizes = {}) {
  RankedTensorType type = typeOf(value);
  auto kernel =
      KernelOp::create(builder, loc, TypeRange{type}, ValueRange{value},
                       dynamicSizes, type.getShape(), ArrayRef<int64_t>{});
  OpBuilder::InsertionGuard guard(builder);
  Block *body = builder.createBlock(&kernel.getBody());
  for (int64_t i = 0; i < 2 * type.getRank(); ++i)
    body->addArgument(builder.getIndexType(), loc);
  body->addArgument(type, loc);
  SmallVector<Value> point(body->getArguments().take_front(type.getRank()));
  Value element = tensor::ExtractOp::create(builder, loc, body->getArguments().back(), point);
  // Half types are computed in f32 in every kernel (braze-lower-kernels);
  // the round trip is exact.
  Type elementType = type.getElementType();
  if (elementType.isF16() || elementType.isBF16()) {
    Value wide = arith::ExtFOp::create(builder, loc, builder.getF32Type(), element);
    element = arith::TruncFOp::create(builder, loc, elementType, wide);
  }
  StoreOp::create(builder, loc, element, 0, point);
  foldViewsIntoKernel(kernel);
  return kernel.getResult(0);
}

/// Whether a copy kernel can make `value`: its shape is static and it
/// would read no view that copies.
bool copyReadsInPlace(Value value) {
  if (!typeOf(value).hasStaticShape())
    return false;
  Operation *op = value.getDefiningOp();
  while (isView(op) && worthFolding(op)) {
    value = op->getOperand(0);
    op = value.getDefiningOp();
  }
  return viewLayout(value).has_value();
}

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

/// `value` ([batch..., rows, cols]) as [batch, rows, cols]: a view that only
/// splits or drops dims, or nothing when it would copy.
std::optional<Value> withBatch(OpBuilder &builder, Location loc, Value value,
                               ArrayRef<int64_t> batch) {
  RankedTensorType type = typeOf(value);
  SmallVector<int64_t> shape(batch);
  llvm::append_range(shape, type.getShape().take_back(2));
  if (ArrayRef<int64_t>(shape) == type.getShape())
    return value;
  std::optional<Layout> layout = viewLayout(value);
  if (!layout || !viewStrides(type.getShape(), *layout, shape))
    return std::nullopt;
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
    OpBuilder builder(bmm);
    Location loc = bmm.getLoc();
    std::optional<Value> newLhs = withBatch(builder, loc, lhs, *batch);
    std::optional<Value> newRhs = withBatch(builder, loc, rhs, *batch);
    if (!newLhs || !newRhs) {
      remark(bmm, "an operand's batch dims do not split as views: a copy "
                  "kernel makes the merged batch");
      return;
    }
    RankedTensorType resultType = typeOf(bmm.getResult());
    SmallVector<int64_t> shape(*batch);
    llvm::append_range(shape, resultType.getShape().take_back(2));
    Value product = BmmOp::create(builder, loc, resultType.clone(shape), *newLhs, *newRhs);
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
      IndexBuilder index{builder, loc};
      int64_t others = 0;
      Value length;
      for (Value piece : concat.getInputs()) {
        if (typeOf(piece).isDynamicDim(dim))
          length = tensor::DimOp::create(builder, loc, piece, dim);
        else
          others += typeOf(piece).getDimSize(dim);
      }
      dynamicSizes.push_back(index.add(length, index.constant(others)));
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
    // 4. Concats and views nothing reads any more are erased.
    func::FuncOp func = getOperation();
    SmallVector<BmmOp> products;
    func.walk([&](BmmOp bmm) { products.push_back(bmm); });
    for (BmmOp bmm : products)
      foldBatches(bmm);
    func.walk([&](KernelOp kernel) { numFoldedViews += foldViewsIntoKernel(kernel); });
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
    // Concats every reader of which now reads their pieces, and views
    // (readers first: a concat of a concat, a view of a view).
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
