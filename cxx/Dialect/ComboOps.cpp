//===- ComboOps.cpp - braze.combo -----------------------------------------===//

#include "Dialect/ComboOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace braze;

std::optional<int64_t> braze::comboBlockedPoints(KernelOp kernel) {
  ArrayRef<int64_t> domain = kernel.getStaticDomain();
  ArrayRef<int64_t> reduce = kernel.getReduce();
  int64_t points = 1;
  for (auto [dim, extent] : llvm::enumerate(domain)) {
    if (llvm::is_contained(reduce, static_cast<int64_t>(dim)))
      continue;
    if (ShapedType::isDynamic(extent))
      return std::nullopt;
    points *= extent;
  }
  return points;
}

std::optional<int64_t> braze::comboWorkItems(KernelOp kernel, int64_t block) {
  std::optional<int64_t> points = comboBlockedPoints(kernel);
  if (!points || block <= 0)
    return std::nullopt;
  return llvm::divideCeil(*points, block);
}

KernelOp ComboOp::getSubKernel(unsigned number) {
  return cast<KernelOp>(getSubkernels()[number].front().front());
}

int64_t ComboOp::getScheduleEntry(unsigned number, StringRef key) {
  auto schedule = cast<DictionaryAttr>(getSchedules()[number]);
  return cast<IntegerAttr>(schedule.get(key)).getInt();
}

LogicalResult ComboOp::verify() {
  if (!llvm::is_contained(kComboDispatchModes, getDispatch()))
    return emitOpError("has unknown dispatch '")
           << getDispatch()
           << "' (expected sequential, round_robin or flattened)";
  if (getSchedules().size() != getSubkernels().size())
    return emitOpError("has ")
           << getSubkernels().size() << " sub-kernel(s) but "
           << getSchedules().size() << " schedule(s)";
  return success();
}

/// The schedule of a sub-kernel: `block`, `cost` and (only with reductions)
/// `rblock`, each a positive integer, blocks powers of two.
static LogicalResult verifySchedule(ComboOp combo, unsigned number,
                                    Attribute attribute, bool reduces) {
  auto schedule = dyn_cast<DictionaryAttr>(attribute);
  if (!schedule)
    return combo.emitOpError("schedule #")
           << number << " must be a dictionary, got " << attribute;
  for (NamedAttribute entry : schedule) {
    StringRef key = entry.getName().getValue();
    if (key != "block" && key != "rblock" && key != "cost")
      return combo.emitOpError("schedule #")
             << number << " has unknown entry '" << key
             << "' (expected block, rblock, cost)";
    auto value = dyn_cast<IntegerAttr>(entry.getValue());
    if (!value || value.getInt() <= 0)
      return combo.emitOpError("schedule #")
             << number << " entry '" << key
             << "' must be a positive integer, got " << entry.getValue();
    if (key != "cost" && !llvm::isPowerOf2_64(value.getInt()))
      return combo.emitOpError("schedule #")
             << number << " entry '" << key
             << "' must be a power of two, got " << value.getInt();
  }
  for (StringRef key : {"block", "cost"})
    if (!schedule.get(key))
      return combo.emitOpError("schedule #")
             << number << " has no '" << key << "'";
  if (reduces && !schedule.get("rblock"))
    return combo.emitOpError("schedule #")
           << number << " has no 'rblock' but its kernel reduces";
  if (!reduces && schedule.get("rblock"))
    return combo.emitOpError("schedule #")
           << number << " has an 'rblock' but its kernel reduces nothing";
  return success();
}

LogicalResult ComboOp::verifyRegions() {
  unsigned count = getSubkernels().size();
  if (count < 2)
    return emitOpError("must hold at least 2 sub-kernels, holds ") << count;
  SmallVector<Type> yielded;
  std::optional<int64_t> equalItems;
  for (auto [number, region] : llvm::enumerate(getSubkernels())) {
    Block &block = region.front();
    if (block.getNumArguments() != 0)
      return emitOpError("sub-kernel #")
             << number << " must take no block arguments";
    auto kernel = block.empty() ? nullptr : dyn_cast<KernelOp>(&block.front());
    auto yield = block.empty() ? nullptr : dyn_cast<ComboYieldOp>(&block.back());
    if (!kernel || !yield || kernel->getNextNode() != yield.getOperation())
      return emitOpError("sub-kernel #")
             << number
             << " must hold exactly one braze.kernel and a braze.combo_yield "
                "of its results";
    if (!llvm::equal(yield.getValues(), kernel.getResults()))
      return emitOpError("sub-kernel #")
             << number << " must yield its kernel's results, in order";
    llvm::append_range(yielded, kernel.getResultTypes());
    if (failed(verifySchedule(*this, number, getSchedules()[number],
                              !kernel.getReduce().empty())))
      return failure();
    if (getDispatch() == "round_robin") {
      std::optional<int64_t> items =
          comboWorkItems(kernel, getScheduleEntry(number, "block"));
      if (!items)
        return emitOpError("dispatch round_robin needs static work items, "
                           "but sub-kernel #")
               << number << " has a dynamic extent";
      if (equalItems && *equalItems != *items)
        return emitOpError("dispatch round_robin needs equal work items, "
                           "but sub-kernel #")
               << number << " has " << *items << " and the first has "
               << *equalItems;
      equalItems = items;
    }
  }
  if (TypeRange(yielded) != getResultTypes())
    return emitOpError("yields ")
           << TypeRange(yielded) << " but its results are "
           << getResultTypes();
  return success();
}
