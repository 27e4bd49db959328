//===- BrazeFolds.cpp - folders of braze ops ------------------------------===//
//
// Plain identities only: each folder returns an existing value of exactly the
// op's result type, or rewires the op in place. Nothing here computes on
// constant data.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace braze;

/// Whether `attr` is a splat tensor constant whose every element equals
/// `value` (compared exactly, in the element type).
static bool isSplatOf(Attribute attr, int64_t value) {
  auto splat = dyn_cast_if_present<SplatElementsAttr>(attr);
  if (!splat)
    return false;
  Type element = splat.getElementType();
  if (isa<FloatType>(element))
    return splat.getSplatValue<APFloat>().isExactlyValue(
        static_cast<double>(value));
  if (element.isInteger(1))
    return splat.getSplatValue<bool>() == (value != 0);
  if (isa<IntegerType>(element))
    return splat.getSplatValue<APInt>().getSExtValue() == value;
  return false;
}

/// `operand` if it already has `result`'s type, else nothing (folding must not
/// change a type, e.g. where the other operand broadcast it).
static OpFoldResult sameTypeOrNull(Value operand, Value result) {
  return operand.getType() == result.getType() ? OpFoldResult(operand)
                                               : OpFoldResult();
}

OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return {};
}

OpFoldResult ReluOp::fold(FoldAdaptor) {
  if (getInput().getDefiningOp<ReluOp>())
    return getInput();
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0))
    return sameTypeOrNull(getLhs(), getResult());
  if (isSplatOf(adaptor.getLhs(), 0))
    return sameTypeOrNull(getRhs(), getResult());
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0))
    return sameTypeOrNull(getLhs(), getResult());
  return {};
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1))
    return sameTypeOrNull(getLhs(), getResult());
  if (isSplatOf(adaptor.getLhs(), 1))
    return sameTypeOrNull(getRhs(), getResult());
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1))
    return sameTypeOrNull(getLhs(), getResult());
  return {};
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  return sameTypeOrNull(getInput(), getResult());
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getSizes().empty() && getInput().getType() == getType())
    return getInput();
  // Reshape only depends on the row-major element order, so the inner
  // reshape is irrelevant to the outer one.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult PermuteOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  bool identity = llvm::all_of(llvm::enumerate(perm), [](auto entry) {
    return static_cast<int64_t>(entry.index()) == entry.value();
  });
  if (identity)
    return sameTypeOrNull(getInput(), getResult());
  if (auto inner = getInput().getDefiningOp<PermuteOp>()) {
    // out[i] = mid[perm[i]] and mid[j] = x[innerPerm[j]].
    ArrayRef<int64_t> innerPerm = inner.getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t p : perm)
      composed.push_back(innerPerm[p]);
    getInputMutable().assign(inner.getInput());
    setPermutation(composed);
    return getResult();
  }
  return {};
}

OpFoldResult ExpandOp::fold(FoldAdaptor) {
  // Without size operands every dynamic result dim repeats an input dim, so
  // equal types mean nothing is broadcast.
  if (getSizes().empty())
    return sameTypeOrNull(getInput(), getResult());
  return {};
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  std::optional<int64_t> start = getStaticBound(0), end = getStaticBound(1),
                         step = getStaticBound(2);
  if (!start || !end || !step)
    return {}; // a symbolic bound is checked at run time, so the op stays
  int64_t size = getInput().getType().getDimSize(getDim());
  // An unknown size is covered only by the "to the end" sentinel.
  bool coversDim = ShapedType::isDynamic(size)
                       ? *end == std::numeric_limits<int64_t>::max()
                       : *end >= size;
  if (*start == 0 && *step == 1 && coversDim)
    return sameTypeOrNull(getInput(), getResult());
  return {};
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return sameTypeOrNull(getInputs().front(), getResult());
  return {};
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }
