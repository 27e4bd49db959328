//===- HostOps.cpp - verifiers of the ops the runtime runs in a library ---===//

#include "Dialect/BrazeOps.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SmallBitVector.h"

#include <cmath>

using namespace mlir;
using namespace braze;

//===----------------------------------------------------------------------===//
// ConvolutionOp
//===----------------------------------------------------------------------===//

namespace {
/// Which channel counts of a convolution its weight fixes.
struct ChannelRule {
  int64_t inputChannels;  // ShapedType::kDynamic when unknown
  int64_t outputChannels; // likewise
};
} // namespace

static ChannelRule channelsOf(ArrayRef<int64_t> weight, int64_t groups,
                              bool transposed) {
  auto times = [](int64_t size, int64_t factor) {
    return ShapedType::isDynamic(size) ? size : size * factor;
  };
  if (transposed)
    return {weight[0], times(weight[1], groups)};
  return {times(weight[1], groups), weight[0]};
}

LogicalResult ConvolutionOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto weight = cast<RankedTensorType>(getWeight().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  int64_t rank = input.getRank();
  if (rank < 3 || rank > 5)
    return emitOpError("input must be N x C x 1 to 3 spatial dims, got rank ")
           << rank;
  if (weight.getRank() != rank || result.getRank() != rank)
    return emitOpError("input, weight and result must have one rank, got ")
           << rank << ", " << weight.getRank() << " and " << result.getRank();
  Type element = input.getElementType();
  if (weight.getElementType() != element || result.getElementType() != element)
    return emitOpError("input, weight and result must have one element type");
  size_t spatial = rank - 2;
  for (auto [name, values] :
       {std::pair<StringRef, ArrayRef<int64_t>>{"stride", getStride()},
        {"padding", getPadding()},
        {"dilation", getDilation()}}) {
    if (values.size() != spatial)
      return emitOpError() << name << " must have " << spatial
                           << " entries (one per spatial dim), got "
                           << values.size();
    int64_t least = name == "padding" ? 0 : 1;
    for (int64_t value : values)
      if (value < least)
        return emitOpError() << name << " entries must be at least " << least
                             << ", got " << value;
  }
  bool transposed = getTransposed();
  ArrayRef<int64_t> outputPadding = getOutputPadding();
  if (transposed && outputPadding.size() != spatial)
    return emitOpError("output_padding must have ")
           << spatial << " entries, got " << outputPadding.size();
  if (!transposed && !outputPadding.empty())
    return emitOpError("output_padding is only for a transposed convolution");
  if (auto format = getMemoryFormat();
      format && (*format != "channels_last" || rank == 3))
    return emitOpError("memory_format must be \"channels_last\" on a 2-D or "
                       "3-D convolution, got \"")
           << *format << "\" on " << spatial << " spatial dim(s)";
  int64_t groups = getGroups();
  if (groups < 1)
    return emitOpError("groups must be at least 1, got ") << groups;

  ArrayRef<int64_t> weightShape = weight.getShape();
  // Dim 0 is split among the groups: output channels, or input channels
  // of a transposed convolution.
  if (!ShapedType::isDynamic(weightShape[0]) && weightShape[0] % groups != 0)
    return emitOpError("weight dim 0 (")
           << weightShape[0] << ") is not divisible by groups ("
           << groups << ")";
  ChannelRule channels = channelsOf(weightShape, groups, transposed);
  auto mismatch = [](int64_t a, int64_t b) {
    return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
  };
  if (mismatch(input.getDimSize(1), channels.inputChannels))
    return emitOpError("input has ")
           << input.getDimSize(1) << " channels but the weight expects "
           << channels.inputChannels;
  if (mismatch(result.getDimSize(1), channels.outputChannels))
    return emitOpError("result has ")
           << result.getDimSize(1) << " channels but the weight gives "
           << channels.outputChannels;
  if (mismatch(result.getDimSize(0), input.getDimSize(0)))
    return emitOpError("result batch ")
           << result.getDimSize(0) << " differs from the input's "
           << input.getDimSize(0);
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || biasType.getElementType() != element)
      return emitOpError("bias must be a 1-D tensor of the input's type");
    if (mismatch(biasType.getDimSize(0), channels.outputChannels))
      return emitOpError("bias has ")
             << biasType.getDimSize(0) << " elements for "
             << channels.outputChannels << " output channels";
  }
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = input.getDimSize(2 + i), kernel = weightShape[2 + i];
    int64_t out = result.getDimSize(2 + i);
    if (ShapedType::isDynamic(in) || ShapedType::isDynamic(kernel) ||
        ShapedType::isDynamic(out))
      continue;
    int64_t span = getDilation()[i] * (kernel - 1);
    int64_t expected =
        transposed ? (in - 1) * getStride()[i] - 2 * getPadding()[i] + span +
                         outputPadding[i] + 1
                   : (in + 2 * getPadding()[i] - span - 1) / getStride()[i] + 1;
    if (out != expected)
      return emitOpError("spatial dim ")
             << i << " of the result is " << out << " but the sizes give "
             << expected;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// The attention's result type in its own order, [B..., H, L, Ev], from
