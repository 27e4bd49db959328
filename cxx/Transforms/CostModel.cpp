//===- CostModel.cpp - time estimates of ops and collectives --------------===//

#include "Transforms/CostModel.h"

#include "Dialect/BrazeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace braze;

namespace {
/// Points of a shape, dynamic dims as 1.
int64_t points(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= ShapedType::isDynamic(dim) ? 1 : dim;
  return count;
}

int64_t dim(Value value, int64_t fromEnd) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(value.getType()).getShape();
  int64_t size = shape[shape.size() - fromEnd];
  return ShapedType::isDynamic(size) ? 1 : size;
}

/// Arithmetic of a kernel's body at every point of its domain.
double kernelFlops(KernelOp kernel) {
  return static_cast<double>(pointFlops(kernel)) *
         points(kernel.getStaticDomain());
}

/// 2 flops per multiply-add of a GEMM; 0 for other ops.
double gemmFlops(Operation *op) {
  if (op->getNumResults() == 0)
    return 0;
  auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!result)
    return 0;
  double products = 2.0 * points(result.getShape());
  if (isa<MatmulOp, BmmOp>(op))
    return products * dim(op->getOperand(0), 1);
  if (auto addmm = dyn_cast<AddmmOp>(op))
    return products * dim(addmm.getOperand(1), 1);
  if (auto gemm = dyn_cast<FusedGemmOp>(op))
    return products * dim(gemm.getLhs(), gemm.getTransposeLhs() ? 2 : 1);
  return 0;
}

double tensorsBytes(Operation *op) {
  int64_t bytes = 0;
  for (Value value : op->getOperands())
    bytes += tensorBytes(value.getType());
  for (Value value : op->getResults())
    bytes += tensorBytes(value.getType());
  return static_cast<double>(bytes);
}
} // namespace

int64_t braze::pointFlops(KernelOp kernel) {
  int64_t flops = 0;
  for (Operation &op : kernel.getBody().front()) {
    StringRef dialect = op.getDialect() ? op.getDialect()->getNamespace() : "";
    bool arithmetic = dialect == "arith" || dialect == "math" ||
                      op.getName().getStringRef().starts_with("braze.reduce");
    if (!arithmetic || isa<arith::ConstantOp>(op) ||
        llvm::any_of(op.getResultTypes(),
                     [](Type type) { return type.isIndex(); }))
      continue;
    ++flops;
  }
  return flops;
}

int64_t braze::tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isIntOrFloat())
    return 0;
  return points(tensor.getShape()) *
         std::max<int64_t>(1, tensor.getElementType().getIntOrFloatBitWidth() / 8);
}

double braze::computeSeconds(Operation *op, const Machine &machine) {
  // Views are strides the executor computes; constants and parameters
  // exist before the call.
  if (isa<ReshapeOp, PermuteOp, SliceOp, ExpandOp, ConstantOp, ParameterOp>(op))
    return 0;
  double bytes = 0, flops = 0;
  if (auto combo = dyn_cast<ComboOp>(op)) {
    combo.walk([&](KernelOp kernel) {
      bytes += tensorsBytes(kernel);
      flops += kernelFlops(kernel);
    });
  } else {
    bytes = tensorsBytes(op);
    auto kernel = dyn_cast<KernelOp>(op);
    flops = kernel ? kernelFlops(kernel) : gemmFlops(op);
  }
  return std::max(bytes / machine.memoryBandwidth, flops / machine.peakFlops);
}

double braze::collectiveSeconds(Operation *start, const Machine &machine) {
  double size = tensorBytes(start->getOperand(0).getType());
  double members = start->getAttrOfType<DenseI64ArrayAttr>("ranks").size();
  double sent = 0;
  if (isa<AllReduceStartOp>(start))
    sent = 2 * (members - 1) * size / members;
  else if (isa<AllGatherStartOp>(start))
    sent = (members - 1) * size;
  else if (isa<BroadcastStartOp>(start))
    sent = members > 1 ? size : 0;
  else // reduce_scatter, all_to_all
    sent = (members - 1) * size / members;
  return machine.linkLatency + sent / machine.linkBandwidth;
}
