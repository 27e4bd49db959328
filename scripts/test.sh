#!/usr/bin/env bash
# Runs every test: the FileCheck tests under tests/lit, then pytest under
# tests/python (extra arguments go to pytest). Fails if either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] && export PATH="$PWD/.venv/bin:$PATH"

lit -sv tests/lit
lit_status=$?
python -m pytest tests/python -ra "$@"
pytest_status=$?
[ "$lit_status" -eq 0 ] && [ "$pytest_status" -eq 0 ]
