"""The braze-opt command as a user runs it from PATH."""

import shutil
import subprocess
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def braze_opt(*args):
    exe = shutil.which("braze-opt")
    assert exe, "braze-opt is not on PATH; install braze"
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=60)


def test_help_lists_braze_and_upstream_passes():
    out = braze_opt("--help").stdout
    assert "--braze-simplify" in out
    assert "Apply braze's folders, canonicalizations and algebraic rewrites" in out
    for upstream in ("--canonicalize", "--cse", "--linalg-generalize-named-ops"):
        assert upstream in out
    assert "Available Dialects: arith, braze, builtin, func, linalg, math, scf, tensor" in out


def test_simplify_the_shipped_example():
    run = braze_opt("--braze-simplify", EXAMPLES / "mlp.mlir")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert out.count("braze.permute") == 2 and out.count("braze.addmm") == 2
    for gone in ("braze.reshape", "braze.mul", "braze.neg", "braze.sub", "braze.constant"):
        assert gone not in out
    assert "braze.add %8, %arg0 : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>" in out


def test_invalid_file_exits_nonzero_with_location(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f(%a: tensor<4xf32>) {\n  %0 = braze.sum %a dims [3] : tensor<4xf32> -> tensor<f32>\n  return\n}\n")
    run = braze_opt(bad)
    assert run.returncode == 1
    assert f"{bad}:2:8: error: 'braze.sum' op reduced dim 3 is out of range for rank 1" in run.stderr


def test_missing_file():
    run = braze_opt("/nonexistent/x.mlir")
    assert run.returncode == 1
    assert "No such file or directory" in run.stderr
