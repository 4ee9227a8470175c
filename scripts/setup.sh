#!/usr/bin/env bash
# Create .venv (if needed) and install xlviz with pinned dependencies. torch==2.13.0 comes
# from the machine's local CPU wheel when there is one (pip's find-links), else from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".[test]"
