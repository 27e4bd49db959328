"""Replaces one "## ..." section of benchmarks/RESULTS.md, leaving the others."""

from __future__ import annotations

import os
import re


def write_section(path, section, heading):
    """`section` starts with `heading`; it replaces the section of that
    heading (up to the next "## "), or is appended."""
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)
