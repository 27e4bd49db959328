"""The CPU kernels' launcher: kernel and combo calls and the argument check
run in C++ (cxx/runtime/launch, Cython-wrapped as braze.runtime._launch),
with no Python work per tensor.

The extension is built against the torch of the Python that builds braze,
so it serves only that torch version; where it is absent (braze built
without torch) or was built for another torch, `native` is None and the
steps run in Python, with the same results. `BRAZE_PYTHON_LAUNCH=1` forces
the Python path (the tests compare both).
"""

from __future__ import annotations

import os

import torch

from braze import logs

native = None
if os.environ.get("BRAZE_PYTHON_LAUNCH") != "1":
    try:
        from braze.runtime import _launch
    except ImportError as error:  # built without torch's headers
        logs.logger("runtime").info("the CPU launcher is not built (%s): kernel calls run in Python", error)
    else:
        if _launch.TORCH_VERSION == torch.__version__:
            native = _launch
        else:
            logs.logger("runtime").warning(
                "braze's CPU launcher was built for torch %s, not the running %s: kernel calls run in "
                "Python (slower per call); reinstall braze to rebuild it", _launch.TORCH_VERSION, torch.__version__)
