"""BRAZE_LOGS / braze.set_logs and the compile option dump_dir (docs/observability.md)."""

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ir_samples import SOFTMAX

import braze
from braze import logs
from braze.errors import BrazeError


@pytest.fixture(autouse=True)
def quiet_afterwards():
    yield
    braze.set_logs(None)


def records(caplog, topic):
    return [r.getMessage() for r in caplog.records if r.name == f"braze.{topic}"]


def test_topics_parse_with_debug_marks():
    assert logs.parse("passes, +fusion,") == {"passes": logging.INFO, "fusion": logging.DEBUG}
    assert logs.parse("") == {}


def test_unknown_topic_names_the_valid_ones():
    with pytest.raises(BrazeError, match=r"unknown log topic\(s\) 'pases'; valid topics: passes, fusion, "
                                         r"codegen, runtime, comm"):
        braze.set_logs("pases,codegen")
    with pytest.raises(BrazeError, match="log topics must be a str"):
        braze.set_logs(3)


def test_bad_environment_value_is_one_warning(monkeypatch):
    monkeypatch.setenv("BRAZE_LOGS", "passes,+nope")
    with pytest.warns(UserWarning, match=r"BRAZE_LOGS ignored: unknown log topic\(s\) '\+nope'") as caught:
        logs._from_environment()
    assert len(caught) == 1
    assert not logs.enabled("passes")  # nothing applied from a bad value


def test_environment_variable_logs_to_stderr_in_a_fresh_process():
    # No handler configured: braze adds one that writes "[braze.topic] message".
    code = ("import logging, braze; from braze import logs; "
            "print(logs.enabled('passes'), logs.enabled('fusion', logging.DEBUG), logs.enabled('codegen')); "
            f"braze.compile_mlir({SOFTMAX!r})")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "BRAZE_LOGS": "passes,+fusion"}, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True", "False"]
    lines = run.stderr.splitlines()
    assert re.fullmatch(r"\[braze\.passes\] braze-simplify: \d+\.\d\d ms, 9 -> 9 ops", lines[0]), lines
    assert "[braze.fusion] <string>:4:8: 'braze.sub' fused with its producer 'braze.max'" in lines
    assert not any(line.startswith("[braze.codegen]") for line in lines)


def test_listeners_ask_every_pass_with_a_remarks_option():
    """What run_pipeline runs when a report or the fusion topic listens:
    remarks=true on each pass that declares the option and does not set it
    (MLIR prints a parsed pass with all its options); the rest as written."""
    from braze.passes.pipeline import explaining

    context = braze.parse(SOFTMAX).context
    assert explaining("braze-simplify,func.func(braze-fuse-pointwise{recompute-limit=2},braze-lower-kernels),cse,"
                      "func.func(braze-combo-kernels{remarks=false}),braze-plan-memory,braze-tune-convolutions",
                      context) == (
        "braze-simplify,func.func(braze-fuse-pointwise{recompute-limit=2 remarks=true},braze-lower-kernels),cse,"
        "func.func(braze-combo-kernels{remarks=false}),braze-plan-memory{remarks=true},braze-tune-convolutions")
    # A typo is left as written, for the pipeline check to name.
    assert explaining("func.func(braze-fuse-pointwse)", context) == "func.func(braze-fuse-pointwse)"
    with pytest.raises(BrazeError, match="braze-fuse-pointwse"):
        braze.set_logs("fusion")
        braze.run_pipeline(braze.parse(SOFTMAX), "func.func(braze-fuse-pointwse)")


def test_set_logs_levels_and_silences_the_rest():
    braze.set_logs("passes,+runtime")
    assert logs.enabled("passes") and not logs.enabled("passes", logging.DEBUG)
    assert logs.enabled("runtime", logging.DEBUG)
    assert not logs.enabled("fusion") and not logs.enabled("codegen")
    braze.set_logs("")
    assert not logs.enabled("passes")


