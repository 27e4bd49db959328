//===- ViewFolding.cpp - kernels read views and concats in place -----------===//
//
// What braze-fold-layouts builds on: the strides a value has at run time
// (`viewLayout`), and the index maps by which a kernel reads a view's source
// or a concat's pieces instead of a host-side copy (`foldViewsIntoKernel`,
// `copyKernel`).
//
//===----------------------------------------------------------------------===//

#include "Transforms/ViewFolding.h"
#include "Transforms/KernelEdits.h"
#include "Transforms/SizeBounds.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include <numeric>

using namespace mlir;

namespace braze {
//===----------------------------------------------------------------------===//
// Strides at run time
//===----------------------------------------------------------------------===//

namespace {
constexpr int64_t kDynamic = ShapedType::kDynamic;

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

} // namespace

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

namespace {
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
} // namespace

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

namespace {

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
} // namespace

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
                 ValueRange dynamicSizes) {
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

void foldPermutesOf(PermuteOp permute) {
  for (Operation *user : llvm::to_vector(permute->getUsers())) {
    auto reader = dyn_cast<PermuteOp>(user);
    SmallVector<OpFoldResult> folded;
    // The first fold composes the two orders in place; a second one folds
    // an identity order away.
    if (!reader || failed(reader->fold(folded)) || failed(reader->fold(folded)))
      continue;
    if (folded.empty())  // composed with a permute before `permute` too
      continue;
    auto input = dyn_cast<Value>(folded.front());
    if (input && input != reader.getResult()) {
      reader.replaceAllUsesWith(input);
      reader->erase();
    }
  }
}
} // namespace braze
