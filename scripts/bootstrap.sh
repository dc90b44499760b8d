#!/usr/bin/env bash
# Creates ./.venv (Python 3.11) and installs the pinned requirements and this package (editable, so
# `import impala_tf` works from any directory with .venv/bin/python) into it, once.
# Sourced by run_experiment.sh and scripts/test.sh; re-installs only when a requirements file or
# pyproject.toml changes.
# Set IMPALA_TF_PYTHON to use an interpreter you manage yourself (no venv, no install).
set -euo pipefail
_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_reqs="${1:-requirements.txt}"
if [[ -n "${IMPALA_TF_PYTHON:-}" ]]; then
  PYTHON="${IMPALA_TF_PYTHON}"
else
  _venv="${_repo}/.venv"
  if [[ ! -x "${_venv}/bin/python" ]]; then
    _base="$(command -v python3.11 || command -v python3)"
    echo "[bootstrap] creating ${_venv} with ${_base}" >&2
    "${_base}" -m venv "${_venv}"
  fi
  PYTHON="${_venv}/bin/python"
  _stamp="${_venv}/.installed-$(cat "${_repo}/requirements.txt" "${_repo}/${_reqs}" "${_repo}/pyproject.toml" | sha1sum | cut -c1-12)"
  if [[ ! -f "${_stamp}" ]]; then
    echo "[bootstrap] installing ${_reqs} into ${_venv} (first run only)" >&2
    "${PYTHON}" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
    "${PYTHON}" -m pip install --quiet --disable-pip-version-check -r "${_repo}/${_reqs}" >&2
    "${PYTHON}" -m pip install --quiet --disable-pip-version-check --no-deps -e "${_repo}" >&2
    touch "${_stamp}"
  fi
fi
export PYTHON
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
