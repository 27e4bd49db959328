"""Small torch modules tests and benchmarks capture."""

import torch


class Apply(torch.nn.Module):
    """A function as a module: `Apply(f)(*args)` is `f(*args)` (braze.export
    captures modules)."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *args):
        return self.function(*args)
