//===- BrazeDialect.td - the braze dialect ----------------*- tablegen -*-===//
//
// The dialect, its base op class and the type constraints every op shares.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_DIALECT
#define BRAZE_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"

def Braze_Dialect : Dialect {
  let name = "braze";
  let summary = "Tensor-level operations of PyTorch models for the braze compiler";
  let description = [{
    The `braze` dialect holds PyTorch programs after capture: pointwise math,
    reductions, matrix products, layout changes, constants and named parameters,
    all on builtin ranked `tensor` types whose dims may be dynamic (`?`).
    Broadcasting follows NumPy/PyTorch rules and is checked by the verifiers;
    element types never change implicitly (`braze.cast` converts them).
  }];
  let cppNamespace = "::braze";
  let hasConstantMaterializer = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Adds the dialect's types (defined beside the ops that use them).
    void registerTypes();
  }];
}

class Braze_Op<string mnemonic, list<Trait> traits = []>
    : Op<Braze_Dialect, mnemonic, traits>;

// Marks ops that compute each result element from the operand elements at
// the same (broadcast) position; fusion passes group them.
def Braze_PointwiseTrait : NativeOpTrait<"PointwiseTrait"> {
  let cppNamespace = "::braze";
}
// Marks reductions: `input`, `dims` and `keepdim` as in BrazeOps.td.
def Braze_ReductionTrait : NativeOpTrait<"ReductionTrait"> {
  let cppNamespace = "::braze";
}

// Element types a braze tensor may hold.
def Braze_FloatElement : AnyTypeOf<[F16, BF16, F32, F64]>;
def Braze_IntElement : AnyTypeOf<[I8, I16, I32, I64]>;
def Braze_NumericElement : AnyTypeOf<[Braze_FloatElement, Braze_IntElement]>;
// 8-bit floats: the operands of braze.scaled_mm, which layout ops and casts
// carry (no arithmetic op takes them).
def Braze_Float8Element : AnyTypeOf<[F8E4M3FN, F8E5M2]>;
def Braze_AnyElement : AnyTypeOf<[Braze_NumericElement, I1, Braze_Float8Element]>;

def Braze_FloatTensor : RankedTensorOf<[Braze_FloatElement]>;
def Braze_NumericTensor : RankedTensorOf<[Braze_NumericElement]>;
def Braze_Tensor : RankedTensorOf<[Braze_AnyElement]>;
def Braze_BoolTensor : RankedTensorOf<[I1]>;
def Braze_Float8Tensor : RankedTensorOf<[Braze_Float8Element]>;
def Braze_IndexTensor : RankedTensorOf<[I64]>;

#endif // BRAZE_DIALECT
