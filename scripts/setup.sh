#!/usr/bin/env bash
# Creates .venv (unless it exists) and builds and installs braze into it, with
# the build and test tools. Incremental: a second run rebuilds only what
# changed (build/ keeps the CMake tree). Pass --editable for a development
# install whose Python files come from pylib/.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x .venv/bin/python ] || python3 -m venv .venv
. .venv/bin/activate
pip install -q --upgrade pip
pip install -q -r requirements-dev.txt
if [ "${1:-}" = "--editable" ]; then
  pip install -q --no-build-isolation -e .
else
  pip install -q --no-build-isolation .
fi
echo "braze installed in $(pwd)/.venv"