/// `result` permuted by `order`; an error where `order` does not permute the
/// result's dims with the last kept last.
static FailureOr<RankedTensorType>
attentionOrderType(Operation *op, RankedTensorType result,
                   std::optional<ArrayRef<int64_t>> order) {
  if (!order)
    return result;
  int64_t rank = result.getRank();
  if (int64_t(order->size()) != rank || !isPermutationVector(*order) ||
      order->back() != rank - 1)
    return op->emitOpError("result_order must permute the result's ")
           << rank << " dims and keep the last one last, got [" << *order
           << "]";
  return result.clone(
      applyPermutation(result.getShape(), invertPermutationVector(*order)));
}

LogicalResult braze::verifyAttention(Operation *op, Value queryValue,
                                    Value keyValue, Value valueValue,
                                    Value mask, Value resultValue,
                                    std::optional<ArrayRef<int64_t>> resultOrder,
                                    bool causal, bool gqa,
                                    std::optional<double> scale,
                                    std::optional<APFloat> softcap) {
  FailureOr<RankedTensorType> ordered = attentionOrderType(
      op, cast<RankedTensorType>(resultValue.getType()), resultOrder);
  if (failed(ordered))
    return failure();
  RankedTensorType result = *ordered;
  StringRef resultNote = resultOrder ? " in the attention's order" : "";
  auto query = cast<RankedTensorType>(queryValue.getType());
  auto key = cast<RankedTensorType>(keyValue.getType());
  auto value = cast<RankedTensorType>(valueValue.getType());
  int64_t rank = query.getRank();
  if (rank < 2)
    return op->emitOpError("query must be batch... x L x E, got rank ") << rank;
  if (key.getRank() != rank || value.getRank() != rank ||
      result.getRank() != rank)
    return op->emitOpError("query, key, value and result must have one rank, got ")
           << rank << ", " << key.getRank() << ", " << value.getRank()
           << " and " << result.getRank();
  Type element = query.getElementType();
  if (key.getElementType() != element || value.getElementType() != element ||
      result.getElementType() != element)
    return op->emitOpError("query, key, value and result must have one element "
                       "type");
  ArrayRef<int64_t> q = query.getShape(), k = key.getShape(),
                    v = value.getShape(), r = result.getShape();
  if (!dimsAgree(q[rank - 1], k[rank - 1]))
    return op->emitOpError("query and key must have one embedding size, got ")
           << q[rank - 1] << " and " << k[rank - 1];
  if (!dimsAgree(k[rank - 2], v[rank - 2]))
    return op->emitOpError("key and value must have one sequence length, got ")
           << k[rank - 2] << " and " << v[rank - 2];
  if (!dimsAgree(r[rank - 2], q[rank - 2]) ||
      !dimsAgree(r[rank - 1], v[rank - 1]))
    return op->emitOpError("result must be batch... x L x Ev (")
           << q[rank - 2] << " x " << v[rank - 1] << "), got " << result
           << resultNote;
  for (int64_t dim = 0; dim < rank - 2; ++dim) {
    for (int64_t other : {k[dim], v[dim]}) {
      bool broadcast = other == 1 || dimsAgree(other, q[dim]);
      // Grouped-query attention: key/value heads divide query heads.
      bool grouped = gqa && dim == rank - 3 &&
                     !ShapedType::isDynamic(other) &&
                     !ShapedType::isDynamic(q[dim]) && q[dim] % other == 0;
      if (!broadcast && !grouped)
        return op->emitOpError("batch dim ")
               << dim << " of key or value (" << other
               << ") does not broadcast to the query's (" << q[dim] << ")"
               << (gqa ? "" : "; grouped heads need `gqa`");
    }
    if (!dimsAgree(r[dim], q[dim]))
      return op->emitOpError("result batch dim ")
             << dim << " must be the query's (" << q[dim] << "), got "
             << r[dim] << resultNote;
  }
  if (mask) {
    auto maskType = cast<RankedTensorType>(mask.getType());
    Type maskElement = maskType.getElementType();
    if (!maskElement.isInteger(1) && maskElement != element)
      return op->emitOpError("mask must be i1 or the query's element type, got ")
             << maskElement;
    if (maskType.getRank() > rank)
      return op->emitOpError("mask rank ")
             << maskType.getRank() << " is above the query's " << rank;
    if (causal)
      return op->emitOpError("takes a mask or `causal`, not both");
  }
  if (scale && !std::isfinite(*scale))
    return op->emitOpError("scale must be finite");
  if (softcap && !(softcap->convertToDouble() > 0 &&
                   std::isfinite(softcap->convertToDouble())))
    return op->emitOpError("softcap must be positive and finite, got ")
           << softcap->convertToDouble();
  return success();
}

