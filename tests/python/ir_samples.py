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

# A softmax and a rank-dropping sum whose consumer braze-fuse-pointwise
# refuses: two kernels, one remark of each kind (the log, report and trace
# tests read its line numbers).
SOFTMAX = """
func.func @softmax(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %m = braze.max %x dims [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = braze.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = braze.exp %d : tensor<4x8xf32>
  %s = braze.sum %e dims [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %y = braze.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %t = braze.sum %y dims [1] : tensor<4x8xf32> -> tensor<4xf32>
  %n = braze.neg %t : tensor<4xf32>
  return %y, %n : tensor<4x8xf32>, tensor<4xf32>
}
"""

# Five kernels with no data path between them (pointwise and reductions,
# mixed dtypes, dynamic sizes): braze-combo-kernels groups them.
COMBO_INDEPENDENT = """
func.func @f(%x: tensor<?x16xf32>, %y: tensor<?xf64>, %z: tensor<7x300xf32>, %w: tensor<?x9xi64>)
    -> (tensor<?x16xf32>, tensor<?xf64>, tensor<7xf32>, tensor<?x9xi64>, tensor<?x1xf32>) {
  %a = braze.exp %x : tensor<?x16xf32>
  %b = braze.neg %y : tensor<?xf64>
  %c = braze.sum %z dims [1] : tensor<7x300xf32> -> tensor<7xf32>
  %d = braze.mul %w, %w : tensor<?x9xi64>, tensor<?x9xi64> -> tensor<?x9xi64>
  %e = braze.max %x dims [1] keepdim : tensor<?x16xf32> -> tensor<?x1xf32>
  return %a, %b, %c, %d, %e : tensor<?x16xf32>, tensor<?xf64>, tensor<7xf32>, tensor<?x9xi64>, tensor<?x1xf32>
}
"""

# A 2-way switch: branch 0 returns its input, branch 1 (one kernel) its negation.
SWITCH = """
func.func @pick(%i: tensor<i64>, %x: tensor<8xf32>) -> tensor<8xf32> {
  %r = braze.switch %i (%x) : (tensor<i64>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    braze.yield %a : tensor<8xf32>
  }, {
  ^bb0(%a: tensor<8xf32>):
    %n = braze.neg %a : tensor<8xf32>
    braze.yield %n : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}
"""

# A tensor-parallel step with one of everything the report draws: a GEMM
# whose all_reduce braze-overlap hides behind three independent kernels
# (braze-combo-kernels groups them, not the negation of the rank-dropping
# sum: it reads one of them; the wait stops at the extern call, an op with
# effects), a braze.switch and the kernels after it.
COLLECTIVE_STEP = """
func.func @step(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>, %g: tensor<256x256xf32>,
                %i: tensor<i64>) -> (tensor<64x64xf32>, tensor<256x256xf32>, tensor<64xf32>, tensor<256xf32>,
                                     tensor<256x256xf32>) {
  %m = braze.matmul %x, %w : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %work = braze.all_reduce_start %m "sum" group "tp" ranks [0, 1] : tensor<64x64xf32> -> !braze.work<tensor<64x64xf32>>
  %r = braze.wait %work : !braze.work<tensor<64x64xf32>>
  %e = braze.exp %g : tensor<256x256xf32>
  %n = braze.neg %b : tensor<64xf32>
  %s = braze.sum %g dims [1] : tensor<256x256xf32> -> tensor<256xf32>
  %u = braze.neg %s : tensor<256xf32>
  %c = braze.extern "aten.cumsum.default" (%g) args [0 : index, 0] : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %y = braze.add %r, %n : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xf32>
  %z = braze.switch %i (%y) : (tensor<i64>, tensor<64x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%a: tensor<64x64xf32>):
    %t = braze.tanh %a : tensor<64x64xf32>
    braze.yield %t : tensor<64x64xf32>
  }, {
  ^bb0(%a: tensor<64x64xf32>):
    braze.yield %a : tensor<64x64xf32>
  }
  return %z, %e, %n, %u, %c : tensor<64x64xf32>, tensor<256x256xf32>, tensor<64xf32>, tensor<256xf32>,
                              tensor<256x256xf32>
}
"""
