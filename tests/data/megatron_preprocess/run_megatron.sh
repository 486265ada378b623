#!/usr/bin/env bash
# Runs Megatron-LM's own tools/preprocess_data.py on corpus.jsonl + tokenizer*/ (made by
# make_inputs.py) in several variants and stores the outputs in this folder: always the
# default one (megatron/), and each other variant only when its bytes differ from megatron/
# (the script prints which are identical). Not run by the tests: the outputs are committed.
#
#   MEGATRON_LM=/path/to/Megatron-LM-at-core_v0.16.1 \
#   MEGATRON_PYTHON=/path/to/venv/bin/python \
#   [TRANSFORMERS4_PATH=/path/to/dir/with/transformers-4.x] \
#   bash tests/data/megatron_preprocess/run_megatron.sh
#
# MEGATRON_PYTHON needs megatron-core 0.16.1, torch, transformers, six, regex and pyyaml.
# TRANSFORMERS4_PATH (optional): a `pip install --target` folder holding transformers 4.x and
# its matching tokenizers / huggingface-hub, put first on PYTHONPATH for the *_tf4 variants.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout of tag core_v0.16.1}"
: "${MEGATRON_PYTHON:?set MEGATRON_PYTHON to a python with megatron-core 0.16.1 and torch}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out=corpus_text_document

preprocess() {  # preprocess NAME TOKENIZER_DIR EXTRA_PYTHONPATH [flags...]
  local name="$1" tokenizer="$2" extra="$3"
  shift 3
  mkdir -p "$work/$name"
  # PYTHONPATH puts the checkout's megatron/ (it has megatron.training, the wheel does not)
  # before the installed wheel. --workers 1: one encoder process.
  PYTHONPATH="${extra:+$extra:}$MEGATRON_LM" "$MEGATRON_PYTHON" -W ignore \
    "$MEGATRON_LM/tools/preprocess_data.py" \
    --input "$here/corpus.jsonl" \
    --output-prefix "$work/$name/corpus" \
    --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model "$here/$tokenizer" \
    --json-keys text \
    --workers 1 \
    "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  if [ "$name" = megatron ] || ! cmp -s "$work/megatron/$out.bin" "$work/$name/$out.bin" \
      || ! cmp -s "$work/megatron/$out.idx" "$work/$name/$out.idx"; then
    echo "$name: stored"
    rm -rf "${here:?}/$name"
    mkdir -p "$here/$name"
    cp "$work/$name/$out.bin" "$work/$name/$out.idx" "$here/$name/"
  else
    echo "$name: identical to megatron/, not stored"
    rm -rf "${here:?}/$name"
  fi
}

preprocess megatron tokenizer "" --append-eod
preprocess megatron_no_eod tokenizer "" 
preprocess megatron_include_special tokenizer "" --append-eod --tokenizer-hf-include-special-tokens
preprocess megatron_use_fast tokenizer "" --append-eod --tokenizer-hf-use-fast
preprocess megatron_bos tokenizer_bos "" --append-eod
preprocess megatron_bos_include_special tokenizer_bos "" --append-eod \
  --tokenizer-hf-include-special-tokens
if [ -n "${TRANSFORMERS4_PATH:-}" ]; then
  preprocess megatron_tf4 tokenizer "$TRANSFORMERS4_PATH" --append-eod
  preprocess megatron_bos_include_special_tf4 tokenizer_bos "$TRANSFORMERS4_PATH" --append-eod \
    --tokenizer-hf-include-special-tokens
  if cmp -s "$work/megatron_bos_include_special/$out.bin" \
        "$work/megatron_bos_include_special_tf4/$out.bin" \
      && cmp -s "$work/megatron_bos_include_special/$out.idx" \
        "$work/megatron_bos_include_special_tf4/$out.idx"; then
    echo "megatron_bos_include_special_tf4: identical to megatron_bos_include_special/, not stored"
    rm -rf "${here:?}/megatron_bos_include_special_tf4"
  fi
fi

# Line ends (make_line_ends.py writes the inputs): the same 130 records with CR, CR LF and mixed
# line ends. Megatron reads them in Python's text mode, so the three outputs must be one and the
# same: stored once, in megatron_line_ends/.
rm -rf "${here:?}/megatron_line_ends"
for ends in cr crlf mixed; do
  mkdir -p "$work/line_ends_$ends"
  PYTHONPATH="$MEGATRON_LM" "$MEGATRON_PYTHON" -W ignore "$MEGATRON_LM/tools/preprocess_data.py" \
    --input "$here/line_ends_$ends.jsonl" --output-prefix "$work/line_ends_$ends/line_ends" \
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$here/tokenizer" \
    --json-keys text --append-eod --workers 1 > "$work/line_ends_$ends.log" 2>&1 \
    || { cat "$work/line_ends_$ends.log"; exit 1; }
  for ext in bin idx; do
    cmp "$work/line_ends_cr/line_ends_text_document.$ext" \
      "$work/line_ends_$ends/line_ends_text_document.$ext"
  done
done
mkdir -p "$here/megatron_line_ends"
cp "$work/line_ends_cr/line_ends_text_document.bin" "$work/line_ends_cr/line_ends_text_document.idx" \
  "$here/megatron_line_ends/"
echo "megatron_line_ends: stored (cr, crlf and mixed identical)"
