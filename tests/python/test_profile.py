"""braze.profile: Chrome trace JSON of compiled programs' calls and of
compiles (docs/observability.md)."""

import json
import threading
from pathlib import Path

import jsonschema
import pytest
import torch
from ir_samples import COMBO_INDEPENDENT, SOFTMAX, SWITCH

import braze
from braze.codegen import emit
from braze.errors import BrazeError
from braze.runtime import trace

# A matrix product (a host op: the BLAS through torch) between a view and a kernel.
LINEAR = """
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<16x4xf32> {
  %y = braze.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %r = braze.relu %y : tensor<4x16xf32>
  %t = braze.permute %r [1, 0] : tensor<4x16xf32> -> tensor<16x4xf32>
  return %t : tensor<16x4xf32>
}
"""


# The Trace Event Format's JSON object format, as a JSON schema (Perfetto's
# trace processor would check more, but it is a download braze cannot make).
SCHEMA = json.loads((Path(__file__).parent / "chrome_trace.schema.json").read_text())


def complete_events(document: dict) -> list[dict]:
    """The complete events of a trace, which must match the trace event
    format's schema."""
    jsonschema.validate(document, SCHEMA)
    events = [e for e in document["traceEvents"] if e["ph"] == "X"]
    for event in events:
        assert set(event) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
    return events


def inside(inner: dict, outer: dict) -> bool:
    return (inner["tid"] == outer["tid"] and outer["ts"] <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3)


def test_the_schema_check_can_fail():
    good = {"traceEvents": [{"name": "k", "cat": "kernel", "ph": "X", "ts": 1.0, "dur": 2.0, "pid": 1, "tid": 2,
                             "args": {}},
                            {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "main"}}],
            "displayTimeUnit": "ms"}
    complete_events(good)
    for broken in ({**good["traceEvents"][0], "dur": -1.0}, {**good["traceEvents"][0], "ts": "1"},
                   {**good["traceEvents"][0], "ph": "XX"}, {**good["traceEvents"][1], "args": {"sort_index": 1}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"traceEvents": [broken]}, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "displayTimeUnit": "s"}, SCHEMA)


def test_trace_is_chrome_json_with_a_lane_per_thread(tmp_path):
    program = braze.compile_mlir(SOFTMAX)
    kernels = list(emit(program.module, "cpu")["softmax"].kernels)  # the names the report uses
    x = torch.randn(4, 8)
    program(x)  # outside the profile: not traced
    path = tmp_path / "trace.json"
    with braze.profile(path):
        program(x)
        worker = threading.Thread(target=lambda: [program(x) for _ in range(2)], name="worker")
        worker.start()
        worker.join()
    assert trace.tracer is None
    document = json.loads(path.read_text())
    assert document["displayTimeUnit"] == "ms"
    events = complete_events(document)
    calls = [e for e in events if e["cat"] == "call"]
    assert [e["name"] for e in calls] == ["softmax"] * 3
    steps = [e for e in events if e["cat"] != "call"]
    assert len(steps) == 3 * len(program.program.steps)
    launched = {name for e in steps if e["cat"] == "kernel" for name in e["name"].split(" + ")}
    assert launched == set(kernels)
    # Two lanes, each named after its thread; every step inside its call.
    lanes = {e["tid"] for e in events}
    assert len(lanes) == 2
    names = {e["tid"]: e["args"]["name"] for e in document["traceEvents"] if e["name"] == "thread_name"}
    assert set(names) == lanes and "worker" in names.values()
    for step in steps:
        assert any(c["tid"] == step["tid"] and c["ts"] <= step["ts"] and step["ts"] + step["dur"] <= c["ts"] + c["dur"]
                   for c in calls)


def test_host_ops_and_views_have_their_own_categories(tmp_path):
    # The GEMM a host step (not fused with the ReLU into a kernel).
    program = braze.compile_mlir(LINEAR, options={"epilogue_fusion": False})
    with braze.profile(tmp_path / "t.json") as tracer:
        program(torch.randn(4, 8), torch.randn(8, 16))
    events = [e for e in complete_events(tracer.trace()) if e["cat"] != "call"]
    assert [(e["name"], e["cat"]) for e in events] == [
        ("braze.matmul", "host"), ("braze_kernel_0", "kernel"), ("braze.permute", "view")]
    assert events[1]["args"]["location"] == "<string>:4:8"


def test_braze_steps_appear_in_torch_profiler(tmp_path):
    program = braze.compile_mlir(SOFTMAX)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as torch_trace, braze.profile():
        program(torch.randn(4, 8))
    names = {event.key for event in torch_trace.key_averages()}
    kernels = [step.run.name for step in program.program.steps]
    assert {f"braze: {name}" for name in kernels} <= names, names
    torch_trace.export_chrome_trace(str(tmp_path / "torch.json"))
    assert f"braze: {kernels[0]}" in (tmp_path / "torch.json").read_text()


def test_profiles_do_not_nest_and_bad_paths_are_clear(tmp_path):
    with braze.profile():
        with pytest.raises(BrazeError, match="braze.profile is already open"):
            with braze.profile():
                pass
    with pytest.raises(BrazeError, match="cannot write the trace to"):
        with braze.profile(tmp_path / "missing" / "t.json"):
            pass
    assert trace.tracer is None


