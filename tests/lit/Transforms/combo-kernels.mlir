// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels{remarks=true}))' | FileCheck %s
// RUN: sed -e '/expected-remark/d' %s | braze-opt -split-input-file -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels{remarks=true max-sub-kernels=2}))' 2>&1 >/dev/null | FileCheck %s --check-prefix=CAP
// RUN: braze-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels{max-sub-kernels=2}))' 2>/dev/null | FileCheck %s --check-prefix=CAPIR
// RUN: sed -e '/expected-remark/d' %s | braze-opt -split-input-file -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels{remarks=true max-arguments=3}))' 2>&1 >/dev/null | FileCheck %s --check-prefix=ARGS
// RUN: sed -e '/expected-remark/d' %s | braze-opt -split-input-file -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels{remarks=true max-live-bytes=1000}))' 2>&1 >/dev/null | FileCheck %s --check-prefix=BYTES
// RUN: sed -e '/expected-remark/d' %s | braze-opt -split-input-file -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels{remarks=true max-live-values=4}))' 2>&1 >/dev/null | FileCheck %s --check-prefix=LIVE
// RUN: sed -e '/expected-remark/d' %s | braze-opt -split-input-file -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels{remarks=true max-body-ops=4}))' 2>&1 >/dev/null | FileCheck %s --check-prefix=BODY
// RUN: sed -e '/expected-remark/d' %s | braze-opt -split-input-file -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels{remarks=true per-sub-kernel-blocks=false}))' 2>&1 >/dev/null | FileCheck %s --check-prefix=SHARED
// RUN: sed -e '/expected-remark/d' %s | braze-opt -split-input-file -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels))' 2>&1 | FileCheck %s --check-prefix=QUIET
// RUN: braze-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(braze-lower-kernels,braze-combo-kernels{per-sub-kernel-blocks=false}))' 2>/dev/null | FileCheck %s --check-prefix=ORDER

// The caps, each with a low value (remarks in program order of the
// decisions; "kernel #k" is the k-th kernel of the function).
// CAP: remark: not grouped with kernel #0: the group has 2 sub-kernels (max-sub-kernels 2)
// CAP: remark: stays standalone: no independent kernel to group with
// CAP: remark: grouped as sub-kernel #0 of a combo of 2 kernels (dispatch round_robin)
// CAP: remark: grouped as sub-kernel #1 of a combo of 2 kernels (dispatch round_robin)
// CAPIR-LABEL: func.func @independent
// CAPIR: braze.combo dispatch "round_robin"
// CAPIR-SAME: : tensor<64xf32>, tensor<64xf32> {
// ARGS: remark: not grouped with kernel #0: the group would take 4 buffer arguments (max-arguments 3)
// ARGS: remark: not grouped with kernel #0: the group would take 4 buffer arguments (max-arguments 3)
// ARGS: remark: not grouped with kernel #1: the group would take 4 buffer arguments (max-arguments 3)
// BYTES: remark: not grouped with kernel #0: the group's inputs and results would hold 1024 bytes (max-live-bytes 1000)
// BYTES: remark: not grouped with kernel #0: the group's inputs and results would hold 16512 bytes (max-live-bytes 1000)
// BYTES: remark: grouped as sub-kernel #0 of a combo of 2 kernels
// The register guard: exp and neg keep at most 4 values live; an add with
// a broadcast operand 5.
// LIVE: remark: grouped as sub-kernel #0 of a combo of 3 kernels (dispatch round_robin)
// LIVE: remark: stays standalone: register pressure: 5 values live at once (max-live-values 4)
// BODY: remark: grouped as sub-kernel #0 of a combo of 3 kernels
// BODY: remark: stays standalone: register pressure: {{[0-9]+}} ops in its body (max-body-ops 4)
// SHARED: remark: not grouped with kernel #0: it would mix pointwise kernels and reductions without per-sub-kernel blocks
// SHARED: remark: not grouped with kernel #0: a data path leads from kernel #0 to it
// SHARED: remark: not grouped with kernel #0: a data path leads from the group to it through other groups
// SHARED: remark: not grouped with kernel #1: a data path leads from kernel #1 to it

