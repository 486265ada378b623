#!/usr/bin/env bash
# The README's demo command: set up, generate a small multilingual corpus and train a tiny
# tokenizer (offline), run the tokenize job on the local runner, validate the shards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
DEMO=${DEMO_DIR:-demo_out}
rm -rf "$DEMO"
.venv/bin/python -m pipelines.demo --output "$DEMO/input"
.venv/bin/python -m pipelines.tokenize --runner=DirectRunner \
  --input "$DEMO/input/corpus" --output "$DEMO/shards" \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$DEMO/input/tokenizer" \
  --json-keys text --append-eod --workers 2 --log-interval 400
.venv/bin/python -m pipelines.validate "$DEMO/shards" --eod-id 0
echo "demo shards are in $DEMO/shards (metadata.json lists them)"
