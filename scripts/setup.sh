#!/usr/bin/env bash
# Idempotent set-up of everything tokenbeam's demo and tests need on a fresh machine:
#   scripts/setup.sh           the Python environment (.venv) with tokenbeam installed
#   scripts/setup.sh --test    also the real services the tests start (each block below)
# Everything lands in .venv/ and .cache/ inside the checkout; re-running skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache
mkdir -p "$CACHE"

python_env() {
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  local stamp=.venv/.tokenbeam-installed
  if [ ! -f "$stamp" ] || [ setup.py -nt "$stamp" ]; then
    # pip's build backend warns on every editable install: its output is shown only on failure
    local log=.venv/.tokenbeam-install.log
    if ! { .venv/bin/pip install --quiet --upgrade pip &&
           .venv/bin/pip install --quiet -e ".[azure,fast,sentences,test,bench,plot]"; } \
         >"$log" 2>&1; then
      cat "$log" >&2
      echo "setup: installing tokenbeam into .venv failed (the output above is in $log)" >&2
      exit 1
    fi
    touch "$stamp"
  fi
}

python_env
[ "${1:-}" = "--test" ] || exit 0

# --- services for the integration tests (each block owns its own cache folder) -------------
for part in scripts/setup.d/*.sh; do
  [ -e "$part" ] || continue
  # shellcheck source=/dev/null
  ROOT=$ROOT CACHE=$CACHE bash "$part"
done
