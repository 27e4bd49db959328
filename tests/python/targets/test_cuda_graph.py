"""The `cuda_graph` option (runtime/cuda_graph.py) without a GPU: what it
refuses, and its warm-up / capture / replay bookkeeping against eager, with
torch.cuda's graph API stood in by one that runs on the CPU (a capture runs
the steps and keeps their results as the graph's; a replay runs them again
into those results, as a CUDA graph writes the memory it captured). What
only a GPU shows (the capture itself, replay speed) is
benchmarks/gpu_check.py's."""

import pytest
import torch
from conftest import need

import braze
from braze import target as targets
from braze.runtime import cuda_graph
from braze.runtime.cuda_graph import GraphedProgram, refusal
from braze.testing.modules import Apply


class ReplayingGraphs:
    """torch.cuda's graph API on the CPU, counting what it was asked."""

    device_type = "cpu"

    def __init__(self):
        self.warm_ups = self.captures = self.replays = 0

    def warm_up(self, run):
        self.warm_ups += 1
        return run()

    def capture(self, run):
        self.captures += 1
        outputs = run()
        # The capture's own bookkeeping (deferred failure flags) is redone
        # on each replay, as a graph rewrites the flags it captured.
        return (run, outputs, cuda_graph.capture), outputs

    def replay(self, graph) -> None:
        self.replays += 1
        run, outputs, capture = graph
        with capture.capturing():
            fresh = run()
        for kept, new in zip(outputs, fresh):
            kept.copy_(new)


def _graphed(model, args, target="cpu"):
    compiled = braze.compile(model, args, target=target)
    ops = [op.operation.name for op in compiled.compiled.module.mlir_module.body.operations[0].regions[0].blocks[0]]
    graphs = ReplayingGraphs()
    return compiled, GraphedProgram(compiled.compiled.program, ops, graphs), graphs


def _linear_gelu(x, w, b):
    return torch.nn.functional.gelu(x @ w + b)


@pytest.mark.parametrize("target", ["cpu", "opencl"])
def test_replays_match_eager_and_weights_are_read_in_place(target):
    """On the CPU and on OpenCL, whose fused GEMMs (codegen/cpp, codegen/gpu_gemm.py) are one step each."""
    need(f"the {target} target", targets.get(target).compiler_missing())
    x, w, b = torch.randn(8, 32), torch.randn(32, 16), torch.randn(16)
    compiled, graphed, graphs = _graphed(Apply(_linear_gelu), (x, w, b), target)
    assert compiled.stats["fused_gemms"] == 1
    want = _linear_gelu(x, w, b)
    torch.testing.assert_close(graphed(x, w, b)[0], want)  # the warm-up
    assert (graphs.warm_ups, graphs.captures, graphs.replays) == (1, 0, 0)
    results = []
    for _ in range(3):
        x = torch.randn(8, 32)  # a new input each call: copied into the graph's buffer
        results.append((x, graphed(x, w, b)[0]))
    assert (graphs.captures, graphs.replays) == (1, 3)
    assert graphed.buffers[0] is not None and graphed.buffers[1] is None and graphed.buffers[2] is None
    for x, got in results:  # each call's result is its own, not the graph's
        torch.testing.assert_close(got, _linear_gelu(x, w, b))
    w.mul_(2)  # read in place: the next replay sees the change
    torch.testing.assert_close(graphed(x, w, b)[0], _linear_gelu(x, w, b))
    assert graphs.captures == 1


def test_an_argument_read_in_place_that_moves_is_captured_again():
    x, w, b = torch.randn(8, 32), torch.randn(32, 16), torch.randn(16)
    _, graphed, graphs = _graphed(Apply(_linear_gelu), (x, w, b))
    graphed(x, w, b)
    graphed(x, w, b)
    assert graphed.buffers == [None, None, None] and graphs.captures == 1
    other = torch.randn(32, 16)
    torch.testing.assert_close(graphed(x, other, b)[0], _linear_gelu(x, other, b))
    assert graphs.captures == 2 and graphed.buffers[1] is not None and graphed.buffers[0] is None
    w2 = torch.randn(32, 16)  # copied from now on: no further capture
    torch.testing.assert_close(graphed(x, w2, b)[0], _linear_gelu(x, w2, b))
    assert graphs.captures == 2


def test_numpy_arguments_give_numpy_results():
    x, w, b = torch.randn(4, 8), torch.randn(8, 8), torch.randn(8)
    _, graphed, _ = _graphed(Apply(_linear_gelu), (x, w, b))
    for _ in range(3):
        got = graphed(x.numpy(), w.numpy(), b.numpy())[0]
        torch.testing.assert_close(torch.from_numpy(got), _linear_gelu(x, w, b))


def test_a_division_by_zero_is_raised_after_the_replay(monkeypatch):
    """Triton's kernels (in the interpreter) keep failure flags on the
    device: captured, they are read once after each replay."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    need("the triton target", targets.get("triton").compiler_missing())

    def divide(a, b):
        return torch.div(a, b, rounding_mode="trunc") + 1

    a, b = torch.randint(-50, 50, (4, 16)), torch.randint(1, 9, (4, 16))
    _, graphed, graphs = _graphed(Apply(divide), (a, b), target="triton")
    for _ in range(3):
        torch.testing.assert_close(graphed(a, b)[0], divide(a, b))
    assert graphs.replays == 2 and graphed.capture.flags  # the kernel's flag was captured
    zero = b.clone()
    zero[2, 5] = 0
    with pytest.raises(braze.BrazeError, match=r"kernel \S+ at .*: integer division by zero"):
        graphed(a, zero)
    assert graphs.replays == 3  # raised after the replay, from the flag
    torch.testing.assert_close(graphed(a, b)[0], divide(a, b))


def test_refusals_name_the_reason():
    x = torch.randn(4, 8)
    with pytest.raises(braze.BrazeError, match=r"the cuda_graph option cannot replay \S+: it runs on cpu "
                                               r"\(a CUDA device is needed\)"):
        braze.compile(Apply(torch.relu), (x,), options={"cuda_graph": True})
    compiled = braze.compile(Apply(torch.relu), (x,))
    program = compiled.compiled.program
    assert refusal(program, ["braze.kernel"], "cpu") is None
    assert "control flow (braze.switch)" in refusal(program, ["braze.switch"], "cpu")
    assert "a collective (braze.all_reduce_start)" in refusal(program, ["braze.all_reduce_start"], "cpu")
    dynamic = braze.compile(torch.nn.ReLU(), (x,), dynamic_shapes=({0: torch.export.Dim("n")},))
    assert "argument #0 has a dynamic shape (tensor<?x8xf32>)" in refusal(dynamic.compiled.program, [], "cpu")


def test_the_option_is_not_in_the_cache_key():
    cpu = targets.get("cpu")
    assert cpu.options({"cuda_graph": True}).key() == cpu.options({}).key()
