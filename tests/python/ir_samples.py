"""IR snippets and paths several test files share."""

from pathlib import Path

LIT_DIR = Path(__file__).resolve().parents[1] / "lit"

SWISH = """
func.func @swish(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %s = braze.sigmoid %x : tensor<?x64xf32>
  %y = braze.mul %x, %s : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
"""

NEGATIONS = """
func.func @f(%a: tensor<?x4xf32>, %b: tensor<4xf32>) -> tensor<?x4xf32> {
  %n = braze.neg %b : tensor<4xf32>
  %r = braze.add %a, %n : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
"""
