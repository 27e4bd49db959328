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
