//===- BrazeOps.td - braze operations ---------------------*- tablegen -*-===//
//
// Tensor-level compute ops: pointwise, reductions, matrix products, layout,
// constants and parameters. Every op is Pure; shapes are checked by verifiers.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_OPS
#define BRAZE_OPS

include "BrazeDialect.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// An op whose result type follows from its operands and attributes. The
// declared result may refine a dim that inference leaves dynamic (`?` to a
// static size the frontend knows), never the other way round.
class Braze_InferredOp<string mnemonic, list<Trait> traits = []>
    : Braze_Op<mnemonic, !listconcat(traits,
          [Pure, InferTypeOpAdaptorWithIsCompatible])>;

//===----------------------------------------------------------------------===//
// Pointwise
//===----------------------------------------------------------------------===//

class Braze_UnaryOp<string mnemonic, Type tensorType, string doc>
    : Braze_Op<mnemonic, [Pure, SameOperandsAndResultType, Braze_PointwiseTrait]> {
  let summary = "elementwise " # doc;
  let description = [{
    Applies the function to every element; the result has the operand's type.

    ```mlir
    %y = braze.}] # mnemonic # [{ %x : tensor<?x4xf32>
    ```
  }];
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Braze_NegOp : Braze_UnaryOp<"neg", Braze_NumericTensor, "negation"> {
  let hasFolder = 1;
}
def Braze_AbsOp : Braze_UnaryOp<"abs", Braze_NumericTensor, "absolute value">;
def Braze_ExpOp : Braze_UnaryOp<"exp", Braze_FloatTensor, "e to the power x">;
def Braze_LogOp : Braze_UnaryOp<"log", Braze_FloatTensor, "natural logarithm">;
def Braze_TanhOp : Braze_UnaryOp<"tanh", Braze_FloatTensor, "hyperbolic tangent">;
def Braze_SigmoidOp : Braze_UnaryOp<"sigmoid", Braze_FloatTensor,
                                    "logistic sigmoid 1 / (1 + exp(-x))">;
def Braze_ReluOp : Braze_UnaryOp<"relu", Braze_NumericTensor, "max(x, 0)"> {
  let hasFolder = 1;
}
def Braze_SiluOp : Braze_UnaryOp<"silu", Braze_FloatTensor, "x * sigmoid(x)">;
def Braze_SqrtOp : Braze_UnaryOp<"sqrt", Braze_FloatTensor, "square root">;
def Braze_RsqrtOp : Braze_UnaryOp<"rsqrt", Braze_FloatTensor,
                                  "reciprocal square root">;
def Braze_ErfOp : Braze_UnaryOp<"erf", Braze_FloatTensor, "error function">;
def Braze_Expm1Op : Braze_UnaryOp<"expm1", Braze_FloatTensor,
                                  "exp(x) - 1, accurate for small x">;
def Braze_Exp2Op : Braze_UnaryOp<"exp2", Braze_FloatTensor, "2 to the power x">;
def Braze_Log1pOp : Braze_UnaryOp<"log1p", Braze_FloatTensor,
                                  "log(1 + x), accurate for small x">;
def Braze_Log2Op : Braze_UnaryOp<"log2", Braze_FloatTensor, "base-2 logarithm">;
def Braze_SinOp : Braze_UnaryOp<"sin", Braze_FloatTensor, "sine">;
def Braze_CosOp : Braze_UnaryOp<"cos", Braze_FloatTensor, "cosine">;
def Braze_TanOp : Braze_UnaryOp<"tan", Braze_FloatTensor, "tangent">;
def Braze_AsinOp : Braze_UnaryOp<"asin", Braze_FloatTensor, "arcsine">;
def Braze_AcosOp : Braze_UnaryOp<"acos", Braze_FloatTensor, "arccosine">;
def Braze_AtanOp : Braze_UnaryOp<"atan", Braze_FloatTensor, "arctangent">;
def Braze_SinhOp : Braze_UnaryOp<"sinh", Braze_FloatTensor, "hyperbolic sine">;
def Braze_CoshOp : Braze_UnaryOp<"cosh", Braze_FloatTensor, "hyperbolic cosine">;
def Braze_FloorOp : Braze_UnaryOp<"floor", Braze_FloatTensor,
                                  "rounding toward -infinity">;
def Braze_CeilOp : Braze_UnaryOp<"ceil", Braze_FloatTensor,
                                 "rounding toward +infinity">;
def Braze_TruncOp : Braze_UnaryOp<"trunc", Braze_FloatTensor,
                                  "rounding toward zero">;
def Braze_RoundOp : Braze_UnaryOp<"round", Braze_FloatTensor,
                                  "rounding to nearest, half to even">;
def Braze_SignOp : Braze_UnaryOp<"sign", Braze_NumericTensor,
                                 "sign: -1, 0 or 1 (0 for NaN and -0, as PyTorch)">;
def Braze_NotOp : Braze_UnaryOp<"not", Braze_BoolTensor, "logical negation">;

def Braze_GeluOp : Braze_Op<"gelu", [Pure, SameOperandsAndResultType,
                                     Braze_PointwiseTrait]> {
  let summary = "elementwise GELU, exact (erf) or tanh-approximated";
  let description = [{
    `approximate = "none"` (the default) computes `x * 0.5 * (1 + erf(x / sqrt(2)))`;
    `approximate = "tanh"` computes
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`, as PyTorch does.

    ```mlir
    %y = braze.gelu %x approximate "tanh" : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Braze_FloatTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Braze_FloatTensor:$result);
  let assemblyFormat =
      "$input (`approximate` $approximate^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class Braze_BinaryOp<string mnemonic, Type tensorType, string doc>
    : Braze_InferredOp<mnemonic, [Braze_PointwiseTrait]> {
  let summary = "elementwise " # doc # " with broadcasting";
  let description = [{
    Both operands have the same element type; their shapes broadcast as in
    NumPy: aligned from the last dim, each pair of dims equal or one of them 1.

    ```mlir
    %z = braze.}] # mnemonic # [{ %x, %y : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
    ```
  }];
  let arguments = (ins tensorType:$lhs, tensorType:$rhs);
  let results = (outs tensorType:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Braze_AddOp : Braze_BinaryOp<"add", Braze_NumericTensor, "addition"> {
  let hasFolder = 1;
}
def Braze_SubOp : Braze_BinaryOp<"sub", Braze_NumericTensor, "subtraction"> {
  let hasFolder = 1;
}
def Braze_MulOp : Braze_BinaryOp<"mul", Braze_NumericTensor, "multiplication"> {
  let hasFolder = 1;
}
def Braze_DivOp : Braze_BinaryOp<"div", Braze_NumericTensor,
                                 "division (true division for floats, "
                                 "truncating for integers)"> {
  let hasFolder = 1;
}
def Braze_PowOp : Braze_BinaryOp<"pow", Braze_FloatTensor, "power lhs^rhs">;
def Braze_MaximumOp : Braze_BinaryOp<"maximum", Braze_NumericTensor,
                                     "maximum (NaN-propagating)">;
def Braze_MinimumOp : Braze_BinaryOp<"minimum", Braze_NumericTensor,
                                     "minimum (NaN-propagating)">;
def Braze_Atan2Op : Braze_BinaryOp<"atan2", Braze_FloatTensor,
                                   "arctangent of lhs / rhs in the quadrant of (rhs, lhs)">;
def Braze_RemainderOp : Braze_BinaryOp<"remainder", Braze_NumericTensor,
                                       "remainder with the sign of the divisor "
                                       "(Python's %, PyTorch's remainder)">;
def Braze_FmodOp : Braze_BinaryOp<"fmod", Braze_NumericTensor,
                                  "remainder with the sign of the dividend "
                                  "(C's fmod and %)">;

def Braze_AndOp : Braze_BinaryOp<"and", Braze_BoolTensor, "logical and">;
def Braze_OrOp : Braze_BinaryOp<"or", Braze_BoolTensor, "logical or">;
def Braze_XorOp : Braze_BinaryOp<"xor", Braze_BoolTensor, "logical exclusive or">;

class Braze_CompareOp<string mnemonic, string doc>
    : Braze_InferredOp<mnemonic, [Braze_PointwiseTrait]> {
  let summary = "elementwise " # doc # " comparison with broadcasting";
  let description = [{
    Compares two tensors of the same element type, broadcasting their shapes,
    into an `i1` tensor. Float comparisons are ordered except `ne`: any
    comparison with NaN is false, and `ne` with NaN is true (as in PyTorch).

    ```mlir
    %m = braze.}] # mnemonic # [{ %x, %y : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
    ```
  }];
  let arguments = (ins Braze_Tensor:$lhs, Braze_Tensor:$rhs);
  let results = (outs Braze_BoolTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Braze_EqOp : Braze_CompareOp<"eq", "equal">;
def Braze_NeOp : Braze_CompareOp<"ne", "not equal">;
def Braze_LtOp : Braze_CompareOp<"lt", "less than">;
def Braze_LeOp : Braze_CompareOp<"le", "less than or equal">;
def Braze_GtOp : Braze_CompareOp<"gt", "greater than">;
def Braze_GeOp : Braze_CompareOp<"ge", "greater than or equal">;

def Braze_WhereOp : Braze_InferredOp<"where", [Braze_PointwiseTrait]> {
  let summary = "elementwise select with broadcasting";
  let description = [{
    `condition ? true_value : false_value` per element; the three shapes
    broadcast together; the two values share their element type.

    ```mlir
    %r = braze.where %c, %a, %b : tensor<4x1xi1>, tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Braze_BoolTensor:$condition, Braze_Tensor:$true_value,
                       Braze_Tensor:$false_value);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:` type($condition)
    `,` type($true_value) `,` type($false_value) `->` type($result)
  }];
}

def Braze_CastOp : Braze_Op<"cast", [Pure, Braze_PointwiseTrait]> {
  let summary = "element type conversion";
  let description = [{
    Converts every element to the result's element type with PyTorch's rules:
    float to int truncates toward zero, anything to `i1` tests for non-zero,
    `i1` to a number gives 0 or 1. The shape does not change.

    ```mlir
    %h = braze.cast %x : tensor<?x4xf32> to tensor<?x4xf16>
    ```
  }];
  let arguments = (ins Braze_Tensor:$input);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Braze_ReductionOp<string mnemonic, Type inputType, Type resultType,
                        string doc>
    : Braze_InferredOp<mnemonic, [Braze_ReductionTrait]> {
  let summary = doc # " over a list of dims";
  let description = [{
    Reduces the dims listed in `dims` (strictly increasing, each in
    [0, rank)). Without `keepdim` the reduced dims disappear from the result;
    with it they stay, with size 1.

    ```mlir
    %r = braze.}] # mnemonic # [{ %x dims [1] keepdim : tensor<?x8x}] #
        !if(!or(!eq(mnemonic, "any"), !eq(mnemonic, "all")), "i1", "f32") #
        [{> -> tensor<?x1x}] #
        !if(!or(!eq(mnemonic, "any"), !eq(mnemonic, "all")), "i1", "f32") # [{>
    ```
  }];
  let arguments = (ins inputType:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keepdim);
  let results = (outs resultType:$result);
  let assemblyFormat = [{
    $input `dims` $dims (`keepdim` $keepdim^)? attr-dict `:` type($input) `->`
    type($result)
  }];
}

def Braze_SumOp : Braze_ReductionOp<"sum", Braze_NumericTensor,
                                    Braze_NumericTensor, "sum">;
def Braze_MeanOp : Braze_ReductionOp<"mean", Braze_FloatTensor,
                                     Braze_FloatTensor, "arithmetic mean">;
def Braze_MaxOp : Braze_ReductionOp<"max", Braze_NumericTensor,
                                    Braze_NumericTensor, "maximum">;
def Braze_MinOp : Braze_ReductionOp<"min", Braze_NumericTensor,
                                    Braze_NumericTensor, "minimum">;
def Braze_AnyOp : Braze_ReductionOp<"any", Braze_BoolTensor, Braze_BoolTensor,
                                    "logical or">;
def Braze_AllOp : Braze_ReductionOp<"all", Braze_BoolTensor, Braze_BoolTensor,
                                    "logical and">;
def Braze_ArgmaxOp : Braze_ReductionOp<"argmax", Braze_NumericTensor,
                                       Braze_IndexTensor,
                                       "index of the first maximum"> {
  let description = [{
    The `i64` index of the first maximal element within the reduced dims,
    counted in row-major order over those dims (a single dim gives PyTorch's
    `argmax(dim)`). `keepdim` as for the other reductions.

    ```mlir
    %i = braze.argmax %x dims [1] : tensor<?x8xf32> -> tensor<?xi64>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

def Braze_MatmulOp : Braze_InferredOp<"matmul"> {
  let summary = "matrix product [M, K] x [K, N] -> [M, N]";
  let description = [{
    ```mlir
    %c = braze.matmul %a, %b : tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
    ```
  }];
  let arguments = (ins Braze_NumericTensor:$lhs, Braze_NumericTensor:$rhs);
  let results = (outs Braze_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Braze_BmmOp : Braze_InferredOp<"bmm"> {
  let summary = "batched matrix product [B..., M, K] x [B..., K, N] -> [B..., M, N]";
  let description = [{
    One or more batch dims, the same in both operands (captured products
    have one; braze-fold-layouts keeps dims apart that no stride merges).

    ```mlir
    %c = braze.bmm %a, %b : tensor<8x?x64xf32>, tensor<8x64x?xf32> -> tensor<8x?x?xf32>
    ```
  }];
  let arguments = (ins Braze_NumericTensor:$lhs, Braze_NumericTensor:$rhs);
  let results = (outs Braze_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Braze_AddmmOp : Braze_InferredOp<"addmm"> {
  let summary = "beta * bias + alpha * (lhs x rhs)";
  let description = [{
    `lhs` is [M, K], `rhs` is [K, N]; `bias` broadcasts to [M, N]
    (typically [N], a Linear layer's bias). `alpha` and `beta` default to 1.

    ```mlir
    %y = braze.addmm %bias, %x, %w : tensor<32xf32>, tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
    ```
  }];
  let arguments = (ins Braze_NumericTensor:$bias, Braze_NumericTensor:$lhs,
                       Braze_NumericTensor:$rhs,
                       DefaultValuedAttr<F64Attr, "1.0">:$beta,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
  let results = (outs Braze_NumericTensor:$result);
  let assemblyFormat = [{
    $bias `,` $lhs `,` $rhs attr-dict `:` type($bias) `,` type($lhs) `,`
    type($rhs) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

def Braze_ReshapeOp : Braze_Op<"reshape", [Pure]> {
  let summary = "the same elements in row-major order under a new shape";
  let description = [{
    Also serves PyTorch's `view`. A result with one dynamic dim takes its size
    from the element count; a result with more dynamic dims lists an `index`
    size for each of them, in order.

    ```mlir
    %y = braze.reshape %x : tensor<?x8xf32> -> tensor<?x2x4xf32>
    %z = braze.reshape %x sizes [%b, %s] : tensor<?x8xf32> -> tensor<?x?x8xf32>
    ```
  }];
  let arguments = (ins Braze_Tensor:$input, Variadic<Index>:$sizes);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = [{
    $input (`sizes` ` ` `[` $sizes^ `]`)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Braze_PermuteOp : Braze_InferredOp<"permute"> {
  let summary = "dim permutation (transpose)";
  let description = [{
    Result dim `i` is input dim `permutation[i]`.

    ```mlir
    %t = braze.permute %x [1, 0] : tensor<?x8xf32> -> tensor<8x?xf32>
    ```
  }];
  let arguments = (ins Braze_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def Braze_ExpandOp : Braze_Op<"expand", [Pure]> {
  let summary = "broadcast to a larger shape";
  let description = [{
    NumPy's `broadcast_to`: input dims align with the last result dims, and
    each is 1 or equal to its result dim. A dynamic result dim over a dynamic
    input dim keeps that size; the other dynamic result dims each take an
    `index` size, in order.

    ```mlir
    %y = braze.expand %x : tensor<1x8xf32> -> tensor<4x8xf32>
    %z = braze.expand %x sizes [%n] : tensor<1x8xf32> -> tensor<?x8xf32>
    ```
  }];
  let arguments = (ins Braze_Tensor:$input, Variadic<Index>:$sizes);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = [{
    $input (`sizes` ` ` `[` $sizes^ `]`)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Braze_SliceOp : Braze_InferredOp<"slice"> {
  let summary = "strided slice along one dim";
  let description = [{
    Keeps indices `start, start + step, ...` below `end` of dim `dim`. Each
    bound is a constant or an `index` operand (a symbolic bound: `x[:s]`,
    `x[:, n - s:]`), written `[start : end : step]`.

    Constant bounds need `0 <= start <= end` and `step >= 1`; a constant
    `end` past the dim's size stops at the size, as in Python. Operand
    bounds are checked when the op runs: a symbolic start must lie in
    `[0, end]` (`end` after that stop), a symbolic end in `[start, size]`,
    a symbolic step must be at least 1; a violation is a run-time error,
    never a clamp or an out-of-range read. A slice with an operand bound has
    a dynamic result dim unless the producer knows it.

    ```mlir
    %y = braze.slice %x dim 1 [0 : 8 : 2] : tensor<?x16xf32> -> tensor<?x4xf32>
    %c = braze.slice %cache dim 0 [0 : %s : 1] : tensor<64x8xf32> -> tensor<?x8xf32>
    %t = braze.slice %x dim 1 [%first : 9223372036854775807 : 1] : tensor<2x?xf32> -> tensor<2x?xf32>
    ```
  }];
  let arguments = (ins Braze_Tensor:$input, I64Attr:$dim,
                       Variadic<Index>:$dynamic_bounds,
                       DenseI64ArrayAttr:$static_bounds);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = [{
    $input `dim` $dim custom<SliceBounds>($dynamic_bounds, $static_bounds)
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// Bound `which` (0 start, 1 end, 2 step) when it is a constant.
    std::optional<int64_t> getStaticBound(unsigned which) {
      int64_t bound = getStaticBounds()[which];
      if (mlir::ShapedType::isDynamic(bound))
        return std::nullopt;
      return bound;
    }
  }];
}

def Braze_ConcatOp : Braze_InferredOp<"concat"> {
  let summary = "concatenation along one dim";
  let description = [{
    All inputs have the same rank and element type and agree on every dim but
    `dim`.

    ```mlir
    %y = braze.concat %a, %b dim 1 : tensor<4x2xf32>, tensor<4x?xf32> -> tensor<4x?xf32>
    ```
  }];
  let arguments = (ins Variadic<Braze_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = [{
    $inputs `dim` $dim attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasFolder = 1;
}

def Braze_TakeOp : Braze_InferredOp<"take"> {
  let summary = "select slices along one dim by an index tensor";
  let description = [{
    NumPy's `take(table, indices, axis=dim)`: the result's shape is
    `table.shape[:dim] + indices.shape + table.shape[dim+1:]`, and each index
    picks a slice of `table` along `dim`. Serves embedding lookups and
    `index_select`. An index outside `[0, table.shape[dim])` is an error at
    run time.

    ```mlir
    %e = braze.take %table, %ids dim 0 : tensor<100x32xf32>, tensor<?x?xi64> -> tensor<?x?x32xf32>
    ```
  }];
  let arguments = (ins Braze_Tensor:$table,
                       RankedTensorOf<[I32, I64]>:$indices, I64Attr:$dim);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = [{
    $table `,` $indices `dim` $dim attr-dict `:` type($table) `,` type($indices)
    `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Constants and parameters
//===----------------------------------------------------------------------===//

def Braze_ConstantOp : Braze_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a tensor literal";
  let description = [{
    ```mlir
    %c = braze.constant dense<1.0> : tensor<4xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Braze_IotaOp : Braze_Op<"iota", [Pure, AttrSizedOperandSegments]> {
  let summary = "the sequence start, start + step, ... as a 1-D tensor";
  let description = [{
    Element `i` is `start + i * step`, computed in f64 and converted to the
    result's element type (PyTorch's `arange`). `start` and `step` are
    constants or `index` operands (a symbolic `arange(s, 2 * s)`); a dynamic
    length comes from the `sizes` operand.

    ```mlir
    %r = braze.iota start 0.0 step 1.0 : tensor<8xi64>
    %s = braze.iota start 0.0 step 0.5 sizes [%n] : tensor<?xf32>
    %t = braze.iota start %first step %stride sizes [%n] : tensor<?xi64>
    ```
  }];
  let arguments = (ins Optional<Index>:$size,
                       Optional<Index>:$dynamic_start,
                       Optional<Index>:$dynamic_step,
                       DefaultValuedAttr<F64Attr, "0.0">:$start,
                       DefaultValuedAttr<F64Attr, "1.0">:$step);
  let results = (outs RankedTensorOf<[Braze_NumericElement]>:$result);
  let assemblyFormat = [{
    `start` custom<IotaTerm>($dynamic_start, $start)
    `step` custom<IotaTerm>($dynamic_step, $step)
    (`sizes` ` ` `[` $size^ `]`)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Braze_ParameterOp : Braze_Op<"parameter", [Pure]> {
  let summary = "a named weight supplied by the runtime";
  let description = [{
    Reads the model parameter or buffer `name` (its PyTorch state-dict key).
    Weights stay out of the IR so a module prints small and several programs
    can share one copy at run time.

    ```mlir
    %w = braze.parameter "fc1.weight" : tensor<4096x1024xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Braze_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion groups
//===----------------------------------------------------------------------===//

def Braze_GroupOp : Braze_Op<"group", [IsolatedFromAbove,
    RecursiveMemoryEffects, SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "ops fused into one kernel";
  let description = [{
    The ops of the body run as one kernel: they share an iteration domain
    (pointwise ops and the reductions that feed them), so intermediate values
    stay in registers instead of going through memory. `braze-fuse-pointwise`
    forms groups; a code generator turns each group into one kernel. The body
    sees only its block arguments (the group's inputs, in order) and yields
    the group's results.

    ```mlir
    %y = braze.group ins(%x) : (tensor<?x64xf32>) -> tensor<?x64xf32> {
    ^bb0(%a: tensor<?x64xf32>):
      %m = braze.max %a dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
      %d = braze.sub %a, %m : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
      braze.yield %d : tensor<?x64xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `ins` `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
}

def Braze_YieldOp : Braze_Op<"yield", [Pure, Terminator,
    ParentOneOf<["GroupOp", "SwitchOp", "WhileOp"]>]> {
  let summary = "the results of a fusion group or of a control-flow region";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* nothing */ }]>];
}


//===----------------------------------------------------------------------===//
// The kernel form: what every code generator prints
//===----------------------------------------------------------------------===//

// Pure: a kernel writes only its own results (value semantics on tensors).
def Braze_KernelOp : Braze_Op<"kernel", [IsolatedFromAbove, Pure,
    SingleBlock, NoTerminator,
    AttrSizedOperandSegments]> {
  let summary = "one kernel: an iteration domain and a scalar body";
  let description = [{
    The body computes one point of the iteration domain `domain` (one extent
    per dim, `?` extents given by `index` operands). The dims listed in
    `reduce` are reduction dims, the others parallel. The block arguments are
    the point's indices (one per dim), the domain's extents (one per dim) and
    the kernel's input tensors, in that order.

    Inputs are read with upstream `tensor.extract` at indices computed from
    the point (for broadcasting, a dim of size 1 reads index 0). The body is
    scalar `arith`/`math` plus `braze.reduce`, whose result is the reduction
    of its operand over all reduction dims: values that do not depend on a
    reduction index are per-parallel-point values. `braze.store` writes a
    result element; every element of every result is stored exactly once:
    a store whose index in a parallel dim is the constant 0 happens at the
    points where that dim's index is 0.

    Nothing in the form is target-specific: the C++ emitter loops over the
    parallel points and recomputes the body's pointwise values in one loop
    over the reduction dims per reduction; a GPU emitter keeps a row in
    registers.

    ```mlir
    %y = braze.kernel ins(%x : tensor<?x64xf32>) domain [%n, 64] reduce [1]
        : tensor<?x64xf32> {
    ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x64xf32>):
      %v = tensor.extract %a[%i, %j] : tensor<?x64xf32>
      %m = braze.reduce "max" %v : f32 -> f32
      %d = arith.subf %v, %m : f32
      braze.store %d, 0 [%i, %j] : f32
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                       Variadic<Index>:$dynamic_domain,
                       DenseI64ArrayAttr:$static_domain,
                       DenseI64ArrayAttr:$reduce);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)`
    `domain` custom<DynamicIndexList>($dynamic_domain, $static_domain)
    `reduce` $reduce attr-dict-with-keyword `:` type($results) $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of dims of the iteration domain.
    unsigned getRank() { return getStaticDomain().size(); }
    /// Block argument: the index of the point in dim `dim`.
    mlir::BlockArgument getIndex(unsigned dim) {
      return getBody().front().getArgument(dim);
    }
    /// Block argument: the extent of dim `dim`.
    mlir::BlockArgument getExtent(unsigned dim) {
      return getBody().front().getArgument(getRank() + dim);
    }
    /// Block argument: input tensor `number`.
    mlir::BlockArgument getInputArgument(unsigned number) {
      return getBody().front().getArgument(2 * getRank() + number);
    }
  }];
}

def Braze_ReduceOp : Braze_Op<"reduce", [Pure, HasParent<"KernelOp">]> {
  let summary = "reduction of a scalar over the kernel's reduction dims";
  let description = [{
    `kind` is one of `add`, `max`, `min` (NaN-propagating for floats), `and`,
    `or` (on `i1`) and `argmax` (the `i64` row-major index, over the
    reduction dims, of the first maximum; NaN counts as the maximum). The
    result depends on the parallel indices only.

    ```mlir
    %s = braze.reduce "add" %e : f32 -> f32
    ```
  }];
  let arguments = (ins AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$value,
                       StrAttr:$kind);
  let results = (outs AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$result);
  let assemblyFormat =
      "$kind $value attr-dict `:` type($value) `->` type($result)";
  let hasVerifier = 1;
}

def Braze_StoreOp : Braze_Op<"store", [HasParent<"KernelOp">]> {
  let summary = "writes one element of a kernel result";
  let description = [{
    Writes `value` into result number `result` of the enclosing kernel at
    `indices` (one per dim of that result).

    ```mlir
    braze.store %v, 0 [%i, %j] : f32
    ```
  }];
  let arguments = (ins AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$value,
                       I64Attr:$result, Variadic<Index>:$indices);
  let assemblyFormat =
      "$value `,` $result ` ` `[` $indices `]` attr-dict `:` type($value)";
  let hasVerifier = 1;
}

include "BrazeHostOps.td"
include "BrazeControlFlowOps.td"
include "BrazeCollectiveOps.td"
include "BrazeComboOps.td"
include "BrazeFusedGemm.td"
include "BrazeScaledMm.td"
include "BrazeFlashAttention.td"

#endif // BRAZE_OPS
