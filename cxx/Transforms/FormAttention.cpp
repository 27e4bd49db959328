//===- FormAttention.cpp - the braze-form-attention pass ------------------===//
//
// Attention spelled out as products and a softmax (reference code, BERT's
// and GPT-2's eager attention, SDPA's math decomposition) becomes one
// braze.attention, which never writes the L x S scores out.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/IterationDomain.h"
#include "Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <cstdio>

namespace braze {
#define GEN_PASS_DEF_BRAZEFORMATTENTION
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// A finite fill at or below this absorbs any score added to it in float
/// arithmetic (|score| < 2^75): HF's finfo(f32 or bf16).min (-3.4e38) is;
/// f16's (-65504) is not.
constexpr double kAbsorbingFill = -1e30;

/// The value of a splat float constant, if `value` is one.
std::optional<double> splatValue(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
  if (!splat || !isa<FloatType>(splat.getElementType()))
    return std::nullopt;
  return splat.getSplatValue<APFloat>().convertToDouble();
}

std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// A scalar operand of a pointwise op: every dim 1 (or none).
bool isScalarShaped(Value value) {
  return llvm::all_of(tensorType(value).getShape(),
                      [](int64_t d) { return d == 1; });
}

/// Whether a reshape from `from` to `to` only merges (or splits) the dims
/// before the last two, which it keeps: how a product of rank-4 tensors is
/// captured (`[B, H, L, S]` <-> `[B*H, L, S]`). Dynamic sizes are taken to
/// be the capture's own (a dynamic dim equals a dynamic dim).
bool mergesBatch(RankedTensorType from, RankedTensorType to) {
  if (from.getRank() < 2 || to.getRank() < 2)
    return false;
  ArrayRef<int64_t> a = from.getShape(), b = to.getShape();
  if (a.take_back(2) != b.take_back(2))
    return false;
  auto product = [](ArrayRef<int64_t> dims) -> std::optional<int64_t> {
    int64_t total = 1;
    for (int64_t d : dims) {
      if (ShapedType::isDynamic(d))
        return std::nullopt;
      total *= d;
    }
    return total;
  };
  std::optional<int64_t> p = product(a.drop_back(2)),
                         q = product(b.drop_back(2));
  return p == q; // both static and equal, or both with a dynamic dim
}

/// The users of an op's results.
bool onlyUsedBy(Operation *op, const llvm::SetVector<Operation *> &allowed) {
  return llvm::all_of(op->getUsers(),
                      [&](Operation *user) { return allowed.contains(user); });
}

/// Whether `value` is the scores: a product q @ k^T reached through the
/// ops attention code puts between it and the softmax (reshapes, casts,
/// scales, soft caps and masks), not a mask computed beside it.
bool leadsToProduct(Value value, int depth = 8) {
  Operation *op = value.getDefiningOp();
  if (!op || depth == 0)
    return false;
  if (isa<BmmOp, MatmulOp>(op))
    return true;
  if (isa<ReshapeOp, CastOp, TanhOp>(op))
    return leadsToProduct(op->getOperand(0), depth - 1);
  if (isa<AddOp, MulOp, DivOp>(op))
    return leadsToProduct(op->getOperand(0), depth - 1) ||
           leadsToProduct(op->getOperand(1), depth - 1);
  if (auto where = dyn_cast<WhereOp>(op))
    return leadsToProduct(where.getTrueValue(), depth - 1) ||
           leadsToProduct(where.getFalseValue(), depth - 1);
  return false;
}

/// The type in which a mask added to scores of type `scores` reads the same
/// elements of scores reshaped to `frame`, whose batch dims split those of
/// `scores` (Swin's `[B*nW, H, L, S]` viewed as `[B, nW, H, L, S]` for its
/// shifted-window mask): each batch dim of the scores becomes the frame's
/// dims it splits into, all of size 1 where the mask broadcasts over it.
/// None when the frame does not split the scores' batch dims that way.
std::optional<RankedTensorType> maskInFrame(RankedTensorType mask,
                                            RankedTensorType scores,
                                            RankedTensorType frame) {
  if (scores.getShape() == frame.getShape())
    return mask;
  ArrayRef<int64_t> coarse = scores.getShape().drop_back(2);
  ArrayRef<int64_t> fine = frame.getShape().drop_back(2);
  // A reshape keeps the dims it leaves equal at either end (a dynamic size
  // equals a dynamic one, as in mergesBatch); what remains of the scores'
  // dims must be the one the rest of the frame's split.
  int64_t tail = 0;
  while (tail < int64_t(coarse.size()) && tail < int64_t(fine.size()) &&
         coarse[coarse.size() - 1 - tail] == fine[fine.size() - 1 - tail])
    ++tail;
  int64_t head = 0;
  while (int64_t(coarse.size()) - tail - head > 1 &&
         coarse[head] == fine[head])
    ++head;
  ArrayRef<int64_t> split = coarse.slice(head, coarse.size() - tail - head);
  ArrayRef<int64_t> parts = fine.slice(head, fine.size() - tail - head);
  if (split.size() > 1)
    return std::nullopt;
  if (split.empty() ? llvm::any_of(parts, [](int64_t d) { return d != 1; })
                    : llvm::count_if(parts, ShapedType::isDynamic) !=
                          int64_t(ShapedType::isDynamic(split[0])))
    return std::nullopt;
  if (!split.empty() && !ShapedType::isDynamic(split[0])) {
    int64_t product = 1;
    for (int64_t d : parts)
      product *= d;
    if (product != split[0])
      return std::nullopt;
  }
  // The mask's dims, padded to the scores' rank, with the split dim
  // replaced by its parts (or by ones where the mask broadcasts).
  SmallVector<int64_t> padded(scores.getRank() - mask.getRank(), 1);
  llvm::append_range(padded, mask.getShape());
  SmallVector<int64_t> shape(padded.begin(), padded.begin() + head);
  bool broadcast = split.empty() || padded[head] == 1;
  for (int64_t d : parts)
    shape.push_back(broadcast ? 1 : d);
  llvm::append_range(shape, ArrayRef<int64_t>(padded).drop_front(
                                head + split.size()));
  if (llvm::count_if(shape, ShapedType::isDynamic) > 1)
    return std::nullopt; // a reshape that would need its sizes
  return RankedTensorType::get(shape, mask.getElementType());
}

/// One attention found at a product `softmax(...) @ v`.
class AttentionMatch {
public:
  explicit AttentionMatch(Operation *root) : root(root) {}

