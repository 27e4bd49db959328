# RUN: %python %s | FileCheck %s
#
# Snapshots of what braze.export makes of small PyTorch graphs: they document
# the import. Each case prints the module of one graph.

import warnings

import torch
import torch.nn.functional as F

import braze

warnings.filterwarnings("ignore")
torch.manual_seed(0)


def show(title, model, args, **kwargs):
    print(f"// ===== {title}")
    print(braze.export(model, args, **kwargs))


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


# A Linear layer is addmm with the transposed weight; weights are named parameters.
# CHECK-LABEL: ===== linear
# CHECK: func.func @forward(%[[X:.*]]: tensor<8x4xf32> {braze.dims = [8, 4]}) -> tensor<8x3xf32>
# CHECK-DAG: %[[W:.*]] = braze.parameter "weight" : tensor<3x4xf32>
# CHECK-DAG: %[[B:.*]] = braze.parameter "bias" : tensor<3xf32>
# CHECK: %[[WT:.*]] = braze.permute %[[W]] [1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
# CHECK: braze.addmm %[[B]], %[[X]], %[[WT]] : tensor<3xf32>, tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
show("linear", torch.nn.Linear(4, 3), (torch.randn(8, 4),))

# A dynamic batch is `?` with its symbol and range on the module.
# CHECK-LABEL: ===== dynamic batch
# CHECK: module attributes {braze.symbols = {[[S:s[0-9]+]] = [2, 64]}}
# CHECK: func.func @forward(%{{.*}}: tensor<?x4xf32> {braze.dims = ["[[S]]", 4]}) -> tensor<?x3xf32>
# CHECK: braze.addmm {{.*}} -> tensor<?x3xf32>
show("dynamic batch", torch.nn.Linear(4, 3), (torch.randn(8, 4),),
     dynamic_shapes=({0: torch.export.Dim("batch", min=2, max=64)},))

# Softmax subtracts the row max before exp, then divides by the row sum.
# CHECK-LABEL: ===== softmax
# CHECK: %[[M:.*]] = braze.max %[[X:.*]] dims [1] keepdim : tensor<2x5xf32> -> tensor<2x1xf32>
# CHECK: %[[D:.*]] = braze.sub %[[X]], %[[M]]
# CHECK: %[[E:.*]] = braze.exp %[[D]]
# CHECK: %[[S:.*]] = braze.sum %[[E]] dims [1] keepdim
# CHECK: braze.div %[[E]], %[[S]] : tensor<2x5xf32>, tensor<2x1xf32> -> tensor<2x5xf32>
show("softmax", Fn(lambda x: x.softmax(-1)), (torch.randn(2, 5),))

# Mixed dtypes become explicit casts; Python scalars rank-0 constants.
# CHECK-LABEL: ===== promotion
# CHECK: %[[C:.*]] = braze.cast %{{.*}} : tensor<4xi64> to tensor<4xf32>
# CHECK: %[[A:.*]] = braze.add %[[C]], %{{.*}} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
# CHECK: %[[H:.*]] = braze.constant dense<5.000000e-01> : tensor<f32>
# CHECK: braze.mul %[[A]], %[[H]] : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
show("promotion", Fn(lambda i, x: (i + x) * 0.5), (torch.arange(4), torch.randn(4)))

# An embedding lookup is braze.take along dim 0.
# CHECK-LABEL: ===== embedding
# CHECK: %[[T:.*]] = braze.parameter "weight" : tensor<10x3xf32>
# CHECK: braze.take %[[T]], %{{.*}} dim 0 : tensor<10x3xf32>, tensor<2x4xi64> -> tensor<2x4x3xf32>
show("embedding", torch.nn.Embedding(10, 3), (torch.randint(0, 10, (2, 4)),))

# A causal mask over a dynamic length: iota, comparison, where.
# CHECK-LABEL: ===== causal mask
# CHECK: %[[N:.*]] = tensor.dim %[[X:.*]], %{{.*}} : tensor<?x8xf32>
# CHECK: braze.iota start 0.000000e+00 step 1.000000e+00 sizes [%{{.*}}] : tensor<?xi64>
# CHECK: braze.le %{{.*}}, %{{.*}} : tensor<1x?xi64>, tensor<?x1xi64> -> tensor<?x?xi1>
# CHECK: braze.where
show("causal mask",
     Fn(lambda x: torch.where(torch.arange(x.shape[0])[None, :] <= torch.arange(x.shape[0])[:, None],
                              x @ x.t(), float("-inf"))),
     (torch.randn(6, 8),), dynamic_shapes={"args": ({0: torch.export.Dim("n", min=2, max=32)},)})

# GELU keeps its approximation; layer norm is mean, variance and rsqrt.
# CHECK-LABEL: ===== gelu and layer norm
# CHECK: braze.gelu %{{.*}} approximate "tanh" : tensor<3x8xf32>
# CHECK: braze.mean %{{.*}} dims [1] keepdim : tensor<3x8xf32> -> tensor<3x1xf32>
# CHECK: braze.rsqrt
show("gelu and layer norm",
     Fn(lambda x: F.layer_norm(F.gelu(x, approximate="tanh"), (8,))), (torch.randn(3, 8),))
