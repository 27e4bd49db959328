//===- PlanMemory.cpp - braze-plan-memory ---------------------------------===//
//
// Places each function's intermediate kernel buffers in one arena: liveness
// over the scheduled op order, in-place updates, greedy offsets.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "braze-plan-memory"

namespace braze {
#define GEN_PASS_DEF_BRAZEPLANMEMORY
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {

// Ops whose results are fresh memory the runtime allocates through torch
// (library calls): counted in the peak, never aliases of their operands.
bool isLibraryCall(Operation *op) {
  return isa<MatmulOp, BmmOp, AddmmOp, ConvolutionOp, AttentionOp>(op);
}

// Ops whose results are fresh buffers the runtime writes with generated
// code, so it can carve them from the arena: kernels, fused GEMMs (the
// epilogue kernel writes the GEMM's output), flash attentions and combos
// (each result one of a sub-kernel's).
bool isGeneratedCall(Operation *op) {
  return isa<KernelOp, FusedGemmOp, FlashAttentionOp, ComboOp>(op);
}

// Whether a value of this type can hold (a view of) a buffer: tensors, and
// handles of other dialects (a collective's work).
bool mayHoldBuffer(Type type) {
  return isa<ShapedType>(type) || type.getDialect().getNamespace() != "builtin";
}

// Bytes of a static tensor, or -1 when a dim or the element size is unknown.
int64_t staticBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return -1;
  Type element = tensor.getElementType();
  int64_t elementBytes;
  if (auto complex = dyn_cast<ComplexType>(element))
    element = complex.getElementType();
  if (!element.isIntOrFloat())
    return -1;
  elementBytes = std::max<int64_t>(1, (element.getIntOrFloatBitWidth() + 7) / 8);
  if (isa<ComplexType>(tensor.getElementType()))
    elementBytes *= 2;
  return tensor.getNumElements() * elementBytes;
}

struct Buffer {
  Operation *producer;
  unsigned result;
  int64_t bytes;   // -1: not static
  int64_t start;   // index of the producing op
  int64_t end;     // index of the last op that may read it
  bool returned = false;
  bool inArena = false; // a kernel result: the runtime can carve it
  int storage = -1;     // arena placement shared by an in-place chain
  // A kernel result written over a dying library-call result: the buffer
  // whose memory it takes (its own bytes are that buffer's).
  int sharesWith = -1;
  int input = -1; // the kernel input it overwrites
};

// One arena placement: the buffers of an in-place chain, live from the
// first one's start to the last one's end.
struct Storage {
  int64_t bytes, start, end, offset = -1;
};

// The buffer a chain of views reads in the buffer's own element order, or
// null: reshapes (they keep the row-major order), permutes composing to the
// identity, or a channels-last convolution's result read through its
// permute to NHWC (the order of its bytes). Reading such a view at the
// point's indices reads the buffer's bytes in the order the result is
// written: the precondition for overwriting it.
Value sameOrderSource(Value value) {
  SmallVector<int64_t> composed; // value dim i is source dim composed[i]
  auto identity = [&] {
    return llvm::all_of(llvm::enumerate(composed),
                        [](auto dim) { return dim.value() == int64_t(dim.index()); });
  };
  while (Operation *view = value.getDefiningOp()) {
    if (auto permute = dyn_cast<PermuteOp>(view)) {
      ArrayRef<int64_t> order = permute.getPermutation();
      if (composed.empty())
        composed.assign(order.begin(), order.end());
      else
        for (int64_t &dim : composed)
          dim = order[dim];
    } else if (isa<ReshapeOp>(view)) {
      if (!identity())
        return {};
      composed.clear();
    } else {
      break;
    }
    value = view->getOperand(0);
  }
  if (identity())
    return value;
  auto convolution = value.getDefiningOp<ConvolutionOp>();
  if (!convolution || !convolution->hasAttr("memory_format"))
    return {};
  SmallVector<int64_t> channelsLast{0};
  for (int64_t dim = 2; dim < int64_t(composed.size()); ++dim)
    channelsLast.push_back(dim);
  channelsLast.push_back(1);
  return ArrayRef<int64_t>(composed) == ArrayRef<int64_t>(channelsLast) ? value : Value();
}

// Whether `value`, computed in `kernel`'s body, depends on a braze.reduce.
bool dependsOnReduction(KernelOp kernel, Value value) {
  SmallVector<Value> stack{value};
  DenseSet<Operation *> seen;
  while (!stack.empty()) {
    Operation *op = stack.pop_back_val().getDefiningOp();
    if (!op || op->getParentOp() != kernel || !seen.insert(op).second)
      continue;
    if (isa<ReduceOp>(op))
      return true;
    llvm::append_range(stack, op->getOperands());
  }
  return false;
}

// Whether `kernel` reads input `number` and writes result `result` only at
// the point's own indices (the precondition for writing one over the other).
// With reductions, the point's indices include the reduced dims, and every
// emitter runs one loop over a parallel point's reduction points per
// braze.reduce, then one for the stores that need a reduced value
// (codegen/analysis.py's stages): a result stored only there is written
// after the point's every read of the input, and no other parallel point
// reads those elements. A store that needs no reduced value runs in the
// first loop, before later loops read the input again, so it never writes
// in place (a softmax over a dying score matrix does; `exp(x)` stored
// beside `max(x)` does not).
bool readsAndWritesInPlace(KernelOp kernel, unsigned number, unsigned result) {
  bool reduces = !kernel.getReduce().empty();
  unsigned rank = kernel.getRank();
  auto atPoint = [&](ValueRange indices) {
    if (indices.size() != rank)
      return false;
    for (auto [dim, index] : llvm::enumerate(indices))
      if (index != kernel.getIndex(dim))
        return false;
    return true;
  };
  BlockArgument input = kernel.getInputArgument(number);
  for (Operation *user : input.getUsers()) {
    auto extract = dyn_cast<tensor::ExtractOp>(user);
    if (!extract || !atPoint(extract.getIndices()))
      return false;
  }
  bool stored = false;
  WalkResult walk = kernel.getBody().walk([&](StoreOp store) {
    if (store.getResult() != result)
      return WalkResult::advance();
    stored = true;
    bool last = !reduces || dependsOnReduction(kernel, store.getValue());
    return last && atPoint(store.getIndices()) ? WalkResult::advance() : WalkResult::interrupt();
  });
  return stored && !walk.wasInterrupted();
}

struct BrazePlanMemoryPass : braze::impl::BrazePlanMemoryBase<BrazePlanMemoryPass> {
  using BrazePlanMemoryBase::BrazePlanMemoryBase;

