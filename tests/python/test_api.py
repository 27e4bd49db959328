"""braze.parse, braze.Module and BrazeError."""

import pytest
from ir_samples import NEGATIONS, SWISH
from mlir import ir

import braze


def test_public_names():
    assert set(braze.__all__) == {"BrazeError", "ExportedProgram", "Module", "ShapeVar", "compile", "compile_mlir",
                                  "dynamic_spec", "export", "parse", "profile", "register_communicator",
                                  "register_pass", "run_pipeline", "set_logs", "switch", "targets",
                                  "unregister_communicator"}
    for name in braze.__all__:
        assert getattr(braze, name) is not None


def test_parse_wraps_top_level_ops_in_a_module():
    module = braze.parse(SWISH)
    assert isinstance(module, braze.Module)
    assert module.operation.name == "builtin.module"
    text = str(module)
    assert text.startswith("module {")
    assert "braze.sigmoid %arg0 : tensor<?x64xf32>" in text


def test_printed_module_parses_back_to_the_same_text():
    first = str(braze.parse(SWISH))
    assert str(braze.parse(first)) == first


def test_explicit_module_is_kept():
    module = braze.parse("module attributes {braze.test} {\n" + NEGATIONS + "}")
    assert "braze.test" in str(module)


def test_locations_name_the_source():
    module = braze.parse(SWISH, source_name="swish.mlir")
    func = module.mlir_module.body.operations[0]
    assert str(func.location) == 'loc("swish.mlir":2:1)'


def test_invalid_ir_raises_with_location_and_message():
    bad = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<7x2xf32>) -> tensor<4x2xf32> {
  %0 = braze.matmul %a, %b : tensor<4x8xf32>, tensor<7x2xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}"""
    with pytest.raises(braze.BrazeError) as info:
        braze.parse(bad, source_name="mm.mlir")
    message = str(info.value)
    assert "cannot parse mm.mlir" in message
    assert "mm.mlir:3:8: error: 'braze.matmul' op contraction dim mismatch" in message
    first = info.value.diagnostics[0]
    assert (first.severity, first.location) == ("error", "mm.mlir:3:8")


def test_syntax_error_raises():
    with pytest.raises(braze.BrazeError, match=r"<string>:1:13: error: expected non-function type"):
        braze.parse("func.func @f(")


def test_braze_error_is_an_mlir_error():
    with pytest.raises(ir.MLIRError):
        braze.parse("%0 = braze.nope")


def test_unknown_op_is_reported():
    with pytest.raises(braze.BrazeError, match="braze.nope"):
        braze.parse('func.func @f() {\n  "braze.nope"() : () -> ()\n  return\n}')


def test_parse_rejects_non_text():
    with pytest.raises(TypeError, match="expects the IR as str"):
        braze.parse(b"module {}")


def test_each_module_has_its_own_context():
    a, b = braze.parse(SWISH), braze.parse(SWISH)
    assert a.context is not b.context


def test_verify_reports_ir_broken_after_parsing():
    module = braze.parse(NEGATIONS)
    module.verify()
    block = module.mlir_module.body.operations[0].regions[0].blocks[0]
    neg, _, ret = block.operations
    ret.operation.operands[0] = neg.result  # tensor<4xf32> where the function returns ?x4
    with pytest.raises(braze.BrazeError, match="the module is invalid"):
        module.verify()


def test_errors_from_parallel_verification_do_not_deadlock():
    """Verification of many functions runs on MLIR's worker threads; their
    diagnostics must not need the GIL the parsing thread holds."""
    import subprocess
    import sys

    bad = "\n".join(
        f"func.func @f{i}(%a: tensor<4xf32>, %b: tensor<5xf32>) {{\n"
        f"  %0 = braze.add %a, %b : tensor<4xf32>, tensor<5xf32> -> tensor<5xf32>\n"
        f"  func.func @nested{i}() {{\n    return\n  }}\n  return\n}}"
        for i in range(16)
    )
    script = (
        "import braze, sys\n"
        "try:\n    braze.parse(sys.stdin.read())\nexcept braze.BrazeError as e:\n"
        "    print(len(e.diagnostics))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], input=bad, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) >= 16
