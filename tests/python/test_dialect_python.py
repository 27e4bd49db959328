"""The generated op classes: building ops with inferred types from Python."""

import pytest
from mlir import ir

import braze  # noqa: F401
from braze.dialects import braze as bz


@pytest.fixture
def builder():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            yield module


def tensor(shape, element=None):
    return ir.RankedTensorType.get(shape, element or ir.F32Type.get())


def param(shape, name, element=None):
    return bz.ParameterOp(tensor(shape, element), name).result


def test_binary_ops_infer_broadcast_shapes(builder):
    a = param([ir.ShapedType.get_dynamic_size(), 1, 4], "a")
    b = param([3, 1], "b")
    assert str(bz.AddOp(a, b).result.type) == "tensor<?x3x4xf32>"


def test_reductions_and_matmul_infer(builder):
    x = param([8, 16, 32], "x")
    assert str(bz.SumOp(x, [0, 2], keepdim=True).result.type) == "tensor<1x16x1xf32>"
    assert str(bz.ArgmaxOp(x, [1]).result.type) == "tensor<8x32xi64>"
    w = param([32, 5], "w")
    m = param([16, 32], "m")
    assert str(bz.MatmulOp(m, w).result.type) == "tensor<16x5xf32>"
    assert str(bz.PermuteOp(x, [2, 0, 1]).result.type) == "tensor<32x8x16xf32>"
    assert str(bz.SliceOp(x, 2, [], [1, 32, 3]).result.type) == "tensor<8x16x11xf32>"
    assert str(bz.ConcatOp([x, x], 1).result.type) == "tensor<8x32x32xf32>"


def test_built_ops_verify_and_print(builder):
    a = param([4], "a")
    bz.GeluOp(a, approximate="tanh")
    assert builder.operation.verify()
    assert 'braze.gelu %0 approximate "tanh" : tensor<4xf32>' in str(builder)


def test_shape_error_raises_instead_of_building(builder):
    a, b = param([3], "a"), param([4], "b")
    with pytest.raises(ir.MLIRError, match="operand #1 dim 0 has size 4, which does not broadcast"):
        bz.AddOp(a, b)


def test_non_tensor_operand_raises_instead_of_crashing(builder):
    scalar = ir.Operation.create(
        "arith.constant",
        results=[ir.F32Type.get()],
        attributes={"value": ir.FloatAttr.get(ir.F32Type.get(), 1.0)},
    ).result
    with pytest.raises(ir.MLIRError, match="operand #0 must be a ranked tensor, got f32"):
        bz.AddOp(scalar, param([4], "b"))
    with pytest.raises(ir.MLIRError, match="must be a ranked tensor"):
        bz.SumOp(scalar, [0])
    with pytest.raises(ir.MLIRError, match="must be a ranked tensor"):
        bz.MatmulOp(scalar, scalar)


def test_ops_reach_python_as_their_classes():
    module = braze.parse("func.func @f(%a: tensor<4xf32>) {\n  %0 = braze.exp %a : tensor<4xf32>\n  return\n}")
    func = module.mlir_module.body.operations[0]
    assert isinstance(func.regions[0].blocks[0].operations[0], bz.ExpOp)