def test_passes_fusion_and_codegen_topics(caplog, tmp_path):
    braze.set_logs("passes,fusion,codegen")
    with caplog.at_level(logging.INFO, logger="braze"):
        cold = braze.compile_mlir(SOFTMAX, options={"cache_dir": str(tmp_path)})
        warm = braze.compile_mlir(SOFTMAX, options={"cache_dir": str(tmp_path)})
    # One record per pass per compile, each with its time and op counts,
    # one pass's count after being the next one's before. Whether half
    # attentions are lowered follows the CPU (AMX: no).
    halves = "halves=true " if braze.target.get("cpu").options().flash_attention_halves else ""
    parsed = [re.fullmatch(r"(.+): \d+\.\d\d ms, (\d+) -> (\d+) ops", p).groups()
              for p in records(caplog, "passes")]
    assert [name for name, _, _ in parsed] == 2 * [
        "braze-simplify", "func.func(braze-verify-collective-order)",
        "func.func(braze-convolution-gemms{max-work=8388608 remarks=true})", "func.func(braze-form-attention{remarks=true})",
        "func.func(braze-order-attention{remarks=true})", f"func.func(braze-lower-attention{{{halves}group-heads=true remarks=true}})", "func.func(braze-epilogue-fusion{decode-rows=4 half-products=false remarks=true})",
        "func.func(braze-fuse-pointwise{recompute-limit=2 remarks=true})",
        "func.func(braze-lower-kernels)", "func.func(braze-fold-layouts{remarks=true})", "func.func(braze-inline-kernels)", "func.func(braze-channels-last)", "func.func(braze-split-dims)", "func.func(braze-collapse-dims)", "cse",
        "func.func(braze-verify-collective-order)", "func.func(braze-overlap{remarks=true})",
        "func.func(braze-verify-collective-order)", "func.func(braze-combo-kernels{max-arguments=250 remarks=true})",
        "braze-plan-memory{remarks=true}"]
    assert parsed[0][1] == "9"  # the function, its 7 ops and the return
    assert all(before[2] == after[1] for before, after in zip(parsed[:7], parsed[1:8]))
    fusion = records(caplog, "fusion")
    assert "<string>:8:8: 'braze.sum' fused with its producer 'braze.div'" in fusion
    assert ("<string>:9:8: 'braze.neg' not fused with its producer 'braze.sum': the reduction drops its dims "
            "(no keepdim)") in fusion
    codegen = records(caplog, "codegen")
    assert len(codegen) == 2
    assert re.fullmatch(rf"cpu: 2 kernel\(s\) .*; source {re.escape(str(tmp_path))}/.*source\.cpp \(cache miss\)",
                        codegen[0]), codegen[0]
    assert codegen[1].endswith("(cache hit)")
    assert not cold.stats["cache_hit"] and warm.stats["cache_hit"]


def test_nothing_is_logged_when_off(caplog):
    braze.set_logs("")  # every topic at WARNING, whatever the root logger's level
    with caplog.at_level(logging.DEBUG):
        program = braze.compile_mlir(SOFTMAX)
        program(torch.randn(4, 8))
    assert not [r for r in caplog.records if r.name.startswith("braze.")]


def test_runtime_steps_at_debug_only(caplog):
    program = braze.compile_mlir(SOFTMAX)
    x = torch.randn(4, 8)
    braze.set_logs("runtime")  # INFO: the per-call steps stay silent
    with caplog.at_level(logging.INFO, logger="braze"):
        program(x)
    assert not records(caplog, "runtime")
    braze.set_logs("+runtime")
    with caplog.at_level(logging.DEBUG, logger="braze"):
        softmax, negated_sum = program(x)
    torch.testing.assert_close(softmax, torch.softmax(x, 1))
    torch.testing.assert_close(negated_sum, -torch.softmax(x, 1).sum(1))
    runtime = records(caplog, "runtime")
    assert runtime[0] == "softmax: call with 2 step(s)"
    assert all(re.fullmatch(r"softmax: step \d .+: \d+\.\d{3} ms", line) for line in runtime[1:])
    assert len(runtime) == 3


def dumps(directory):
    return sorted(directory.glob("*.mlir"))


def without_header(text):
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("// "))


