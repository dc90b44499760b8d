#!/usr/bin/env bash
# Runs the whole test suite: installs requirements-dev.txt into ./.venv on first use, then pytest
# with two workers (pytest-xdist; one test file per worker at a time, so a file's module-scoped
# runs start once; the longest files first, in tests/conftest.py's order). Extra arguments go to
# pytest, e.g. `bash scripts/test.sh -k vtrace`; `-n 0` runs in this process.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh requirements-dev.txt
exec "${PYTHON}" -m pytest -n 2 --dist loadfile --no-loadscope-reorder "$@"
