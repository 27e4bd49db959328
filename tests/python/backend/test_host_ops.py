"""The runtime split: the runtime runs host ops from the one table the
reference interpreter uses (braze.hostops), never importing the
interpreter, and refuses tensors on a device its target does not serve."""

import subprocess
import sys
import textwrap

import pytest
import torch

import braze

PROGRAM = """
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = braze.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %e = braze.exp %m : tensor<4x8xf32>
  return %e : tensor<4x8xf32>
}"""


def test_compiling_and_running_never_imports_the_reference_interpreter():
    script = textwrap.dedent(f"""
        import sys
        import torch
        import braze
        import braze.runtime.cpu, braze.runtime.cuda, braze.runtime.executor, braze.runtime.opencl
        program = braze.compile_mlir({PROGRAM!r})
        x, w = torch.randn(4, 8), torch.randn(8, 8)
        torch.testing.assert_close(program(x, w)[0], torch.exp(x @ w))
        print(sorted(name for name in sys.modules if name.startswith("braze.reference")))
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_the_reference_interpreter_runs_host_ops_through_the_same_handlers():
    from braze.hostops import HOST_OPS
    from braze.reference import HANDLERS

    assert {"braze.matmul", "braze.reshape", "braze.extern", "braze.parameter", "tensor.dim"} <= set(HOST_OPS)
    assert all(HANDLERS[name] is handler for name, handler in HOST_OPS.items())
    # The tensor-level compute ops are the interpreter's alone: the runtime
    # runs them only inside kernels.
    assert "braze.exp" in HANDLERS and "braze.exp" not in HOST_OPS


def test_tensors_on_a_device_the_target_does_not_serve_are_refused():
    program = braze.compile_mlir(PROGRAM)
    with pytest.raises(braze.BrazeError, match=r"argument #0 is on device meta, but @f was compiled for a "
                                                r"target whose tensors live on cpu"):
        program(torch.empty(4, 8, device="meta"), torch.randn(8, 8))



class _ReadingOp:
    """An op record that records every field read through it."""

    def __init__(self, op):
        self._op, self.reads = op, []

    def __getattr__(self, name):
        self.reads.append(name)
        return getattr(self._op, name)


class _Rotary(torch.nn.Module):
    """Host ops with dynamic sizes: slices by the length, arange, views,
    concatenation, a broadcast mask."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(32, 16))

    def forward(self, x):
        b, s, d = x.shape
        half = torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)
        position = torch.arange(s)
        mask = position[None, :] > position[:, None]
        heads = (x * self.table[:s] + half).reshape(b, s, 2, d // 2).permute(0, 2, 1, 3)
        return heads.masked_fill(mask[:, :1].expand(s, d // 2), 0.0).reshape(b, 2 * s * (d // 2))


def test_prepared_host_ops_read_the_op_once_and_compute_what_the_handler_does():
    """The runtime keeps `prepare(record)` per step: running it must read
    nothing of the op's record (all is read once, when prepared) and give
    what the handler itself gives, which is how the reference interpreter
    runs it."""
    from braze.hostops.record import op_record
    from braze.reference.interpreter import Interpreter, module_operation
    from braze.reference.registry import HANDLERS

    prepared = set()

    class Checking(Interpreter):
        def run_op(self, op, operands):
            expected = super().run_op(op, operands)
            prepare = getattr(HANDLERS[op.operation.name], "prepare", None)
            if prepare is not None:
                reading = _ReadingOp(op_record(op))
                run = prepare(reading)
                reading.reads.clear()
                actual = run(operands, self)
                assert reading.reads == [], (op.operation.name, reading.reads)
                torch.testing.assert_close(actual, expected, rtol=0, atol=0)
                prepared.add(op.operation.name)
            return expected

    model = _Rotary().eval()
    seq = torch.export.Dim("seq", min=2, max=32)
    exported = braze.export(model, (torch.randn(2, 8, 16),), dynamic_shapes=({1: seq},))
    x = torch.randn(2, 5, 16)
    interpreter = Checking(module_operation(exported.module), exported.parameters)
    (result,) = interpreter.run_entry(None, exported.imported.arguments([x]))
    torch.testing.assert_close(result, model(x))
    assert {"braze.slice", "braze.iota", "braze.reshape", "braze.concat"} <= prepared, prepared


FRESH_RESULTS = """
func.func @f(%a: tensor<2x?xf32>, %b: tensor<2x3xf32>, %t: tensor<10x4xf32>, %i: tensor<2xi64>, %n: index)
    -> (tensor<2x?xf32>, tensor<2x4xf32>, tensor<?xi64>, tensor<2x?xf32>) {
  %c = braze.concat %a, %b dim 1 : tensor<2x?xf32>, tensor<2x3xf32> -> tensor<2x?xf32>
  %g = braze.take %t, %i dim 0 : tensor<10x4xf32>, tensor<2xi64> -> tensor<2x4xf32>
  %r = braze.iota start 0.0 step 1.0 sizes [%n] : tensor<?xi64>
  return %c, %g, %r, %a : tensor<2x?xf32>, tensor<2x4xf32>, tensor<?xi64>, tensor<2x?xf32>
}"""


def test_host_results_that_are_new_tensors_are_returned_without_a_copy():
    """torch.cat, indexing and arange make new tensors: returned as they
    are (a decode step returns its KV cache's concat, which a copy would
    read and write again), while a returned argument is still a copy."""
    program = braze.compile_mlir(FRESH_RESULTS)
    a, b, t, i = torch.randn(2, 5), torch.randn(2, 3), torch.randn(10, 4), torch.tensor([1, 3])
    concat, taken, iota, returned = program(a, b, t, i, 6)
    assert program.program.copied_outputs == [3]
    torch.testing.assert_close(concat, torch.cat([a, b], 1))
    torch.testing.assert_close(taken, t[i])
    torch.testing.assert_close(iota, torch.arange(6))
    assert returned.data_ptr() != a.data_ptr()
    torch.testing.assert_close(returned, a)