  /// Whether the product's lhs is a softmax over the last dim: only then
  /// is the product an attention candidate worth a remark.
  bool findSoftmax();
  /// The rest of the pattern, after findSoftmax; false with `why` set.
  bool match();
  /// Replaces the product and the ops taken by one braze.attention.
  void build(OpBuilder &builder);

  std::string why;
  std::string maskKind = "no mask";
  double scale = 1.0;
  /// Gemma 2's and Grok's `cap * tanh(scores / cap)` under the mask.
  std::optional<double> softcap;

private:
  bool refuse(const Twine &reason) {
    why = reason.str();
    return false;
  }
  /// `value` (of rank 3 or 2) in the frame's rank: itself, or the input of
  /// a reshape that merged the frame's batch dims.
  Value inFrame(Value value);
  /// `value` as inFrame found it, reshaped to the frame if it must be.
  Value framed(Value value, OpBuilder &builder);
  bool takeMask(Value &scores);
  bool takeScale(Value &scores);
  bool takeSoftcap(Value &scores);

  Operation *root;
  Value scores;        // the softmax's input: scaled and masked Q K^T
  RankedTensorType frame; // [B..., L, S]
  Value query, keyTransposed, value;
  /// A mask, the scores' type where it was applied, and its type in the
  /// frame. Additive masks are summed (several: Swin's position bias and
  /// its shifted-window mask); a boolean mask is the only one.
  struct Mask {
    Value value;
    RankedTensorType scores;
    RankedTensorType framed;
    /// A boolean mask filling with a finite value below kAbsorbingFill:
    /// read as the additive mask `where(value, 0, fill)` (or `where(value,
    /// fill, 0)` when it fills where true).
    std::optional<double> fill = std::nullopt;
    bool fillOnTrue = false;
  };
  SmallVector<Mask> masks;
  Value notInput;      // a condition the boolean mask negates
  bool boolMask = false;
  llvm::SetVector<Operation *> taken; // in program order once sorted
  // Ops the pattern reads that others may read too: the reshapes and
  // permute of q, k and v, constants, an undone `not`.
  SmallVector<Operation *> views;
  // Values read through a reshape to the frame the pass makes, and its type.
  SmallVector<std::pair<Value, RankedTensorType>> pending;
};

Value AttentionMatch::inFrame(Value value) {
  RankedTensorType type = tensorType(value);
  if (type.getRank() == frame.getRank())
    return value;
  if (auto reshape = value.getDefiningOp<ReshapeOp>()) {
    RankedTensorType source = tensorType(reshape.getInput());
    if (source.getRank() == frame.getRank() &&
        mergesBatch(source, reshape.getType()) &&
        source.getShape().drop_back(2) == frame.getShape().drop_back(2)) {
      views.push_back(reshape);
      return reshape.getInput();
    }
  }
  // Read through a reshape of its own to the frame's batch dims (q, k or v
  // sliced out of a larger tensor, say): one that needs no sizes.
  SmallVector<int64_t> shape(frame.getShape().drop_back(2));
  llvm::append_range(shape, type.getShape().take_back(2));
  auto framed = RankedTensorType::get(shape, type.getElementType());
  if (!mergesBatch(framed, type) ||
      llvm::count_if(shape, ShapedType::isDynamic) > 1)
    return {};
  pending.push_back({value, framed});
  return value;
}

Value AttentionMatch::framed(Value value, OpBuilder &builder) {
  for (auto [source, type] : pending)
    if (source == value)
      return ReshapeOp::create(builder, root->getLoc(), type, value,
                               ValueRange{});
  return value;
}

bool AttentionMatch::findSoftmax() {
  Value lhs = root->getOperand(0);
  if (auto reshape = lhs.getDefiningOp<ReshapeOp>()) {
    if (!mergesBatch(tensorType(reshape.getInput()), reshape.getType()))
      return false;
    taken.insert(reshape);
    lhs = reshape.getInput();
  }
  if (auto cast = lhs.getDefiningOp<CastOp>()) { // softmax(..., dtype=f32).to(q.dtype)
    taken.insert(cast);
    lhs = cast.getInput();
  }
  auto div = lhs.getDefiningOp<DivOp>();
  if (!div)
    return false;
  auto exp = div.getLhs().getDefiningOp<ExpOp>();
  auto sum = div.getRhs().getDefiningOp<SumOp>();
  if (!exp || !sum || sum.getInput() != exp.getResult() || !sum.getKeepdim())
    return false;
  auto sub = exp.getInput().getDefiningOp<SubOp>();
  if (!sub)
    return false;
  auto max = sub.getRhs().getDefiningOp<MaxOp>();
  if (!max || max.getInput() != sub.getLhs() || !max.getKeepdim())
    return false;
  frame = tensorType(div.getResult());
  int64_t last = frame.getRank() - 1;
  if (reducedDims(sum) != SmallVector<int64_t>{last} ||
      reducedDims(max) != SmallVector<int64_t>{last} ||
      tensorType(sub.getLhs()).getShape() != frame.getShape())
    return false;
  for (Operation *op : {max.getOperation(), sub.getOperation(),
                        exp.getOperation(), sum.getOperation(),
                        div.getOperation()})
    taken.insert(op);
  scores = sub.getLhs();
  return true;
}

bool AttentionMatch::takeMask(Value &value) {
  Operation *def = value.getDefiningOp();
  RankedTensorType scores = tensorType(value);
  if (boolMask)
    return refuse("the scores are masked again after a boolean mask");
  if (auto add = dyn_cast<AddOp>(def)) {
    // The scores are the operand reached from a product; the other is the
    // mask.
    bool lhsScores = leadsToProduct(add.getLhs());
    Value mask = lhsScores ? add.getRhs() : add.getLhs();
    value = lhsScores ? add.getLhs() : add.getRhs();
    if (tensorType(value).getShape() != scores.getShape())
      return refuse("the mask broadcasts the scores to a larger shape");
    masks.push_back({mask, scores, {}});
    maskKind = masks.size() > 1 ? "additive masks" : "additive mask";
    taken.insert(add);
    return true;
  }
  auto where = cast<WhereOp>(def);
  std::optional<double> onTrue = splatValue(where.getTrueValue());
  std::optional<double> onFalse = splatValue(where.getFalseValue());
  bool fillOnTrue = onTrue && isScalarShaped(where.getTrueValue());
  bool fillOnFalse = onFalse && isScalarShaped(where.getFalseValue());
  if (!fillOnTrue && !fillOnFalse)
    return refuse("the scores are selected between two tensors, not "
                  "masked with a constant");
  double fill = fillOnTrue ? *onTrue : *onFalse;
  value = fillOnTrue ? where.getFalseValue() : where.getTrueValue();
  if (tensorType(value).getShape() != scores.getShape())
    return refuse("the mask broadcasts the scores to a larger shape");
  views.push_back((fillOnTrue ? where.getTrueValue() : where.getFalseValue())
                      .getDefiningOp());
  taken.insert(where);
  if (std::isfinite(fill)) {
    // HF's masked_fill(mask, finfo.min): the fill absorbs any score added
    // to it, so `s + where(c, 0, fill)` is `where(c, s, fill)` exactly, a
    // fully masked row included (uniform weights, as eager's).
    if (!(fill <= kAbsorbingFill))
      return refuse("the mask fills with " + formatNumber(fill) +
                    ", not minus infinity nor below -1e30 (a score added "
                    "to it would not round to it)");
    masks.push_back({where.getCondition(), scores, {}, fill, fillOnTrue});
    maskKind = masks.size() > 1 ? "additive masks" : "additive mask";
    return true;
  }
  if (!(std::isinf(fill) && fill < 0)) // +inf or NaN
    return refuse("the mask fills with " + formatNumber(fill) +
                  ", not minus infinity");
  if (!masks.empty())
    return refuse("the scores are masked by a boolean mask and another");
  Value mask = where.getCondition();
  boolMask = true;
  if (fillOnTrue) { // kept where the condition is false
    if (auto negated = mask.getDefiningOp<NotOp>()) {
      views.push_back(negated);
      mask = negated.getInput();
    } else
      notInput = mask;
  }
  masks.push_back({mask, scores, {}});
  maskKind = "boolean mask";
  return true;
}

bool AttentionMatch::takeScale(Value &value) {
  Operation *def = value.getDefiningOp();
  if (!def || !isa<MulOp, DivOp>(def))
    return true;
  Value lhs = def->getOperand(0), rhs = def->getOperand(1);
  std::optional<double> factor = splatValue(rhs);
  bool constantOnRhs = factor && isScalarShaped(rhs);
  if (!constantOnRhs && isa<MulOp>(def)) {
    factor = splatValue(lhs);
    if (factor && isScalarShaped(lhs))
      std::swap(lhs, rhs);
    else
      factor.reset();
  } else if (!constantOnRhs) {
    factor.reset();
  }
  if (!factor)
    return refuse("the scores are scaled by a tensor, not a constant");
  scale *= isa<DivOp>(def) ? 1.0 / *factor : *factor;
  views.push_back(rhs.getDefiningOp());
  value = lhs;
  taken.insert(def);
  return true;
}

/// After a scale: when it multiplies a tanh, it was a soft cap `cap *
/// tanh(x * f)` (f: the constant factors under the tanh, the model's scale
/// and 1/cap), taken as softcap `cap` with scale `f * cap`, which is the
/// same function.
bool AttentionMatch::takeSoftcap(Value &value) {
  auto tanh = value.getDefiningOp<TanhOp>();
  if (!tanh)
    return true;
  if (!(scale > 0))
    return refuse("the scores are soft-capped by " + formatNumber(scale) +
                  ", not a positive cap");
  softcap = scale;
  scale = 1.0;
  taken.insert(tanh);
  value = tanh.getInput();
  // The model's scale and the division by the cap, in either order.
  for (int factors = 0; factors < 2 && isa_and_nonnull<MulOp, DivOp>(
                                           value.getDefiningOp());
       ++factors)
    if (!takeScale(value))
      return false;
  scale *= *softcap;
  return true;
}

bool AttentionMatch::match() {
  Value current = scores;
  if (auto cast = current.getDefiningOp<CastOp>()) { // half scores, f32 softmax
    taken.insert(cast);
    current = cast.getInput();
  }
  // From the softmax down: masks, then a scale, with reshapes of the batch
  // dims anywhere between.
  bool scaled = false;
  while (Operation *def = current.getDefiningOp()) {
    if (auto reshape = dyn_cast<ReshapeOp>(def)) {
      if (!mergesBatch(tensorType(reshape.getInput()), reshape.getType()))
        return refuse("the scores are reshaped other than by merging batch "
                      "dims");
      taken.insert(reshape);
      current = reshape.getInput();
    } else if (!scaled && isa<AddOp, WhereOp>(def)) {
      if (!takeMask(current))
        return false;
    } else if (!scaled && isa<MulOp, DivOp>(def)) {
      if (!takeScale(current) || !takeSoftcap(current))
        return false;
      scaled = true;
    } else if (isa<TanhOp>(def)) {
      return refuse("the scores pass through tanh without a constant cap "
                    "multiplying it");
    } else {
      break;
    }
  }
  // The attention's batch dims: the finest any mask was applied in, where
  // every mask reads the scores' elements through a broadcast.
  for (const Mask &mask : masks)
    if (tensorType(mask.value).getRank() > mask.scores.getRank())
      return refuse("the mask has more dims than the scores");
  for (const Mask &mask : masks)
    if (mask.scores.getRank() > frame.getRank())
      frame = mask.scores;
  for (Mask &mask : masks) {
    RankedTensorType type = tensorType(mask.value);
    if (mask.fill) // read as an additive mask of the scores' type
      type = type.clone(mask.scores.getElementType());
    std::optional<RankedTensorType> framed =
        maskInFrame(type, mask.scores, frame);
    if (!framed)
      return refuse("a mask is applied to the scores in batch dims that do "
                    "not split into the other masks'");
    mask.framed = *framed;
  }
  Operation *product = current.getDefiningOp();
  if (!product || !isa<BmmOp, MatmulOp>(product))
    return refuse("the softmax's input is not a product q @ k^T (through a "
                  "scale and a mask)");
  taken.insert(product);
  query = inFrame(product->getOperand(0));
  keyTransposed = inFrame(product->getOperand(1));
  value = inFrame(root->getOperand(1));
  if (!query || !keyTransposed || !value)
    return refuse("q, k or v has other batch dims than the scores");
  Type element = tensorType(query).getElementType();
  if (tensorType(keyTransposed).getElementType() != element ||
      tensorType(value).getElementType() != element ||
      tensorType(root->getResult(0)).getElementType() != element)
    return refuse("q, k, v and the result have different element types");
  if (!boolMask && llvm::any_of(masks, [&](const Mask &mask) {
        return mask.framed.getElementType() != element;
      }))
    return refuse("the additive mask's element type is not q's");
  if (llvm::any_of(taken, [&](Operation *op) {
        return op->getBlock() != root->getBlock();
      }))
    return refuse("the pattern spans regions");
  // Every value between the two products is read only inside the pattern.
  llvm::SetVector<Operation *> inside(taken.begin(), taken.end());
  inside.insert(root);
  for (Operation *op : taken)
    if (!onlyUsedBy(op, inside))
      return refuse("'" + op->getName().getStringRef().str() +
                    "' (the scores or the weights) is read outside the "
                    "attention");
  // The product's own result: read as is, or through reshapes to the frame.
  RankedTensorType result = tensorType(root->getResult(0));
  if (result.getRank() != frame.getRank() &&
      llvm::count_if(result.getShape(), ShapedType::isDynamic) > 1 &&
      !llvm::all_of(root->getUsers(), [&](Operation *user) {
        auto reshape = dyn_cast<ReshapeOp>(user);
        return reshape && reshape.getType().getRank() == frame.getRank() &&
               mergesBatch(reshape.getType(), result);
      }))
    return refuse("the result is read with several dynamic dims in its "
                  "merged form");
  return true;
}

void AttentionMatch::build(OpBuilder &builder) {
  Location loc = root->getLoc();
  builder.setInsertionPoint(root);
  int64_t rank = frame.getRank();
  query = framed(query, builder);
  keyTransposed = framed(keyTransposed, builder);
  value = framed(value, builder);
  Value key;
  auto permute = keyTransposed.getDefiningOp<PermuteOp>();
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(swap[rank - 1], swap[rank - 2]);
  if (permute && permute.getPermutation() == ArrayRef<int64_t>(swap)) {
    key = permute.getInput();
    views.push_back(permute);
  } else {
    SmallVector<int64_t> shape(tensorType(keyTransposed).getShape());
    std::swap(shape[rank - 1], shape[rank - 2]);
    key = PermuteOp::create(
        builder, loc,
        RankedTensorType::get(shape, tensorType(keyTransposed).getElementType()),
        keyTransposed, swap);
  }
  // The masks in the frame, summed in the order the scores met them.
  Value mask;
  for (const Mask &added : llvm::reverse(masks)) {
    Value framedMask = added.value;
    if (framedMask == notInput)
      framedMask = NotOp::create(builder, loc, notInput.getType(), notInput);
    if (added.fill) {
      auto scalar = [&](double number) -> Value {
        auto type = RankedTensorType::get({}, added.framed.getElementType());
        return ConstantOp::create(
            builder, loc,
            DenseElementsAttr::get(
                type, builder.getFloatAttr(type.getElementType(), number)));
      };
      Value fill = scalar(*added.fill), zero = scalar(0.0);
      framedMask = WhereOp::create(builder, loc, framedMask,
                                   added.fillOnTrue ? fill : zero,
                                   added.fillOnTrue ? zero : fill);
    }
    if (framedMask.getType() != added.framed)
      framedMask = ReshapeOp::create(builder, loc, added.framed, framedMask,
                                     ValueRange{});
    mask = mask ? AddOp::create(builder, loc, mask, framedMask).getResult()
                : framedMask;
  }
  SmallVector<int64_t> shape(tensorType(query).getShape());
  shape.back() = tensorType(value).getShape().back();
  auto type = RankedTensorType::get(shape, tensorType(query).getElementType());
  auto attention = AttentionOp::create(
      builder, loc, type, query, key, value, mask,
      builder.getF64FloatAttr(scale),
      softcap ? builder.getF64FloatAttr(*softcap) : FloatAttr(),
      /*causal=*/UnitAttr(),
      /*gqa=*/UnitAttr(), /*masked_rows_nan=*/builder.getUnitAttr(),
      /*result_order=*/DenseI64ArrayAttr());
  Value product = root->getResult(0);
  RankedTensorType productType = tensorType(product);
  if (productType == type) {
    product.replaceAllUsesWith(attention.getResult());
  } else {
    // Users reshaping back to the frame read the attention itself.
    for (Operation *user : llvm::to_vector(product.getUsers())) {
      auto reshape = dyn_cast<ReshapeOp>(user);
      if (reshape && reshape.getType() == type) {
        reshape.getResult().replaceAllUsesWith(attention.getResult());
        reshape->erase();
      }
    }
    if (!product.use_empty())
      product.replaceAllUsesWith(
          ReshapeOp::create(builder, loc, productType, attention.getResult(),
                            ValueRange{}));
  }
  root->erase();
  Block *block = attention->getBlock();
  llvm::SetVector<Operation *> unique(taken.begin(), taken.end());
  for (Operation *view : views)
    if (view->getBlock() == block)
      unique.insert(view);
  SmallVector<Operation *> dead = unique.takeVector();
  // Users before producers: erase what nothing reads any more.
  llvm::sort(dead, [](Operation *a, Operation *b) {
    return b->isBeforeInBlock(a);
  });
  for (Operation *op : dead)
    if (op->use_empty())
      op->erase();
}

/// The unrepeated heads `[B..., Hkv, S, D]` of grouped-query attention's
/// repeated key or value (HF's repeat_kv: a size-1 dim inserted after the
/// heads, expanded to the group, merged into the heads), and the group; a
/// null value when `repeated` is not that (through any reshapes).
std::pair<Value, int64_t> unrepeatedHeads(Value repeated) {
  // Reshapes compose: the merge may be several (one to rank 3 for a
  // product, one back to the frame).
  Value source = repeated;
  while (auto reshape = source.getDefiningOp<ReshapeOp>())
    source = reshape.getInput();
  auto expand = source != repeated ? source.getDefiningOp<ExpandOp>() : ExpandOp();
  auto inserted = expand ? expand.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!inserted)
    return {};
  Value heads = inserted.getInput();
  ArrayRef<int64_t> k = tensorType(heads).getShape();
  ArrayRef<int64_t> one = tensorType(inserted.getResult()).getShape();
  ArrayRef<int64_t> grouped = tensorType(expand.getResult()).getShape();
  ArrayRef<int64_t> out = tensorType(repeated).getShape();
  int64_t rank = k.size();
  if (rank < 3 || int64_t(one.size()) != rank + 1 || out.size() != k.size())
    return {};
  int64_t h = rank - 3; // the heads' dim
  int64_t group = grouped[h + 1];
  bool shapes = one.take_front(h + 1) == k.take_front(h + 1) && one[h + 1] == 1 &&
                one.drop_front(h + 2) == k.drop_front(h + 1) &&
                grouped.take_front(h + 1) == one.take_front(h + 1) &&
                grouped.drop_front(h + 2) == one.drop_front(h + 2) &&
                out.take_front(h) == k.take_front(h) &&
                out.drop_front(h + 1) == k.drop_front(h + 1);
  if (!shapes || ShapedType::isDynamic(group) || ShapedType::isDynamic(k[h]) ||
      out[h] != k[h] * group)
    return {};
  return {heads, group};
}

