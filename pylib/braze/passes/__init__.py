"""Pass pipelines mixing C++ and Python passes, and the Python pass API."""

from braze.passes.pipeline import combo_kernels_pass, kernel_form_pipeline, run_pipeline
from braze.passes.registry import PythonPass, lookup, register_pass, registered_passes
from braze.passes.rewrite import erase_op, replace_op
from braze.passes import tune_convolutions  # noqa: F401  (registers braze-tune-convolutions)

__all__ = [
    "PythonPass",
    "combo_kernels_pass",
    "erase_op",
    "kernel_form_pipeline",
    "lookup",
    "register_pass",
    "registered_passes",
    "replace_op",
    "run_pipeline",
]
