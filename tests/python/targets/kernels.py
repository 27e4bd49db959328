"""The capture suite's kernels in the kernel form, made once per test session."""

import functools

from test_models import MODELS, _inputs, _model

import braze
from braze import target as targets
from braze.testing.kernels import kernel_form


@functools.lru_cache(maxsize=None)
def model_kernels(name: str):
    """(module, kernels) of model `name` after the GPU targets' pipeline."""
    opencl = targets.get("opencl")
    return kernel_form(braze.export(_model(name), _inputs(name)).module, opencl.pipeline(opencl.options()))


MODEL_NAMES = list(MODELS)