/// Grouped-query attention written with repeated heads reads the unrepeated
/// ones with `gqa` (head h of the query reads key/value head h / group, as
/// the repetition gives): the repeat is never materialised. The group, or 0
/// when the attention is not that.
int64_t readGroupedHeads(AttentionOp attention) {
  if (attention.getGqa())
    return 0;
  auto [key, keyGroup] = unrepeatedHeads(attention.getKey());
  auto [value, valueGroup] = unrepeatedHeads(attention.getValue());
  if (!key || !value || keyGroup != valueGroup || keyGroup < 2)
    return 0;
  Value oldKey = attention.getKey(), oldValue = attention.getValue();
  attention.getKeyMutable().assign(key);
  attention.getValueMutable().assign(value);
  attention.setGqa(true);
  for (Value old : {oldKey, oldValue}) {
    // The merge, the expand and the inserted dim, once nothing reads them.
    Operation *op = old.getDefiningOp();
    while (op && op->use_empty() && isa<ReshapeOp, ExpandOp>(op)) {
      Operation *next = op->getOperand(0).getDefiningOp();
      op->erase();
      op = next;
    }
  }
  return keyGroup;
}

struct BrazeFormAttentionPass
    : braze::impl::BrazeFormAttentionBase<BrazeFormAttentionPass> {
  using BrazeFormAttentionBase::BrazeFormAttentionBase;

  // Each product whose lhs is a softmax over the last dim is tried; one
  // that fits the whole pattern is replaced, one that does not gets a
  // remark saying why.
  void runOnOperation() override {
    SmallVector<Operation *> products;
    getOperation()->walk([&](Operation *op) {
      if (isa<BmmOp, MatmulOp>(op))
        products.push_back(op);
    });
    OpBuilder builder(&getContext());
    for (Operation *root : products) {
      AttentionMatch match(root);
      if (!match.findSoftmax())
        continue;
      if (!match.match()) {
        if (remarks)
          root->emitRemark() << "'" << root->getName()
                             << "' of a softmax not formed into "
                                "braze.attention: "
                             << match.why;
        continue;
      }
      if (remarks)
        root->emitRemark() << "'" << root->getName()
                           << "' of a softmax formed into braze.attention ("
                           << match.maskKind << ", scale "
                           << formatNumber(match.scale)
                           << (match.softcap ? ", softcap " +
                                                   formatNumber(*match.softcap)
                                             : std::string())
                           << ")";
      match.build(builder);
      ++numFormed;
    }
    getOperation()->walk([&](AttentionOp attention) {
      int64_t group = readGroupedHeads(attention);
      if (!group)
        return;
      if (remarks)
        attention->emitRemark()
            << "braze.attention reads its grouped key/value heads in place "
               "(gqa, group "
            << group << ")";
      ++numGrouped;
    });
  }
};
} // namespace
