#!/usr/bin/env bash
# A headless browser for the report test (tests/e2e/test_inspect_report_e2e.py opens the page that
# `python -m pipelines.inspect OUT --report` writes), idempotent:
#   - Debian's chromium and chromium-driver (matching versions, from apt; Selenium, in the
#     [test] extra, drives them and downloads no browser of its own)
# A download of about 150 MB (about 450 MB on disk), a minute or two on a fresh machine;
# skipped when both are on PATH. Without them the test skips, saying why.
# Needs ROOT and CACHE (scripts/setup.sh passes them; nothing lands there).
set -euo pipefail
: "${ROOT:?}" "${CACHE:?}"

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ "${#missing[@]}" -eq 0 ] && exit 0
echo "50-chromium: apt-get install ${missing[*]} (about 150 MB to download, a minute or two)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
