"""docs/extending.md's example, run exactly as written."""

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def test_example_is_short_and_complete():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    pass_lines = code[: code.index("\nm = braze.parse")].strip().splitlines()
    assert len(pass_lines) < 30, "the documented pass must stay under 30 lines"

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {"__name__": "extending_doc"})
    printed = out.getvalue()
    assert "braze.silu %arg0 : tensor<?x64xf32>" in printed
    assert "braze.mul" not in printed and "braze.sigmoid" not in printed
