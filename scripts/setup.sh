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
# With the targets' optional extras (pyproject.toml): pyopencl (opencl), NVRTC
# and cuda-bindings (cuda), Triton (triton); the tests use them.
if [ "${1:-}" = "--editable" ]; then
  pip install -q --no-build-isolation -e '.[opencl,cuda,triton]'
else
  pip install -q --no-build-isolation '.[opencl,cuda,triton]'
fi
echo "braze installed in $(pwd)/.venv"