def test_dump_dir_replays_with_braze_opt(tmp_path):
    compiled = braze.compile_mlir(SOFTMAX, options={"dump_dir": str(tmp_path)})
    (directory,) = tmp_path.iterdir()
    assert directory.name == "compile-000"
    files = dumps(directory)
    assert files[0].name == "000-input.mlir"
    assert [f.name[:3] for f in files] == [f"{n:03d}" for n in range(len(files))]
    assert files[1].name == "001-braze-simplify.mlir"
    assert without_header(files[-1].read_text()) == compiled.module.operation.get_asm(enable_debug_info=True) + "\n"
    exe = shutil.which("braze-opt")
    for before, after in zip(files, files[1:]):
        header = after.read_text().splitlines()[1]
        pipeline = re.fullmatch(rf"// Replay: braze-opt {re.escape(before.name)} --pass-pipeline='(.*)'", header).group(1)
        run = subprocess.run([exe, str(before), f"--pass-pipeline={pipeline}", "--mlir-print-debuginfo"],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert run.stdout == without_header(after.read_text()), f"{before.name} -> {after.name}"
    assert (directory / "cpu-kernels.cpp").read_text() == Path(compiled.stats["source"]).read_text()


def test_dump_dir_is_not_in_the_cache_key_and_dumps_on_a_hit(tmp_path):
    target = braze.target.get("cpu")
    assert target.options({"dump_dir": str(tmp_path)}).key() == target.options({}).key()
    braze.compile_mlir(SOFTMAX, options={"cache_dir": str(tmp_path / "cache")})
    hit = braze.compile_mlir(SOFTMAX, options={"cache_dir": str(tmp_path / "cache"),
                                               "dump_dir": str(tmp_path / "dumps")})
    assert hit.stats["cache_hit"]
    directory = tmp_path / "dumps" / "compile-000"
    assert len(dumps(directory)) > 5 and (directory / "cpu-kernels.cpp").exists()


def test_dump_dir_through_compile_and_torch_compile(tmp_path):
    def f(x):
        return torch.softmax(x, -1) * 2

    x = torch.randn(4, 8)
    model = braze.compile(torch.nn.Softmax(-1), (x,), options={"dump_dir": str(tmp_path / "aot")})
    torch.testing.assert_close(model(x), torch.softmax(x, -1))
    assert (tmp_path / "aot" / "compile-000" / "000-input.mlir").exists()
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="braze", options={"dump_dir": str(tmp_path / "dynamo")})
    torch.testing.assert_close(compiled(x), f(x))
    assert (tmp_path / "dynamo" / "compile-000" / "cpu-kernels.cpp").exists()


def test_python_pass_dump_names_its_replay(tmp_path, clean_registry):
    from mlir import ir

    @braze.register_pass("test-mark")
    def mark(operation):
        """Marks the first function."""
        operation.regions[0].blocks[0].operations[0].attributes["test.marked"] = ir.UnitAttr.get(operation.context)

    module = braze.parse("""
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = braze.neg %x : tensor<4xf32>
  %b = braze.neg %a : tensor<4xf32>
  return %b : tensor<4xf32>
}""")
    braze.run_pipeline(module, "test-mark,braze-simplify", dump_dir=tmp_path)
    assert [f.name for f in dumps(tmp_path)] == ["000-input.mlir", "001-test-mark.mlir",
                                               "002-braze-simplify.mlir"]
    python_step = (tmp_path / "001-test-mark.mlir").read_text()
    assert python_step.splitlines()[:2] == [
        "// After pass 1: test-mark",
        "// Replay: braze.run_pipeline(braze.parse(<000-input.mlir>), 'test-mark') (a Python pass)"]
    assert "attributes {test.marked}" in python_step
    # braze-simplify then folds neg(neg(x)).
    assert "braze.neg" not in without_header((tmp_path / "002-braze-simplify.mlir").read_text())


def test_comm_topic_reports_communicators(caplog):
    import braze.comm as bc

    braze.set_logs("comm")
    with caplog.at_level(logging.INFO, logger="braze"):
        bc.new_comm("shm", 0, 1, bc.TCPStore("127.0.0.1", 0, True), timeout=5.0).close()
        with pytest.raises(bc.CommInvalidArgument):
            bc.new_comm("nope", 0, 1, bc.TCPStore("127.0.0.1", 0, True))
    comm = records(caplog, "comm")
    assert comm[0] == "rank 0 of 1: shm communicator ready (timeout 5.0 s)"
    assert comm[1].startswith("rank 0 of 1: creating a nope communicator failed: unknown comm backend 'nope'")


def test_dumps_before_a_failing_pass_stay(tmp_path, clean_registry):
    @braze.register_pass("test-fail")
    def fail(operation):
        raise BrazeError("refused on purpose")

    module = braze.parse(SOFTMAX)
    with pytest.raises(BrazeError, match="Python pass 'test-fail' failed: refused on purpose"):
        braze.run_pipeline(module, "braze-simplify,test-fail,cse", dump_dir=tmp_path)
    assert [f.name for f in dumps(tmp_path)] == ["000-input.mlir", "001-braze-simplify.mlir"]
