import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "frontend"))


def need(what: str, missing: str | None) -> None:
    """Skips when a toolchain is missing, fails instead under
    BRAZE_REQUIRE_TOOLCHAINS=1 (CI installs them all)."""
    from braze.target import require_toolchains

    if missing is None:
        return
    message = f"{what}: {missing}"
    if require_toolchains():
        pytest.fail(message + " (BRAZE_REQUIRE_TOOLCHAINS=1)")
    pytest.skip(message)


def need_program(name: str) -> str:
    path = shutil.which(name)
    need(name, None if path else f"{name} is not on PATH")
    return path