def test_a_combo_is_one_event_named_after_its_sub_kernels(tmp_path):
    program = braze.compile_mlir(COMBO_INDEPENDENT)
    assert program.stats["launches"] < program.stats["kernels"]
    args = (torch.randn(3, 16), torch.randn(5, dtype=torch.float64), torch.randn(7, 300),
            torch.randint(-9, 9, (2, 9)))
    path = tmp_path / "trace.json"
    with braze.profile(path):
        program(*args)
    kernels = [e for e in complete_events(json.loads(path.read_text())) if e["cat"] == "kernel"]
    assert len(kernels) == program.stats["launches"]
    assert any(" + " in e["name"] for e in kernels)
    named = sorted(name for e in kernels for name in e["name"].split(" + "))
    assert named == sorted(emit(program.module, "cpu")["f"].kernels)  # every kernel once, as the report names it


def test_compiles_in_a_profile_are_traced(tmp_path):
    """A compile inside the block is an event with its stages and each
    pass nested in it, on the compiling thread's lane."""
    path = tmp_path / "trace.json"
    with braze.profile(path):
        program = braze.compile_mlir(SOFTMAX)
        program(torch.randn(4, 8))
    events = complete_events(json.loads(path.read_text()))
    compiles = [e for e in events if e["cat"] == "compile"]
    (whole,) = [e for e in compiles if e["name"] == "compile for cpu"]
    assert whole["args"]["function"] == "softmax" and whole["args"]["target"] == "cpu"
    stages = {e["name"]: e for e in compiles if e["name"] in ("passes", "codegen", "build")}
    assert list(stages) == ["passes", "codegen", "build"]
    assert all(inside(stage, whole) for stage in stages.values())
    passes = [e for e in compiles if "pipeline" in e["args"]]
    assert [e["name"] for e in passes][:7] == ["braze-simplify", "braze-verify-collective-order",
                                               "braze-convolution-gemms",
                                               "braze-form-attention", "braze-order-attention", "braze-lower-attention",
                                               "braze-epilogue-fusion"]
    assert len(passes) == len(braze.compiler.pipeline({}).split(","))  # one pass between two commas
    assert all(inside(run, stages["passes"]) for run in passes)
    assert passes[0]["args"]["ops_before"] == 9
    # The call comes after its compile.
    (call,) = [e for e in events if e["cat"] == "call"]
    assert call["ts"] >= whole["ts"] + whole["dur"]


def test_braze_compile_traces_its_capture(tmp_path):
    """braze.compile's torch.export is the `capture` stage, on the compiling
    thread's lane before the compile it feeds (one each)."""
    class Twice(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2

    with braze.profile(tmp_path / "t.json") as tracer:
        braze.compile(Twice(), (torch.randn(4),))
    stages = [e for e in complete_events(tracer.trace()) if e["cat"] == "compile" and "pipeline" not in e["args"]]
    assert [e["name"] for e in stages] == ["capture", "compile for cpu", "passes", "codegen", "build"]
    capture, whole = stages[:2]
    assert capture["tid"] == whole["tid"] and capture["ts"] + capture["dur"] <= whole["ts"]


def test_control_flow_steps_have_their_own_category(tmp_path):
    program = braze.compile_mlir(SWITCH)
    x = torch.randn(8)
    with braze.profile(tmp_path / "t.json") as tracer:
        (y,) = program(torch.tensor(1), x)
    torch.testing.assert_close(y, -x)
    events = complete_events(tracer.trace())
    (switch,) = [e for e in events if e["cat"] == "control"]
    assert switch["name"] == "braze.switch" and switch["args"]["location"] == "<string>:3:8"
    (region,) = [e for e in events if e["cat"] == "region"]
    assert region["name"] == "braze.switch branch 1" and inside(region, switch)
    (kernel,) = [e for e in events if e["cat"] == "kernel"]
    assert inside(kernel, region)


SOLO = """
func.func @reduce(%x: tensor<8xf32>) -> tensor<8xf32> {
  %w = braze.all_reduce_start %x "sum" group "solo" ranks [3] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %r = braze.wait %w : !braze.work<tensor<8xf32>>
  %y = braze.neg %r : tensor<8xf32>
  return %y : tensor<8xf32>
}
"""


def test_a_distributed_program_traces_on_its_rank(tmp_path):
    """A process running collectives is its global rank's lane (pid = rank;
    here a group of one whose member is global rank 3), with collective and
    wait events."""
    import braze.comm

    store = braze.comm.TCPStore("127.0.0.1", 0, True)
    comm = braze.comm.new_comm("tcp", 0, 1, store)
    braze.register_communicator(comm, group="solo")
    try:
        program = braze.compile_mlir(SOLO)
        x = torch.randn(8)
        with braze.profile(tmp_path / "t.json") as tracer:
            (y,) = program(x)
    finally:
        braze.unregister_communicator(comm)
        comm.close()
    torch.testing.assert_close(y, -x)
    document = tracer.trace()
    events = complete_events(document)
    assert {e["pid"] for e in document["traceEvents"]} == {3}
    metadata = {e["name"]: e["args"] for e in document["traceEvents"] if e["ph"] == "M" and e["tid"] == 0}
    assert metadata == {"process_name": {"name": "braze rank 3"}, "process_sort_index": {"sort_index": 3}}
    steps = [(e["name"], e["cat"], e["args"].get("group")) for e in events if e["cat"] != "call"]
    assert steps == [("braze.all_reduce_start", "collective", "solo"),
                     ("braze.wait (braze.all_reduce_start)", "wait", "solo"), ("braze_kernel_0", "kernel", None)]
