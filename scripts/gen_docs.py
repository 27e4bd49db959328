#!/usr/bin/env python3
"""Regenerates docs/dialect.md and docs/passes.md from the TableGen sources.

`python scripts/gen_docs.py` rewrites them; `--check` exits 1 if either is
stale (tests/python/test_docs.py runs the check).
"""

import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(sysconfig.get_paths()["platlib"])
TBLGEN = SITE / "mlir" / "bin" / "mlir-tblgen"

DOCS = {
    "docs/dialect.md": ["-gen-dialect-doc", "-dialect=braze", "dialects/BrazeOps.td"],
    "docs/passes.md": ["-gen-pass-doc", "dialects/Passes.td"],
}


def render(args: list[str]) -> str:
    include = ["-I", str(ROOT / "dialects"), "-I", str(SITE / "mlir" / "include")]
    return subprocess.run(
        [str(TBLGEN), *include, *args[:-1], str(ROOT / args[-1])],
        check=True, capture_output=True, text=True,
    ).stdout


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for doc, args in DOCS.items():
        text = render(args)
        path = ROOT / doc
        if path.exists() and path.read_text() == text:
            continue
        stale.append(doc)
        if not check:
            path.write_text(text)
    if check and stale:
        print(f"stale: {', '.join(stale)}; run scripts/gen_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
