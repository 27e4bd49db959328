"""braze.profile: Chrome trace JSON of compiled programs' calls (docs/observability.md)."""

import json
import threading

import pytest
import torch
from ir_samples import COMBO_INDEPENDENT, SOFTMAX

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


def complete_events(document: dict) -> list[dict]:
    events = [e for e in document["traceEvents"] if e["ph"] == "X"]
    for event in events:
        assert set(event) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
        assert event["dur"] >= 0 and event["ts"] >= 0
    return events


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
    program = braze.compile_mlir(LINEAR)
    with braze.profile(tmp_path / "t.json") as tracer:
        program(torch.randn(4, 8), torch.randn(8, 16))
    events = [e for e in tracer.trace()["traceEvents"] if e["ph"] == "X" and e["cat"] != "call"]
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
