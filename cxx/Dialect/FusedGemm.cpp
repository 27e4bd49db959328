//===- FusedGemm.cpp - the verifier of braze.fused_gemm -------------------===//

#include "Dialect/BrazeOps.h"

using namespace mlir;
using namespace braze;

namespace {
/// The accumulator types a product of `element`s may use.
bool isAccumulatorFor(Type accumulator, Type element) {
  if (isa<FloatType>(element))
    return accumulator.isF32() || accumulator.isF64();
  if (element.isSignlessInteger() && !element.isInteger(1))
    return accumulator.isSignlessInteger(32) ||
           accumulator.isSignlessInteger(64);
  return false;
}

/// Whether a product of `lhs` and `rhs` elements is one the kernels run:
/// one type, two 8-bit floats (widened), or floats times an int8 weight
/// (widened to the activations' type).
bool isProductOf(Type lhs, Type rhs) {
  if (lhs == rhs)
    return true;
  if (isFloat8(lhs) && isFloat8(rhs))
    return true;
  return isa<FloatType>(lhs) && !isFloat8(lhs) && rhs.isSignlessInteger(8);
}
} // namespace

LogicalResult FusedGemmOp::verify() {
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  auto rhs = cast<RankedTensorType>(getRhs().getType());
  int64_t rank = lhs.getRank();
  if (rank < 2)
    return emitOpError("lhs must have rank 2 or more ([batch..., M, K]), got "
                       "rank ")
           << rank;
  ArrayAttr reductions = getReductions();
  if (reductions.size() >= getNumResults())
    return emitOpError("has ")
           << getNumResults() << " result(s) and " << reductions.size()
           << " reduction(s): the results are one or more outputs, then one "
              "row statistic per reduction";
  for (Attribute kind : reductions)
    if (!llvm::is_contained({"add", "max"},
                            cast<StringAttr>(kind).getValue()))
      return emitOpError("reduction '")
             << cast<StringAttr>(kind).getValue()
             << "' is not \"add\" or \"max\"";
  auto result = cast<RankedTensorType>(getResult(0).getType());
  if (rhs.getRank() != rank || result.getRank() != rank)
    return emitOpError("lhs, rhs and the result must have one rank, got ")
           << rank << ", " << rhs.getRank() << " and " << result.getRank();
  if (!isProductOf(lhs.getElementType(), rhs.getElementType()))
    return emitOpError("lhs and rhs must have one element type, or both be "
                       "8-bit floats, or be floats times an i8 weight; got ")
           << lhs.getElementType() << " and " << rhs.getElementType();
  Type accumulator = getAccumulator();
  if (!isAccumulatorFor(accumulator, lhs.getElementType()))
    return emitOpError("accumulator ")
           << accumulator << " cannot accumulate a product of "
           << lhs.getElementType()
           << " (f32 or f64 for floats, i32 or i64 for integers)";
  ArrayRef<int64_t> l = lhs.getShape(), r = rhs.getShape(),
                    out = result.getShape();
  for (int64_t b = 0; b < rank - 2; ++b)
    if (!dimsAgree(l[b], r[b]) || !dimsAgree(l[b], out[b]))
      return emitOpError("batch dim ")
             << b << " is " << formatDim(l[b]) << " in lhs, "
             << formatDim(r[b]) << " in rhs and " << formatDim(out[b])
             << " in the result";
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  int64_t m = l[rank - (tl ? 1 : 2)], lk = l[rank - (tl ? 2 : 1)];
  int64_t rk = r[rank - (tr ? 1 : 2)], n = r[rank - (tr ? 2 : 1)];
  if (!dimsAgree(lk, rk))
    return emitOpError("contraction dim mismatch: lhs has K = ")
           << formatDim(lk) << " but rhs has K = " << formatDim(rk)
           << (tl || tr ? " (after the transpose flags)" : "");
  if (!dimsAgree(m, out[rank - 2]) || !dimsAgree(n, out[rank - 1]))
    return emitOpError("result must be [..., M, N] = [..., ")
           << formatDim(m) << ", " << formatDim(n) << "], got [..., "
           << formatDim(out[rank - 2]) << ", " << formatDim(out[rank - 1])
           << "]";
  for (auto [number, value] : llvm::enumerate(getResults())) {
    auto type = cast<RankedTensorType>(value.getType());
    bool statistic = number >= getNumOutputs();
    ArrayRef<int64_t> want = statistic ? out.drop_back() : out;
    bool fits = type.getRank() == static_cast<int64_t>(want.size()) &&
                llvm::all_of(llvm::zip(type.getShape(), want), [](auto dims) {
                  return dimsAgree(std::get<0>(dims), std::get<1>(dims));
                });
    if (!fits)
      return emitOpError("result #")
             << number << " must be "
             << (statistic ? "[batch..., M] (a row statistic)"
                           : "[batch..., M, N] (an output)")
             << ", like result #0, got " << type;
  }

  // Scales: f32, bf16 or f16, a scalar or one per row of the product.
  for (auto [scale, name, rows] :
       {std::tuple{getLhsScale(), "lhs_scale", m},
        std::tuple{getRhsScale(), "rhs_scale", n}}) {
    if (!scale)
      continue;
    auto type = cast<RankedTensorType>(scale.getType());
    Type element = type.getElementType();
    if (!element.isF32() && !element.isBF16() && !element.isF16())
      return emitOpError(name)
             << " must be f32, bf16 or f16, got " << element;
    if (type.getRank() > 1 ||
        (type.getRank() == 1 && !dimsAgree(type.getDimSize(0), rows)))
      return emitOpError(name)
             << " must be a scalar (rank 0) or have one element per "
             << (StringRef(name) == "lhs_scale" ? "row (M = " : "column (N = ")
             << formatDim(rows) << "), got " << type;
  }

  // Extras: one indexing entry each, shaped as it says.
  ArrayAttr indexing = getIndexing();
  if (indexing.size() != getExtras().size())
    return emitOpError("has ")
           << getExtras().size() << " extra operand(s) but "
           << indexing.size() << " indexing entr"
           << (indexing.size() == 1 ? "y" : "ies");
  for (auto [number, pair] :
       llvm::enumerate(llvm::zip_equal(getExtras(), indexing))) {
    auto [extra, entry] = pair;
    auto type = cast<RankedTensorType>(extra.getType());
    StringRef how = cast<StringAttr>(entry).getValue();
    ArrayRef<int64_t> shape = type.getShape();
    bool fits;
    if (how == "mn")
      fits = (shape.size() == 2 || shape.size() == static_cast<size_t>(rank)) &&
             llvm::all_of(llvm::zip(llvm::reverse(shape), llvm::reverse(out)),
                          [](auto dims) {
                            return dimsAgree(std::get<0>(dims), std::get<1>(dims));
                          });
    else if (how == "n")
      fits = shape.size() == 1 && dimsAgree(shape[0], n);
    else if (how == "m")
      fits = shape.size() == 1 && dimsAgree(shape[0], m);
    else if (how == "scalar")
      fits = shape.empty();
    else
      return emitOpError("extra #")
             << number << " has indexing '" << how
             << "'; expected \"mn\", \"n\", \"m\" or \"scalar\"";
    if (!fits)
      return emitOpError("extra #")
             << number << " is indexed by '" << how << "' but has type "
             << type << " (the product is [..., " << formatDim(m) << ", "
             << formatDim(n) << "])";
  }
  return success();
}

