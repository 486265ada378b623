#!/usr/bin/env bash
# Runs Megatron-LM's own tools/preprocess_data.py (HuggingFaceTokenizer, the default, non-legacy
# tokenizer path: transformers.AutoTokenizer) on corpus.jsonl once per variant below, for every
# folder make_inputs.py wrote, and stores the outputs for tests/test_megatron_hf.py:
#   megatron/STORED/corpus_text_document.{bin,idx}.gz   each distinct output once
#   variants.tsv   one line per variant: NAME <TAB> STORED <TAB> the flags, space-separated
# (STORED = the first variant whose output had these exact bytes). Not run by the tests.
#
#   MEGATRON_LM=/path/to/Megatron-LM-at-core_v0.16.1 \
#   MEGATRON_PYTHON=/path/to/venv/bin/python \
#   bash tests/data/megatron_hf/run_megatron.sh
#
# MEGATRON_PYTHON needs megatron-core 0.16.1, torch, transformers 5.24, tokenizers. Each variant
# is exactly `python tools/preprocess_data.py --input corpus.jsonl FLAGS --output-prefix OUT
# --json-keys text --workers 1`, run from this folder (../megatron_tokenizers/megatron_driver.py).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout of tag core_v0.16.1}"
: "${MEGATRON_PYTHON:?set MEGATRON_PYTHON to a python with megatron-core 0.16.1 and torch}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out=corpus_text_document

preprocess() {  # preprocess NAME [flags...]: queue one variant
  local name="$1"
  shift
  printf '%s\t%s\t%s\n' "$name" "$here" "--input corpus.jsonl $*" >> "$work/variants.tsv"
}

rm -rf "${here:?}/megatron" "$here/variants.tsv"
folders=(llama_legacy_true llama_legacy_false mistral gemma qwen2 phi gpt_neox gpt2_prefix_space
         missing_specials named_in_vocab split_special_tokens no_eos_sep bert_lower_true
         bert_lower_false t5)
for f in "${folders[@]}"; do
  hf=(--tokenizer-type HuggingFaceTokenizer --tokenizer-model "$f")
  preprocess "${f}_eod" "${hf[@]}" --append-eod
  preprocess "${f}" "${hf[@]}"
done
for f in llama_legacy_true gemma qwen2 bert_lower_true t5 no_eos_sep; do
  preprocess "${f}_include_special_eod" --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model "$f" --tokenizer-hf-include-special-tokens --append-eod
done
# transformers 5 ignores use_fast: the same bytes as without the flag
for f in llama_legacy_true bert_lower_true; do
  preprocess "${f}_use_fast_eod" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$f" \
    --tokenizer-hf-use-fast --append-eod
done
# --tokenizer-special-tokens: added as special tokens (new ids when not in the vocabulary)
preprocess gpt_neox_special_tokens_eod --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model gpt_neox --tokenizer-special-tokens "<|tok_a|>" the --append-eod
preprocess qwen2_special_tokens_eod --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model qwen2 --tokenizer-special-tokens "<|im_start|>" "<|new|>" --append-eod
# --vocab-file/--merge-file with a folder: handed to AutoTokenizer (which keeps tokenizer.json's)
preprocess bert_lower_true_vocab_file_eod --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model bert_lower_true --vocab-file other_vocab.txt --append-eod
preprocess gpt_neox_vocab_merge_files_eod --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model gpt_neox --vocab-file other_vocab.txt --merge-file other_merges.txt --append-eod
# --legacy-tokenizer: megatron.training's class, AutoTokenizer alone and tokenizer(text).input_ids,
# EOD = eos_token_id (no sep fallback: BERT without --append-eod), --tokenizer-special-tokens unread
preprocess t5_legacy_eod --tokenizer-type HuggingFaceTokenizer --tokenizer-model t5 --append-eod \
  --legacy-tokenizer
preprocess bert_lower_true_legacy --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model bert_lower_true --legacy-tokenizer
preprocess gpt_neox_special_tokens_legacy_eod --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model gpt_neox --tokenizer-special-tokens "<|tok_a|>" the --append-eod \
  --legacy-tokenizer

"$MEGATRON_PYTHON" -W ignore "$here/../megatron_tokenizers/megatron_driver.py" "$MEGATRON_LM" \
  "$work/variants.tsv" "$work/out" || { tail -n 30 "$work/out"/*.log; exit 1; }
while IFS=$'\t' read -r name dir args; do
  stored=""
  for prev in "$here"/megatron/*/; do
    [ -d "$prev" ] || continue
    if gunzip -c "$prev/$out.bin.gz" | cmp -s - "$work/out/$name/$out.bin" \
        && gunzip -c "$prev/$out.idx.gz" | cmp -s - "$work/out/$name/$out.idx"; then
      stored="$(basename "$prev")"
      break
    fi
  done
  if [ -z "$stored" ]; then
    stored="$name"
    mkdir -p "$here/megatron/$name"
    # gzip -n: no name or time inside, so the same bytes give the same file
    gzip -9 -n -c "$work/out/$name/$out.bin" > "$here/megatron/$name/$out.bin.gz"
    gzip -9 -n -c "$work/out/$name/$out.idx" > "$here/megatron/$name/$out.idx.gz"
  fi
  printf '%s\t%s\t%s\n' "$name" "$stored" "${args#--input * }" >> "$here/variants.tsv"
  echo "$name: $stored"
done < "$work/variants.tsv"