LogicalResult AttentionOp::verify() {
  std::optional<double> scale;
  if (auto given = getScale())
    scale = given->convertToDouble();
  return verifyAttention(*this, getQuery(), getKey(), getValue(), getMask(),
                         getResult(), getResultOrder(), getCausal(), getGqa(),
                         scale, getSoftcap());
}

//===----------------------------------------------------------------------===//
// ExternOp
//===----------------------------------------------------------------------===//

/// Checks one argument attribute, recording the operands it refers to.
static LogicalResult verifyArgument(ExternOp op, Attribute attribute,
                                    llvm::SmallBitVector &referenced) {
  if (auto integer = dyn_cast<IntegerAttr>(attribute)) {
    if (!integer.getType().isIndex())
      return success();
    int64_t number = integer.getInt();
    if (number < 0 || number >= static_cast<int64_t>(referenced.size()))
      return op.emitOpError("argument refers to operand #")
             << number << " but the op has " << referenced.size()
             << " operand(s)";
    referenced.set(number);
    return success();
  }
  if (auto list = dyn_cast<ArrayAttr>(attribute)) {
    for (Attribute element : list)
      if (failed(verifyArgument(op, element, referenced)))
        return failure();
    return success();
  }
  if (auto object = dyn_cast<DictionaryAttr>(attribute)) {
    StringRef kind = object.empty() ? "" : object.begin()->getName().strref();
    bool known = object.size() == 1 &&
                 (kind == "device" || kind == "layout" ||
                  kind == "memory_format") &&
                 isa<StringAttr>(object.begin()->getValue());
    if (!known)
      return op.emitOpError("a dictionary argument must be one of {device = "
                            "\"...\"}, {layout = \"...\"}, {memory_format = "
                            "\"...\"}, got ")
             << object;
    return success();
  }
  if (isa<FloatAttr, BoolAttr, StringAttr, UnitAttr, TypeAttr>(attribute))
    return success();
  return op.emitOpError("argument ")
         << attribute << " is not a value an aten op takes";
}

void ExternOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (getPure())
    return;
  // Opaque to braze: it may read and write anything.
  effects.emplace_back(MemoryEffects::Read::get());
  effects.emplace_back(MemoryEffects::Write::get());
}

LogicalResult ExternOp::verify() {
  SmallVector<StringRef> parts;
  getTarget().split(parts, '.');
  if (parts.size() != 3 || llvm::any_of(parts, [](StringRef part) {
        return part.empty();
      }))
    return emitOpError("target must name an overload as "
                       "namespace.op.overload, got '")
           << getTarget() << "'";
  llvm::SmallBitVector referenced(getNumOperands());
  if (failed(verifyArgument(*this, getArguments(), referenced)))
    return failure();
  if (auto keywords = getKeywordsAttr())
    for (NamedAttribute keyword : keywords)
      if (failed(verifyArgument(*this, keyword.getValue(), referenced)))
        return failure();
  if (!referenced.all())
    return emitOpError("operand #")
           << referenced.find_first_unset()
           << " is not used by any argument";
  return success();
}
