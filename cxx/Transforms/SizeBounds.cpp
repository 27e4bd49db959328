//===- SizeBounds.cpp - what the symbol ranges say about sizes --------===//

#include "Transforms/SizeBounds.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace braze {
SizeBounds::SizeBounds(func::FuncOp func) : func(func) {
  auto collect = [&](Operation *op) {
    if (auto symbols = op->getAttrOfType<DictionaryAttr>("braze.symbols"))
      for (NamedAttribute entry : symbols) {
        auto range = dyn_cast<ArrayAttr>(entry.getValue());
        bool pair = range && range.size() >= 2;
        auto min = pair ? dyn_cast<IntegerAttr>(range[0]) : IntegerAttr();
        auto max = pair ? dyn_cast<IntegerAttr>(range[1]) : IntegerAttr();
        // The function's entries override the module's.
        ranges[entry.getName()] = {min ? min.getInt() : 0,
                                   max && max.getInt() >= 0
                                       ? max.getInt()
                                       : ShapedType::kDynamic};
      }
  };
  if (Operation *module = func->getParentOp())
    collect(module);
  collect(func);
}

int64_t SizeBounds::of(Value size) {
  if (auto constant = size.getDefiningOp<arith::ConstantIndexOp>())
    return constant.value();
  if (auto dim = size.getDefiningOp<tensor::DimOp>())
    if (std::optional<int64_t> position = dim.getConstantIndex())
      return ofDim(dim.getSource(), *position);
  if (auto argument = dyn_cast<BlockArgument>(size)) {
    auto range = argumentRange(argument, 0);
    return range ? range->second : ShapedType::kDynamic;
  }
  return ShapedType::kDynamic;
}

int64_t SizeBounds::ofDim(Value tensor, int64_t position) {
  int64_t size =
      cast<RankedTensorType>(tensor.getType()).getDimSize(position);
  if (!ShapedType::isDynamic(size))
    return size;
  if (auto argument = dyn_cast<BlockArgument>(tensor)) {
    auto range = argumentRange(argument, position);
    return range ? range->second : ShapedType::kDynamic;
  }
  // A kernel's result dim is written at the index of one of its dims.
  auto kernel = tensor.getDefiningOp<KernelOp>();
  if (!kernel)
    return ShapedType::kDynamic;
  unsigned number = cast<OpResult>(tensor).getResultNumber();
  for (StoreOp store : kernel.getBody().front().getOps<StoreOp>()) {
    auto index = dyn_cast<BlockArgument>(store.getIndices()[position]);
    if (store.getResult() != number || !index ||
        index.getArgNumber() >= kernel.getRank())
      continue;
    return extent(kernel, index.getArgNumber());
  }
  return ShapedType::kDynamic;
}

int64_t SizeBounds::extent(KernelOp kernel, unsigned dim) {
  ArrayRef<int64_t> domain = kernel.getStaticDomain();
  if (!ShapedType::isDynamic(domain[dim]))
    return domain[dim];
  unsigned operand =
      llvm::count_if(domain.take_front(dim), ShapedType::isDynamic);
  return of(kernel.getDynamicDomain()[operand]);
}

int64_t SizeBounds::leastOfDim(Value tensor, int64_t position) {
  int64_t size =
      cast<RankedTensorType>(tensor.getType()).getDimSize(position);
  if (!ShapedType::isDynamic(size))
    return size;
  if (auto argument = dyn_cast<BlockArgument>(tensor))
    if (auto range = argumentRange(argument, position))
      return range->first;
  return 0;
}

std::optional<std::pair<int64_t, int64_t>>
SizeBounds::argumentRange(BlockArgument argument, int64_t position) {
  if (argument.getOwner() != &func.getBody().front())
    return std::nullopt;
  auto dims = func.getArgAttrOfType<ArrayAttr>(argument.getArgNumber(),
                                               "braze.dims");
  if (!dims || position >= static_cast<int64_t>(dims.size()))
    return std::nullopt;
  if (auto symbol = dyn_cast<StringAttr>(dims[position])) {
    auto range = ranges.find(symbol.getValue());
    if (range != ranges.end())
      return range->second;
  }
  return std::nullopt;
}
} // namespace braze