LogicalResult FusedGemmOp::verifyRegions() {
  Block &body = getEpilogue().front();
  SmallVector<Type> expected{getAccumulator()};
  for (Value extra : getExtras())
    expected.push_back(cast<RankedTensorType>(extra.getType()).getElementType());
  if (body.getNumArguments() != expected.size())
    return emitOpError("epilogue must take ")
           << expected.size()
           << " argument(s) (the accumulator element, then one element per "
              "extra), got "
           << body.getNumArguments();
  for (auto [number, pair] :
       llvm::enumerate(llvm::zip_equal(body.getArgumentTypes(), expected))) {
    auto [have, want] = pair;
    if (have != want)
      return emitOpError("epilogue argument #")
             << number << " must be " << want << ", got " << have;
  }
  auto yield = body.empty() ? GemmYieldOp() : dyn_cast<GemmYieldOp>(body.back());
  if (!yield)
    return emitOpError("epilogue must end with braze.gemm_yield");
  if (yield.getValues().size() != getNumResults())
    return emitOpError("epilogue yields ")
           << yield.getValues().size() << " value(s) but the op has "
           << getNumResults() << " result(s)";
  for (auto [number, pair] : llvm::enumerate(
           llvm::zip_equal(yield.getValues().getTypes(), getResultTypes()))) {
    auto [have, resultType] = pair;
    Type element = cast<RankedTensorType>(resultType).getElementType();
    // A half statistic is accumulated in f32 (and rounded once).
    bool wide = number >= getNumOutputs() &&
                (element.isF16() || element.isBF16()) && have.isF32();
    if (have != element && !wide)
      return emitOpError("epilogue yields ")
             << have << " for result #" << number << ", whose elements are "
             << element;
  }
  return success();
}
