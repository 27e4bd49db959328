"""`braze-opt`: runs the native optimizer driver shipped inside the package."""

import os
import sys
import sysconfig
from pathlib import Path


def binary_path() -> Path:
    """The installed braze-opt executable.

    In an editable install the Python sources come from the source tree while
    the native files live in site-packages, so look there as well.
    """
    here = Path(__file__).resolve().parent.parent / "_bin" / "braze-opt"
    if here.exists():
        return here
    return Path(sysconfig.get_paths()["platlib"]) / "braze" / "_bin" / "braze-opt"


def main() -> None:
    path = binary_path()
    if not path.exists():
        sys.exit(f"braze-opt: the native binary is missing at {path}; reinstall braze")
    os.execv(path, [str(path), *sys.argv[1:]])
