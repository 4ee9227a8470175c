#!/usr/bin/env bash
# One command on a fresh machine: install, then run the offline demo (`xlviz demo`).
# Extra arguments go to `xlviz demo`, e.g. `bash scripts/demo.sh --variants all`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/xlviz demo "$@"