// Remarks are opt-in.
// QUIET-NOT: remark

// Tests that three independent pointwise kernels become one combo with one
// sub-kernel each, their own schedules, and round-robin dispatch (equal,
// static work items); the combo's results replace the kernels'.
// CHECK-LABEL: func.func @independent
// CHECK: %[[C:.*]]:3 = braze.combo dispatch "round_robin" schedules [{block = 1024 : i64, cost = {{[0-9]+}} : i64}, {block = 1024 : i64, cost = {{[0-9]+}} : i64}, {block = 1024 : i64, cost = {{[0-9]+}} : i64}] : tensor<64xf32>, tensor<64xf32>, tensor<64xf32> {
// CHECK: braze.kernel ins(%{{.*}} : tensor<64xf32>)
// CHECK: braze.combo_yield %{{.*}} : tensor<64xf32>
// CHECK-NEXT: }, {
// CHECK: braze.combo_yield
// CHECK-NEXT: }, {
// CHECK: braze.combo_yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[C]]#0, %[[C]]#1, %[[C]]#2
func.func @independent(%x: tensor<64xf32>, %y: tensor<64xf32>, %z: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 3 kernels (dispatch round_robin)}}
  %a = braze.exp %x : tensor<64xf32>
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 3 kernels (dispatch round_robin)}}
  %b = braze.neg %y : tensor<64xf32>
  // expected-remark @+1 {{grouped as sub-kernel #2 of a combo of 3 kernels (dispatch round_robin)}}
  %c = braze.tanh %z : tensor<64xf32>
  return %a, %b, %c : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// Tests an indirect data path: A -> (a GEMM) -> C keeps A and C apart even
// though no kernel lies between them; D, independent, joins A. The combo
// sits at its last member, before the GEMM that reads A.
// CHECK-LABEL: func.func @indirect
// CHECK: %[[AD:.*]]:2 = braze.combo dispatch "sequential"
// CHECK: braze.matmul %[[AD]]#0
// CHECK: %[[C:.*]] = braze.kernel
// CHECK-NOT: braze.combo
func.func @indirect(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %y: tensor<2048xf32>) -> (tensor<4x4xf32>, tensor<2048xf32>) {
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 2 kernels (dispatch sequential)}}
  %a = braze.exp %x : tensor<4x4xf32>
  %m = braze.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 2 kernels (dispatch sequential)}}
  %d = braze.neg %y : tensor<2048xf32>
  // expected-remark @+2 {{not grouped with kernel #0: a data path leads from kernel #0 to it}}
  // expected-remark @+1 {{stays standalone: no independent kernel to group with}}
  %c = braze.exp %m : tensor<4x4xf32>
  return %c, %d : tensor<4x4xf32>, tensor<2048xf32>
}

// -----

