#!/usr/bin/env bash
# The drop-in fixtures: runs Megatron-LM's own tools/preprocess_data.py once per line of
# cases.tsv (NAME <TAB> ARGS), with ARGS exactly as written there, in a folder holding the
# inputs make_inputs.py writes, and stores what it wrote under the case's --output-prefix
# folder as megatron/NAME/*.gz (every file, gzipped: the test also checks that tokenbeam writes no other
# .bin/.idx). tests/test_megatron_dropin.py runs `tokenbeam-tokenize ARGS` with the same ARGS
# and compares the files byte for byte. Not run by the tests: the outputs are committed.
#
#   MEGATRON_LM=/path/to/Megatron-LM MEGATRON_PYTHON=/path/to/venv/bin/python \
#   [EXTRA_PYTHONPATH=/folder/with/sentencepiece/and/tiktoken] \
#   bash tests/data/megatron_cli/run_megatron.sh
#
# EXTRA_PYTHONPATH: where MEGATRON_PYTHON lacks sentencepiece or tiktoken (the fixtures were
# made with symlinks to the project .venv's sentencepiece 0.2.3 and tiktoken 0.14.0).
# Megatron's workers die with a traceback yet the script exits 0: a log holding one fails here.
#
# i.e. for each case: cd WORK && mkdir -p out/NAME && PYTHONPATH=$MEGATRON_LM $MEGATRON_PYTHON \
#   $MEGATRON_LM/tools/preprocess_data.py ARGS
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout of tag core_v0.16.1}"
: "${MEGATRON_PYTHON:?set MEGATRON_PYTHON to a python with megatron-core 0.16.1 and torch}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$MEGATRON_PYTHON" "$here/make_inputs.py" "$work"
rm -rf "${here:?}/megatron"
while IFS=$'\t' read -r name args; do
  read -r -a argv <<< "$args"
  mkdir -p "$work/out/$name"  # Megatron writes into an existing folder only
  (cd "$work" && PYTHONPATH="$MEGATRON_LM${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH}" "$MEGATRON_PYTHON" -W ignore \
    "$MEGATRON_LM/tools/preprocess_data.py" "${argv[@]}" > "$work/$name.log" 2>&1) \
    || { cat "$work/$name.log"; exit 1; }
  if grep -q Traceback "$work/$name.log"; then cat "$work/$name.log"; exit 1; fi
  mkdir -p "$here/megatron/$name"
  for f in "$work/out/$name"/*; do  # gzip -n: no name or time inside, the same bytes each time
    gzip -9 -n -c "$f" > "$here/megatron/$name/$(basename "$f").gz"
  done
  echo "$name: $(cd "$here/megatron/$name" && ls | tr '\n' ' ')"
done < "$here/cases.tsv"
