#!/usr/bin/env bash
# Azurite, the Azure Storage emulator the tests in tests/e2e/azure/ start (npm package `azurite`).
# Installed into $CACHE/azurite (a local npm project); re-running skips an existing install.
# Needs node >= 18 and npm. Without them the Azure tests skip and say why.
set -euo pipefail
: "${CACHE:?CACHE must be set (scripts/setup.sh sets it)}"
AZURITE_VERSION=3.35.0
DEST=$CACHE/azurite
BIN=$DEST/node_modules/.bin/azurite-blob

if [ -x "$BIN" ] && [ -f "$DEST/.version" ] && [ "$(cat "$DEST/.version")" = "$AZURITE_VERSION" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "20-azurite: npm not found; install Node.js >= 18 to run tests/e2e/azure (they skip without it)" >&2
  exit 0
fi
mkdir -p "$DEST"
cd "$DEST"
[ -f package.json ] || npm init -y >/dev/null 2>&1
npm install --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" >/dev/null
echo "$AZURITE_VERSION" > .version
echo "20-azurite: installed azurite $AZURITE_VERSION into $DEST"