// Tests that ops between members that read an earlier member move after the
// combo (a view of A between A and B).
// CHECK-LABEL: func.func @moves_dependents
// CHECK: %[[AB:.*]]:2 = braze.combo
// CHECK: braze.reshape %[[AB]]#0
func.func @moves_dependents(%x: tensor<4x4xf32>, %y: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  // expected-remark @+1 {{grouped as sub-kernel #0}}
  %a = braze.exp %x : tensor<4x4xf32>
  %v = braze.reshape %a : tensor<4x4xf32> -> tensor<16xf32>
  // expected-remark @+1 {{grouped as sub-kernel #1}}
  %b = braze.neg %y : tensor<16xf32>
  return %v, %b : tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests a path through another group: R1 (a reduction) and P1 (pointwise)
// may not share blocks (SHARED), so P1 opens a second group; P2 reads R1
// and joins P1's group; R2 reads P1: it may not join R1's group, or the two
// groups would each wait for the other. With per-sub-kernel blocks (the
// default) everything independent groups.
// CHECK-LABEL: func.func @through_groups
// CHECK: braze.combo dispatch "round_robin" schedules [{block = 64 : i64, cost = {{[0-9]+}} : i64, rblock = 64 : i64}, {block = 1024 : i64, cost = {{[0-9]+}} : i64}]
// CHECK: braze.combo dispatch "round_robin" schedules [{block = 1024 : i64, cost = {{[0-9]+}} : i64}, {block = 64 : i64, cost = {{[0-9]+}} : i64, rblock = 64 : i64}]
func.func @through_groups(%x: tensor<4x64xf32>, %y: tensor<4x64xf32>) -> (tensor<4x1xf32>, tensor<4x64xf32>, tensor<4xf32>) {
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 2 kernels (dispatch round_robin)}}
  %r1 = braze.sum %x dims [1] keepdim : tensor<4x64xf32> -> tensor<4x1xf32>
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 2 kernels}}
  %p1 = braze.exp %y : tensor<4x64xf32>
  // expected-remark @+2 {{not grouped with kernel #0: a data path leads from kernel #0 to it}}
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 2 kernels}}
  %p2 = braze.add %y, %r1 : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  // expected-remark @+2 {{not grouped with kernel #0: a data path leads from kernel #1 to it}}
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 2 kernels}}
  %r2 = braze.sum %p1 dims [1] : tensor<4x64xf32> -> tensor<4xf32>
  // expected-remark @+3 {{not grouped with kernel #0: a data path leads from kernel #0 to it}}
  // expected-remark @+2 {{not grouped with kernel #2: a data path leads from kernel #2 to it}}
  // expected-remark @+1 {{stays standalone: no independent kernel to group with}}
  %o = braze.add %p2, %p1 : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  return %r1, %o, %r2 : tensor<4x1xf32>, tensor<4x64xf32>, tensor<4xf32>
}

// -----

// Tests the reduction separation and the size cap: a sum over 4096 points
// and a pointwise kernel of 2^21 points stay standalone; a sum over 64
// points joins a small exp, with rblock scaled to its row and 64 rows per
// work item.
// CHECK-LABEL: func.func @large_kernels
// CHECK: braze.kernel ins(%{{.*}} : tensor<2x4096xf32>)
// CHECK: braze.kernel ins(%{{.*}} : tensor<2097152xf32>)
// CHECK: braze.combo dispatch "round_robin" schedules [{block = 64 : i64, cost = {{[0-9]+}} : i64, rblock = 64 : i64}, {block = 1024 : i64, cost = {{[0-9]+}} : i64}]
func.func @large_kernels(%x: tensor<2x4096xf32>, %w: tensor<2097152xf32>, %y: tensor<2x64xf32>, %z: tensor<128xf32>) -> (tensor<2xf32>, tensor<2097152xf32>, tensor<2xf32>, tensor<128xf32>) {
  // expected-remark @+1 {{stays standalone: reduces over 4096 points (max-reduction-extent 2048)}}
  %a = braze.sum %x dims [1] : tensor<2x4096xf32> -> tensor<2xf32>
  // expected-remark @+1 {{stays standalone: has 2097152 points (max-points 1048576)}}
  %v = braze.neg %w : tensor<2097152xf32>
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 2 kernels (dispatch round_robin)}}
  %b = braze.sum %y dims [1] : tensor<2x64xf32> -> tensor<2xf32>
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 2 kernels (dispatch round_robin)}}
  %c = braze.exp %z : tensor<128xf32>
  return %a, %v, %b, %c : tensor<2xf32>, tensor<2097152xf32>, tensor<2xf32>, tensor<128xf32>
}

// -----