  void runOnOperation() override {
    if (alignment <= 0 || !llvm::isPowerOf2_64(alignment)) {
      emitError(getOperation().getLoc())
          << "braze-plan-memory: alignment must be a power of two, got "
          << static_cast<int64_t>(alignment);
      return signalPassFailure();
    }
    int64_t modulePeak = 0;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        modulePeak = std::max(modulePeak, plan(func));
    getOperation()->setAttr("braze.planned_peak_bytes",
                            Builder(&getContext()).getI64IntegerAttr(modulePeak));
  }

  int64_t align(int64_t bytes) const { return llvm::alignTo(bytes, alignment); }

  // Plans one function; returns its planned peak.
  int64_t plan(func::FuncOp func) {
    // 1. Buffers and the buffers each value may hold. 2. Lifetimes and
    // returns. 3. In-place chains. 4. Offsets. 5. Attributes and the peak.
    Block &body = func.getBody().front();
    SmallVector<Buffer> buffers;
    DenseMap<Value, SmallVector<int, 1>> holds;
    DenseMap<Operation *, int64_t> position;
    int64_t index = 0;
    for (Operation &op : body) {
      position[&op] = index;
      SmallVector<int> read;
      auto noteUse = [&](Value value) {
        auto found = holds.find(value);
        if (found == holds.end())
          return;
        for (int number : found->second) {
          buffers[number].end = std::max(buffers[number].end, index);
          read.push_back(number);
          if (isa<func::ReturnOp>(op))
            buffers[number].returned = true;
        }
      };
      op.walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (operand.getParentBlock() == &body)
            noteUse(operand);
      });
      if (isGeneratedCall(&op) || isLibraryCall(&op)) {
        for (OpResult result : op.getResults()) {
          holds[result].push_back(buffers.size());
          Buffer buffer{&op, result.getResultNumber(), staticBytes(result.getType()), index, index};
          buffer.inArena = isGeneratedCall(&op);
          buffers.push_back(buffer);
        }
      } else {
        llvm::sort(read);
        read.erase(std::unique(read.begin(), read.end()), read.end());
        for (OpResult result : op.getResults())
          if (mayHoldBuffer(result.getType()) && !read.empty())
            holds[result].assign(read.begin(), read.end());
      }
      ++index;
    }

