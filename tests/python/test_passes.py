"""run_pipeline and the Python pass registry."""

import pytest
from ir_samples import NEGATIONS, SWISH

import braze
from braze.dialects import braze as bz
from braze.passes import erase_op, replace_op


def body_ops(module_op):
    """The ops of the first function of a module operation."""
    func = module_op.regions[0].blocks[0].operations[0]
    return list(func.regions[0].blocks[0].operations)


def op_names(module_op):
    return [op.operation.name for op in body_ops(module_op)]


def test_cpp_pass_runs_and_returns_the_module():
    module = braze.parse(NEGATIONS)
    assert braze.run_pipeline(module, "braze-simplify") is module
    assert op_names(module.operation) == ["braze.sub", "func.return"]


def test_anchored_and_nested_pipelines():
    module = braze.parse(NEGATIONS)
    braze.run_pipeline(module, "builtin.module(func.func(braze-simplify{max-iterations=3}),cse)")
    assert op_names(module.operation) == ["braze.sub", "func.return"]


def test_python_and_cpp_passes_interleave(clean_registry):
    seen = []

    @braze.register_pass("record-ops")
    def record(op):
        seen.append(op_names(op))

    braze.run_pipeline(braze.parse(NEGATIONS), "record-ops,braze-simplify,record-ops")
    assert seen == [["braze.neg", "braze.add", "func.return"], ["braze.sub", "func.return"]]


def test_python_pass_options_arrive_as_strings(clean_registry):
    got = {}

    @braze.register_pass("takes-options")
    def takes(op, factor="1", mode="slow"):
        got.update(factor=factor, mode=mode)

    braze.run_pipeline(braze.parse(SWISH), "takes-options{factor=4 mode=fast}")
    assert got == {"factor": "4", "mode": "fast"}


def test_unknown_option_lists_the_known_ones(clean_registry):
    @braze.register_pass("takes-one")
    def takes(op, factor="1"):
        pass

    with pytest.raises(braze.BrazeError, match=r"pass 'takes-one' has no option\(s\) speed \(options: factor\)"):
        braze.run_pipeline(braze.parse(SWISH), "takes-one{speed=2}")


def test_malformed_option(clean_registry):
    @braze.register_pass("takes-any")
    def takes(op, **options):
        pass

    with pytest.raises(braze.BrazeError, match="is not of the form key=value"):
        braze.run_pipeline(braze.parse(SWISH), "takes-any{loud}")


def test_unknown_pass_is_reported_before_anything_runs(clean_registry):
    ran = []
    braze.register_pass("marks")(lambda op: ran.append(True))
    module = braze.parse(NEGATIONS)
    before = str(module)
    with pytest.raises(braze.BrazeError, match="'no-such-pass' does not refer to a registered pass"):
        braze.run_pipeline(module, "marks,braze-simplify,no-such-pass")
    assert not ran and str(module) == before


@pytest.mark.parametrize(
    "pipeline, message",
    [
        ("braze-simplify,", "empty element"),
        ("func.func(braze-simplify", "unclosed '\\('"),
        ("braze-simplify)", "unbalanced '\\)'"),
        ("func.func(braze-simplify}", "unbalanced '}'"),
    ],
)
def test_malformed_pipelines(pipeline, message):
    with pytest.raises(braze.BrazeError, match=message):
        braze.run_pipeline(braze.parse(SWISH), pipeline)


def test_python_pass_cannot_be_nested(clean_registry):
    braze.register_pass("whole-module")(lambda op: None)
    with pytest.raises(braze.BrazeError, match="Python pass 'whole-module' runs on the whole module and cannot be nested in 'func.func\\(whole-module\\)'"):
        braze.run_pipeline(braze.parse(SWISH), "func.func(whole-module)")


def test_exception_in_python_pass_names_the_pass(clean_registry):
    @braze.register_pass("explodes")
    def explodes(op):
        raise KeyError("boom")

    with pytest.raises(braze.BrazeError, match="Python pass 'explodes' raised KeyError: 'boom'") as info:
        braze.run_pipeline(braze.parse(SWISH), "explodes")
    assert isinstance(info.value.__cause__, KeyError)


def test_python_pass_that_breaks_ir_is_caught_by_the_verifier(clean_registry):
    @braze.register_pass("returns-wrong-type")
    def breaks(op):
        neg, _, ret = body_ops(op)
        ret.operation.operands[0] = neg.result  # tensor<4xf32>; the function returns ?x4

    module = braze.parse(NEGATIONS, source_name="neg.mlir")
    with pytest.raises(braze.BrazeError, match="Python pass 'returns-wrong-type' produced invalid IR") as info:
        braze.run_pipeline(module, "returns-wrong-type")
    first = info.value.diagnostics[0]
    assert first.location == "neg.mlir:5:3"
    assert "doesn't match function result type" in first.message


def test_cpp_pass_failure_is_a_braze_error():
    module = braze.parse(SWISH)
    with pytest.raises(braze.BrazeError, match="invalid pass pipeline"):
        braze.run_pipeline(module, "braze-simplify{max-iterations=lots}")


def test_register_pass_validates_names():
    with pytest.raises(braze.BrazeError, match="invalid pass name"):
        braze.register_pass("has space")
    with pytest.raises(braze.BrazeError, match="a C\\+\\+ pass has that name"):
        braze.register_pass("braze-simplify")
    with pytest.raises(braze.BrazeError, match="a C\\+\\+ pass has that name"):
        braze.register_pass("canonicalize")


def test_registering_again_replaces(clean_registry):
    calls = []
    braze.register_pass("twice")(lambda op: calls.append(1))
    braze.register_pass("twice")(lambda op: calls.append(2))
    braze.run_pipeline(braze.parse(SWISH), "twice")
    assert calls == [2]


def test_run_pipeline_checks_its_arguments():
    with pytest.raises(TypeError, match="expects a braze.Module"):
        braze.run_pipeline(str(braze.parse(SWISH)), "cse")
    with pytest.raises(TypeError, match="pipeline must be a str"):
        braze.run_pipeline(braze.parse(SWISH), ["cse"])


def test_erase_op_refuses_an_op_in_use():
    module = braze.parse(SWISH)
    sigmoid, mul, _ = body_ops(module.operation)
    with pytest.raises(braze.BrazeError, match="cannot erase 'braze.sigmoid' at <string>:3:8: its results are still used by 'braze.mul' at <string>:4:8"):
        erase_op(sigmoid)
    assert "braze.sigmoid" in str(module)


def test_replace_op_then_erase(clean_registry):
    @braze.register_pass("drop-gate")
    def drop_gate(op):
        sigmoid, mul, _ = body_ops(op)
        replace_op(mul, [mul.lhs])
        erase_op(sigmoid)

    module = braze.run_pipeline(braze.parse(SWISH), "drop-gate")
    assert op_names(module.operation) == ["func.return"]


def test_replace_op_checks_types_and_counts():
    module = braze.parse(NEGATIONS)
    neg, add, _ = body_ops(module.operation)
    with pytest.raises(braze.BrazeError, match="result of type tensor<\\?x4xf32> would be replaced by a value of type tensor<4xf32>"):
        replace_op(add, [neg.result])
    with pytest.raises(braze.BrazeError, match="has 1 result\\(s\\) but 2 replacement value\\(s\\)"):
        replace_op(add, [neg.result, neg.result])
    assert isinstance(add, bz.AddOp)