// Tests that dynamic extents give sequential dispatch (item counts unknown
// until the call), and that an op with side effects ends every group.
// CHECK-LABEL: func.func @dynamic
// CHECK: braze.combo dispatch "sequential"
// CHECK: braze.extern
// CHECK-NOT: braze.combo
func.func @dynamic(%x: tensor<?x8xf32>, %y: tensor<8xf32>, %z: tensor<8xf32>) -> (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 2 kernels (dispatch sequential)}}
  %a = braze.exp %x : tensor<?x8xf32>
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 2 kernels (dispatch sequential)}}
  %b = braze.neg %y : tensor<8xf32>
  %r = braze.extern "aten.cumsum.default" (%z) args [0 : index, 0] : (tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{stays standalone: no independent kernel to group with}}
  %c = braze.tanh %r : tensor<8xf32>
  return %a, %b, %c : tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that kernels reading only parameters and constants (a batch norm's
// scale and shift, which the executor computes once when the program is
// built) group among themselves, never with kernels that run on every call:
// in one combo they would run on every call too. A kernel reading a
// parameter and an argument runs on every call; so does one reading an op
// with side effects, even on parameters only.
// CHECK-LABEL: func.func @invariant
// CHECK: %[[W:.*]] = braze.parameter "bn.weight"
// CHECK: %[[P:.*]]:2 = braze.combo
// CHECK: braze.kernel ins(%{{.*}} : tensor<16xf32>)
// CHECK: math.rsqrt
// CHECK: braze.kernel ins(%[[W]] : tensor<16xf32>)
// CHECK: arith.negf
// CHECK: %[[C:.*]]:2 = braze.combo
// CHECK: braze.kernel ins(%arg0 : tensor<16xf32>)
// CHECK: math.exp
// CHECK: braze.kernel ins(%arg0, %[[W]] : tensor<16xf32>, tensor<16xf32>)
// CHECK: braze.extern
// CHECK-NOT: braze.combo
// CHECK: return %[[C]]#0, %[[P]]#0, %[[P]]#1, %[[C]]#1
func.func @invariant(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %var = braze.parameter "bn.var" : tensor<16xf32>
  %weight = braze.parameter "bn.weight" : tensor<16xf32>
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 2 kernels (dispatch round_robin)}}
  %a = braze.exp %x : tensor<16xf32>
  // expected-remark @+2 {{not grouped with kernel #0: it reads only constants and parameters (it runs once, when the program is built) and the group runs on every call}}
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 2 kernels (dispatch round_robin)}}
  %s = braze.rsqrt %var : tensor<16xf32>
  // expected-remark @+2 {{not grouped with kernel #0: it reads only constants and parameters (it runs once, when the program is built) and the group runs on every call}}
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 2 kernels (dispatch round_robin)}}
  %n = braze.neg %weight : tensor<16xf32>
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 2 kernels (dispatch round_robin)}}
  %m = braze.mul %x, %weight : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %r = braze.extern "aten.cumsum.default" (%var) args [0 : index, 0] : (tensor<16xf32>) -> tensor<16xf32>
  // expected-remark @+1 {{stays standalone: no independent kernel to group with}}
  %t = braze.tanh %r : tensor<16xf32>
  // expected-remark @+2 {{not grouped with kernel #4: it reads only constants and parameters (it runs once, when the program is built) and the group runs on every call}}
  // expected-remark @+1 {{stays standalone: no independent kernel to group with}}
  %u = braze.exp %weight : tensor<16xf32>
  return %a, %s, %n, %m, %t, %u : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that a pure extern on parameters (Swin's shifted-window mask, built
// by slice_scatter of constants: the executor runs it once, when the
// program is built) keeps its readers call-invariant: the kernel reading
// it groups with the other invariant kernel, not with the one on the
// argument. The extern without `pure` (above) makes its reader per call.
// CHECK-LABEL: func.func @pure_extern
// CHECK: %[[E:.*]] = braze.extern "aten.cumsum.default" pure(
// CHECK: %[[X:.*]] = braze.kernel ins(%arg0 : tensor<16xf32>)
// CHECK: math.exp
// CHECK: %[[P:.*]]:2 = braze.combo
// CHECK: braze.kernel ins(%[[E]] : tensor<16xf32>)
// CHECK: math.tanh
// CHECK: braze.kernel ins(%{{.*}} : tensor<16xf32>)
// CHECK: math.rsqrt
// CHECK: return %[[X]], %[[P]]#0, %[[P]]#1
func.func @pure_extern(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %var = braze.parameter "bn.var" : tensor<16xf32>
  %r = braze.extern "aten.cumsum.default" pure (%var) args [0 : index, 0] : (tensor<16xf32>) -> tensor<16xf32>
  // expected-remark @+1 {{stays standalone: no independent kernel to group with}}
  %a = braze.exp %x : tensor<16xf32>
  // expected-remark @+2 {{not grouped with kernel #0: it reads only constants and parameters (it runs once, when the program is built) and the group runs on every call}}
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 2 kernels (dispatch round_robin)}}
  %t = braze.tanh %r : tensor<16xf32>
  // expected-remark @+2 {{not grouped with kernel #0: it reads only constants and parameters (it runs once, when the program is built) and the group runs on every call}}
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 2 kernels (dispatch round_robin)}}
  %s = braze.rsqrt %var : tensor<16xf32>
  return %a, %t, %s : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that a group whose first member an earlier combo moved past another