    // The arena holds its bytes for the whole call, so next to large
    // library results (GEMMs, attention, convolutions, which torch
    // allocates) it can raise the peak above buffers freed as they die:
    // the plan with the lower peak is kept.
    Placement placement = place(buffers, holds, index, /*useArena=*/true);
    Placement onAllocator;
    if (allocatorFallback)
      onAllocator = place(buffers, holds, index, /*useArena=*/false);
    bool arenaHelps = !allocatorFallback || placement.peak <= onAllocator.peak;
    if (!arenaHelps)
      std::swap(placement, onAllocator);

    Builder builder(&getContext());
    for (Operation &op : body) {
      if (!isGeneratedCall(&op))
        continue;
      SmallVector<int64_t> offsets(op.getNumResults(), -1);
      SmallVector<int64_t> reuse(op.getNumResults(), -1);
      for (OpResult result : op.getResults()) {
        const Buffer &buffer = placement.buffers[holds[result].front()];
        if (buffer.inArena)
          offsets[result.getResultNumber()] = placement.storages[buffer.storage].offset;
        reuse[result.getResultNumber()] = buffer.input;
      }
      op.setAttr("braze.offsets", builder.getDenseI64ArrayAttr(offsets));
      if (llvm::any_of(reuse, [](int64_t input) { return input >= 0; }))
        op.setAttr("braze.reuse", builder.getDenseI64ArrayAttr(reuse));
    }
    numInPlace += placement.inPlaceCount;
    for (auto [number, buffer] : llvm::enumerate(placement.buffers)) {
      if (!isGeneratedCall(buffer.producer) || buffer.sharesWith >= 0)
        continue;
      if (buffer.inArena) {
        ++numPlanned;
        continue;
      }
      ++numAllocator;
      if (!remarks || !arenaHelps)
        continue;
      bool takenOver = llvm::any_of(placement.buffers, [&](const Buffer &other) {
        return other.sharesWith == static_cast<int>(number);
      });
      emitRemark(buffer.producer->getLoc())
          << "braze-plan-memory: result #" << buffer.result << " stays on the allocator: "
          << (buffer.returned ? "it is returned"
              : buffer.bytes < 0 ? "its size is not static"
              : takenOver ? "a returned result takes it over"
                          : "it is written over a library call's result");
    }
    int64_t peak = placement.peak;
    func->setAttr("braze.arena_bytes", builder.getI64IntegerAttr(placement.arena));
    func->setAttr("braze.planned_peak_bytes", builder.getI64IntegerAttr(peak));
    if (remarks) {
      auto remark = emitRemark(func.getLoc());
      remark << "braze-plan-memory: @" << func.getSymName() << ": arena " << placement.arena << " bytes for "
             << placement.storages.size() << " placement(s), " << placement.inPlaceCount
             << " buffer(s) in place; planned peak " << peak << " bytes (live buffers need at least "
             << placement.lowerBound << ")";
      if (!arenaHelps)
        remark << "; every buffer on the allocator: an arena would hold " << onAllocator.arena
               << " bytes for the whole call, for a peak of " << onAllocator.peak << " bytes";
    }
    return peak;
  }

  // One plan of a function's buffers: which are in the arena and where,
  // which take over a dying input's memory, and the peak.
  struct Placement {
    SmallVector<Buffer> buffers;
    SmallVector<Storage> storages;
    int64_t arena = 0, peak = 0, lowerBound = 0, inPlaceCount = 0;
  };

  // Plans `buffers` (live over `opCount` ops) with an arena for generated
  // buffers, or (`useArena` false) every buffer on the allocator, freed
  // when it dies, and every kernel free to take over a dying input.
  Placement place(SmallVector<Buffer> buffers, DenseMap<Value, SmallVector<int, 1>> &holds,
                  int64_t opCount, bool useArena) {
    Placement placement;
    if (!useArena)
      for (Buffer &buffer : buffers)
        buffer.inArena = false;
    if (inPlace)
      for (auto [number, buffer] : llvm::enumerate(buffers))
        if ((buffer.returned || !useArena) && isa<KernelOp>(buffer.producer) &&
            takesOverAllocation(buffers, holds, number, /*generated=*/true)) {
          buffer.inArena = false;
          ++placement.inPlaceCount;
        }
    SmallVector<Storage> &storages = placement.storages;
    for (auto [number, buffer] : llvm::enumerate(buffers)) {
      if (!buffer.inArena)
        continue;
      if (inPlace && takesOverAllocation(buffers, holds, number, /*generated=*/false)) {
        // The runtime writes it into the library call's own allocation, so
        // it may even be returned.
        buffer.inArena = false;
        ++placement.inPlaceCount;
        continue;
      }
      if (buffer.returned || buffer.bytes < 0) {
        buffer.inArena = false;
        continue;
      }
      if (inPlace)
        buffer.storage = inPlaceStorage(buffers, holds, number);
      if (buffer.storage >= 0) {
        ++placement.inPlaceCount;
        storages[buffer.storage].end = std::max(storages[buffer.storage].end, buffer.end);
        continue;
      }
      buffer.storage = storages.size();
      storages.push_back({align(buffer.bytes), buffer.start, buffer.end});
    }
    placement.arena = placeStorages(storages);

    // The peak: the arena (held for the whole call) plus the static
    // buffers outside it live at each op; and, for the remark, the most
    // bytes of static buffers live at once (no plan can do better).
    int64_t outside = 0;
    for (int64_t at = 0; at < opCount; ++at) {
      int64_t live = 0, liveAll = 0;
      for (const Buffer &buffer : buffers) {
        if (buffer.bytes < 0 || buffer.sharesWith >= 0 || at < buffer.start || at > buffer.end)
          continue;
        liveAll += align(buffer.bytes);
        if (!buffer.inArena)
          live += align(buffer.bytes);
      }
      outside = std::max(outside, live);
      placement.lowerBound = std::max(placement.lowerBound, liveAll);
    }
    placement.peak = placement.arena + outside;
    placement.buffers = std::move(buffers);
    return placement;
  }

  // The inputs (input number, buffer number) whose buffer kernel buffer
  // `number` could be written over: of its type, the buffer itself or a
  // view in its order, dying at this kernel, and read (at every position
  // the kernel takes it) only at the point it writes.
  SmallVector<std::pair<unsigned, int>>
  overwritableInputs(SmallVector<Buffer> &buffers, DenseMap<Value, SmallVector<int, 1>> &holds,
                     int number) {
    Buffer &buffer = buffers[number];
    SmallVector<std::pair<unsigned, int>> candidates;
    // A fused GEMM reads whole rows and columns of its operands; a combo's
    // sub-kernels run at once, so one may still read what another writes.
    auto kernel = dyn_cast<KernelOp>(buffer.producer);
    if (!kernel)
      return candidates;
    Type type = kernel->getResult(buffer.result).getType();
    for (auto [input, value] : llvm::enumerate(kernel.getInputs())) {
      auto found = holds.find(value);
      if (value.getType() != type || found == holds.end() || found->second.size() != 1)
        continue;
      const Buffer &source = buffers[found->second.front()];
      if (source.producer->getResult(source.result) != sameOrderSource(value) ||
          source.end != buffer.start)
        continue;
      bool everyReadInPlace = llvm::all_of(llvm::enumerate(kernel.getInputs()), [&](auto other) {
        return other.value() != value ||
               readsAndWritesInPlace(kernel, other.index(), buffer.result);
      });
      if (everyReadInPlace)
        candidates.push_back({static_cast<unsigned>(input), found->second.front()});
    }
    return candidates;
  }

  // The arena storage that buffer `number` may share with a dying input of
  // its kernel that no other result of the kernel took (-1 if none).
  int inPlaceStorage(SmallVector<Buffer> &buffers, DenseMap<Value, SmallVector<int, 1>> &holds,
                     int number) {
    Buffer &buffer = buffers[number];
    for (auto [input, sourceNumber] : overwritableInputs(buffers, holds, number)) {
      const Buffer &source = buffers[sourceNumber];
      if (!source.inArena || source.storage < 0)
        continue;
      bool taken = llvm::any_of(buffers, [&](const Buffer &other) {
        return &other != &buffer && other.producer == buffer.producer &&
               other.storage == source.storage;
      });
      if (!taken)
        return source.storage;
    }
    return -1;
  }

  // Whether buffer `number` can take the memory of a library-call result
  // (directly, or through kernels that took it before) that dies at its
  // kernel; if so, records it. With `generated`, the memory of a generated
  // call's dying result instead, which then leaves the arena (the runtime
  // allocates it, and the buffer takes it over): for a returned result,
  // which the arena cannot hold.
  bool takesOverAllocation(SmallVector<Buffer> &buffers,
                           DenseMap<Value, SmallVector<int, 1>> &holds, int number, bool generated) {
    Buffer &buffer = buffers[number];
    for (auto [input, sourceNumber] : overwritableInputs(buffers, holds, number)) {
      Buffer &source = buffers[sourceNumber];
      if (!isLibraryCall(source.producer) && source.sharesWith < 0 &&
          !(generated && isGeneratedCall(source.producer)))
        continue;
      int root = source.sharesWith >= 0 ? source.sharesWith : sourceNumber;
      bool taken = llvm::any_of(buffers, [&](const Buffer &other) {
        return &other != &buffer && other.producer == buffer.producer && other.sharesWith == root;
      });
      if (taken)
        continue;
      buffers[root].inArena = false;  // the runtime allocates it
      buffer.sharesWith = root;
      buffer.input = input;
      buffers[root].end = std::max(buffers[root].end, buffer.end);
      return true;
    }
    return false;
  }


  // Greedy by size: each storage, largest first, at the lowest aligned
  // offset clear of every placed storage whose lifetime overlaps its own.
  // Returns the arena's size.
  int64_t placeStorages(SmallVector<Storage> &storages) {
    auto order = llvm::to_vector(llvm::seq<unsigned>(0, storages.size()));
    llvm::stable_sort(order, [&](unsigned a, unsigned b) {
      return storages[a].bytes > storages[b].bytes;
    });
    int64_t arena = 0;
    SmallVector<unsigned> placed;
    for (unsigned number : order) {
      Storage &storage = storages[number];
      SmallVector<Storage *> overlapping;
      for (unsigned other : placed)
        if (storages[other].start <= storage.end && storage.start <= storages[other].end)
          overlapping.push_back(&storages[other]);
      llvm::sort(overlapping, [](Storage *a, Storage *b) { return a->offset < b->offset; });
      int64_t offset = 0;
      for (Storage *other : overlapping) {
        if (offset + storage.bytes <= other->offset)
          break;
        offset = std::max(offset, align(other->offset + other->bytes));
      }
      storage.offset = offset;
      arena = std::max(arena, offset + storage.bytes);
      placed.push_back(number);
    }
    return arena;
  }
};

} // namespace
