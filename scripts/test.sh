#!/usr/bin/env bash
# Runs the whole test suite: installs requirements-dev.txt into ./.venv on first use, then pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k vtrace`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh requirements-dev.txt
exec "${PYTHON}" -m pytest "$@"