// member still precedes every reader of that member (BART's encoder and
// decoder masks): without per-sub-kernel blocks the sums form one group and
// the pointwise kernels another; the exps' combo comes first and moves %b1
// (it reads %a1) after itself, past %b2, whose reshape must then follow the
// sums' combo.
// ORDER-LABEL: func.func @first_member_moved
// ORDER: %[[A:.*]]:2 = braze.combo
// ORDER: %[[B:.*]]:3 = braze.combo
// ORDER: braze.kernel ins(%[[A]]#0 : tensor<4x64xf32>)
// ORDER: braze.kernel ins(%arg1 : tensor<4x64xf32>)
// ORDER: braze.kernel ins(%arg3 : tensor<4x64xf32>)
// ORDER: %[[V:.*]] = braze.reshape %[[B]]#1 : tensor<4xf32> -> tensor<2x2xf32>
// ORDER-NEXT: return %[[B]]#0, %[[V]], %[[A]]#0, %[[A]]#1, %[[B]]#2
// With per-sub-kernel blocks (the default) the sums and exps share a group.
// CHECK-LABEL: func.func @first_member_moved
// CHECK: %[[C:.*]]:4 = braze.combo
// CHECK: braze.kernel
// CHECK: %[[V:.*]] = braze.reshape %[[C]]#1
func.func @first_member_moved(%x: tensor<4x64xf32>, %y: tensor<4x64xf32>, %z: tensor<4x64xf32>, %w: tensor<4x64xf32>) -> (tensor<4xf32>, tensor<2x2xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<4xf32>) {
  // expected-remark @+1 {{grouped as sub-kernel #0 of a combo of 4 kernels (dispatch round_robin)}}
  %a1 = braze.exp %x : tensor<4x64xf32>
  // expected-remark @+2 {{not grouped with kernel #0: a data path leads from kernel #0 to it}}
  // expected-remark @+1 {{stays standalone: no independent kernel to group with}}
  %b1 = braze.sum %a1 dims [1] : tensor<4x64xf32> -> tensor<4xf32>
  // expected-remark @+1 {{grouped as sub-kernel #1 of a combo of 4 kernels (dispatch round_robin)}}
  %b2 = braze.sum %y dims [1] : tensor<4x64xf32> -> tensor<4xf32>
  %v = braze.reshape %b2 : tensor<4xf32> -> tensor<2x2xf32>
  // expected-remark @+1 {{grouped as sub-kernel #2 of a combo of 4 kernels (dispatch round_robin)}}
  %a2 = braze.neg %z : tensor<4x64xf32>
  // expected-remark @+1 {{grouped as sub-kernel #3 of a combo of 4 kernels (dispatch round_robin)}}
  %b3 = braze.sum %w dims [1] : tensor<4x64xf32> -> tensor<4xf32>
  return %b1, %v, %a1, %a2, %b3 : tensor<4xf32>, tensor<2x2xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<4xf32>
}
