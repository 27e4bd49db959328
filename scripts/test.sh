#!/usr/bin/env bash
# Runs every test: the FileCheck tests under tests/lit, then pytest under
# tests/python (extra arguments go to pytest). Fails if any part fails.
#
# The compiler tests run in two pytest-xdist workers: most of their time is
# single-threaded (tracing, the C++ compiler), and OpenMP threads wait
# passively so two workers sharing the cores do not stall each other. The
# communication tests run on their own afterwards: their timeouts assume the
# CPUs are theirs.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] && export PATH="$PWD/.venv/bin:$PATH"

lit -sv tests/lit
lit_status=$?
OMP_WAIT_POLICY=passive python -m pytest tests/python --ignore=tests/python/comm -n 2 -ra --durations=20 "$@"
compiler_status=$?
python -m pytest tests/python/comm -ra "$@"
comm_status=$?
[ "$lit_status" -eq 0 ] && [ "$compiler_status" -eq 0 ] && [ "$comm_status" -eq 0 ]
