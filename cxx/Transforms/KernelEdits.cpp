//===- KernelEdits.cpp - edits of a braze.kernel ----------------------===//

#include "Transforms/KernelEdits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace braze {
OperandRange indicesOf(Operation *access) {
  if (auto extract = dyn_cast<tensor::ExtractOp>(access))
    return extract.getIndices();
  return cast<StoreOp>(access).getIndices();
}

SmallVector<Value> reshapeSizes(RankedTensorType type,
                                function_ref<Value(int64_t)> sizeOf) {
  SmallVector<Value> sizes;
  if (type.getNumDynamicDims() < 2)
    return sizes;
  for (int64_t position = 0; position < type.getRank(); ++position)
    if (type.isDynamicDim(position))
      sizes.push_back(sizeOf(position));
  return sizes;
}

Value sizeBefore(Value tensor, int64_t position, OpBuilder &builder,
                 Location loc) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (!type.isDynamicDim(position))
    return arith::ConstantIndexOp::create(builder, loc,
                                          type.getDimSize(position));
  return tensor::DimOp::create(builder, loc, tensor, position);
}

Value extentBefore(KernelOp kernel, unsigned dim, OpBuilder &builder) {
  ArrayRef<int64_t> domain = kernel.getStaticDomain();
  if (!ShapedType::isDynamic(domain[dim]))
    return arith::ConstantIndexOp::create(builder, kernel.getLoc(),
                                          domain[dim]);
  return kernel.getDynamicDomain()[llvm::count_if(domain.take_front(dim),
                                                  ShapedType::isDynamic)];
}

void shortenReshapeChains(ArrayRef<ReshapeOp> reshapes) {
  for (ReshapeOp reshape : reshapes)
    if (auto first = reshape.getInput().getDefiningOp<ReshapeOp>())
      reshape.getInputMutable().assign(first.getInput());
  for (ReshapeOp reshape : llvm::reverse(reshapes))
    if (reshape->use_empty())
      reshape->erase();
}

void mergeRepeatedInputs(KernelOp kernel) {
  Block &body = kernel.getBody().front();
  unsigned first = 2 * kernel.getRank();
  for (unsigned number = kernel.getInputs().size(); number-- > 1;) {
    Value input = kernel.getInputs()[number];
    for (unsigned earlier = 0; earlier < number; ++earlier) {
      if (kernel.getInputs()[earlier] != input)
        continue;
      body.getArgument(first + number).replaceAllUsesWith(body.getArgument(first + earlier));
      body.eraseArgument(first + number);
      kernel.getInputsMutable().erase(number);
      break;
    }
  }
}
} // namespace braze
