#!/usr/bin/env bash
# Runs Megatron-LM's own tools/preprocess_data.py on the inputs make_inputs.py wrote, once per
# variant listed below (all variants of a family in one interpreter: megatron_driver.py), and stores the outputs for tests/test_megatron_tokenizers.py:
#   FAMILY/megatron/STORED/corpus_text_document.{bin,idx}.gz   each distinct output once
#   FAMILY/variants.tsv   one line per variant: NAME <TAB> STORED <TAB> the flags, space-separated
# (STORED = the first variant whose output had these exact bytes). Not run by the tests.
#
#   MEGATRON_LM=/path/to/Megatron-LM-at-core_v0.16.1 \
#   MEGATRON_PYTHON=/path/to/venv/bin/python \
#   bash tests/data/megatron_tokenizers/run_megatron.sh [FAMILY...]
#
# MEGATRON_PYTHON needs megatron-core 0.16.1, torch, sentencepiece, tiktoken, transformers,
# tokenizers, six, regex, pyyaml. Flags are relative to FAMILY/ (the tests pass them as they are).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout of tag core_v0.16.1}"
: "${MEGATRON_PYTHON:?set MEGATRON_PYTHON to a python with megatron-core 0.16.1 and torch}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out=corpus_text_document

preprocess() {  # preprocess FAMILY NAME INPUT [flags...]: queue one variant
  local family="$1" name="$2" input="$3"
  shift 3
  printf '%s\t%s\t%s\n' "$name" "$here/$family" "--input $input $*" >> "$work/$family.tsv"
}

store() {  # store FAMILY: run the queued variants, keep each distinct output once
  local family="$1" dir="$here/$1" name family_dir args stored
  "$MEGATRON_PYTHON" -W ignore "$here/megatron_driver.py" "$MEGATRON_LM" "$work/$family.tsv" \
    "$work/$family" || { tail -n 30 "$work/$family"/*.log; exit 1; }
  while IFS=$'\t' read -r name family_dir args; do
    stored=""
    for prev in "$dir"/megatron/*/; do
      [ -d "$prev" ] || continue
      if gunzip -c "$prev/$out.bin.gz" | cmp -s - "$work/$family/$name/$out.bin" \
          && gunzip -c "$prev/$out.idx.gz" | cmp -s - "$work/$family/$name/$out.idx"; then
        stored="$(basename "$prev")"
        break
      fi
    done
    if [ -z "$stored" ]; then
      stored="$name"
      mkdir -p "$dir/megatron/$name"
      # gzip -n: no name or time inside, so the same bytes give the same file
      gzip -9 -n -c "$work/$family/$name/$out.bin" > "$dir/megatron/$name/$out.bin.gz"
      gzip -9 -n -c "$work/$family/$name/$out.idx" > "$dir/megatron/$name/$out.idx.gz"
    fi
    printf '%s\t%s\t%s\n' "$name" "$stored" "${args#--input * }" >> "$dir/variants.tsv"
    echo "$family/$name: $stored"
  done < "$work/$family.tsv"
}

reset() {  # reset FAMILY: forget the stored outputs of a family before regenerating them
  rm -rf "${here:?}/$1/megatron" "${here:?}/$1/variants.tsv"
}

families=("$@")
[ ${#families[@]} -gt 0 ] || families=(nulltok spm tiktoken wordpiece)
for family in "${families[@]}"; do
  reset "$family"
  case "$family" in
  nulltok)
    # --vocab-size N: EOD = N, vocabulary N + 1, dtype from N + 1 (65499 -> 65500 -> int32)
    for n in 1000 65498 65499; do
      preprocess nulltok "v${n}_eod" corpus.jsonl --tokenizer-type NullTokenizer \
        --vocab-size "$n" --append-eod
      preprocess nulltok "v${n}" corpus.jsonl --tokenizer-type NullTokenizer --vocab-size "$n"
      preprocess nulltok "v${n}_eod_legacy" corpus.jsonl --tokenizer-type NullTokenizer \
        --vocab-size "$n" --append-eod --legacy-tokenizer
    done
    ;;
  spm)
    for model in unigram bpe; do
      for type in SentencePieceTokenizer GPTSentencePieceTokenizer Llama2Tokenizer; do
        preprocess spm "${model}_${type}_eod" ../corpus.jsonl --tokenizer-type "$type" \
          --tokenizer-model "$model.model" --append-eod
        preprocess spm "${model}_${type}_eod_legacy" ../corpus.jsonl --tokenizer-type "$type" \
          --tokenizer-model "$model.model" --append-eod --legacy-tokenizer
        preprocess spm "${model}_${type}_legacy" ../corpus.jsonl --tokenizer-type "$type" \
          --tokenizer-model "$model.model" --legacy-tokenizer
      done
      preprocess spm "${model}_SentencePieceTokenizer" ../corpus.jsonl \
        --tokenizer-type SentencePieceTokenizer --tokenizer-model "$model.model"
      # issue 25: the wrapper's legacy mode with special tokens (new ids after the pieces for
      # those the model lacks, <unk> included; piece ids for <s> </s> and U+2581; ties at one
      # position go to the first listed: [SEP] before [SE); all three types run this library
      for type in SentencePieceTokenizer GPTSentencePieceTokenizer Llama2Tokenizer; do
        preprocess spm "${model}_${type}_special" ../corpus.jsonl --tokenizer-type "$type" \
          --tokenizer-model "$model.model" --tokenizer-sentencepiece-legacy \
          --tokenizer-special-tokens '<CLS>' '<s>' '<unk>' $'\u2581' '<EOD>' '[SEP]' '[SE' '</s>'
      done
      # legacy mode alone changes no id (with --append-eod Megatron fails: no eos)
      preprocess spm "${model}_SentencePieceTokenizer_splegacy" ../corpus.jsonl \
        --tokenizer-type SentencePieceTokenizer --tokenizer-model "$model.model" \
        --tokenizer-sentencepiece-legacy
      # flags preprocess_data takes and ignores: same bytes as ${model}_..._eod(_legacy)
      preprocess spm "${model}_SentencePieceTokenizer_eod_ignored" ../corpus.jsonl \
        --tokenizer-type SentencePieceTokenizer --tokenizer-model "$model.model" --append-eod \
        --tokenizer-metadata tokenizer_metadata.json --vocab-extra-ids 7 \
        --padded-vocab-size 4096 --vocab-size 77 --tiktoken-special-tokens '<X>'
      preprocess spm "${model}_SentencePieceTokenizer_eod_legacy_ignored" ../corpus.jsonl \
        --tokenizer-type SentencePieceTokenizer --tokenizer-model "$model.model" --append-eod \
        --legacy-tokenizer --tokenizer-sentencepiece-legacy --tokenizer-special-tokens '<X>' \
        --tokenizer-metadata tokenizer_metadata.json --vocab-extra-ids 3 --padded-vocab-size 2048
    done
    ;;
  tiktoken)
    # vocab.json holds 1024 ranks. uint16: 1000 special ids (Megatron's default) + 1024;
    # a --vocab-size below that keeps the first ranks only; int32: 65000 special ids.
    for legacy in "" --legacy-tokenizer; do
      sfx="${legacy:+_legacy}"
      for pattern in v1 v2; do
        preprocess tiktoken "${pattern}_eod$sfx" ../corpus.jsonl --tokenizer-type TikTokenizer \
          --tokenizer-model vocab.json --tiktoken-pattern "$pattern" --vocab-size 2024 \
          --append-eod $legacy
      done
      preprocess tiktoken "v2$sfx" ../corpus.jsonl --tokenizer-type TikTokenizer \
        --tokenizer-model vocab.json --tiktoken-pattern v2 --vocab-size 2024 $legacy
      preprocess tiktoken "v2_first800_eod$sfx" ../corpus.jsonl --tokenizer-type TikTokenizer \
        --tokenizer-model vocab.json --tiktoken-pattern v2 --vocab-size 1800 --append-eod $legacy
      preprocess tiktoken "v2_special16_eod$sfx" ../corpus.jsonl --tokenizer-type TikTokenizer \
        --tokenizer-model vocab.json --tiktoken-pattern v2 --vocab-size 1040 \
        --tiktoken-num-special-tokens 16 --append-eod $legacy
      preprocess tiktoken "v2_int32_eod$sfx" ../corpus.jsonl --tokenizer-type TikTokenizer \
        --tokenizer-model vocab.json --tiktoken-pattern v2 --vocab-size 66024 \
        --tiktoken-num-special-tokens 65000 --append-eod $legacy
      # issue 25: flags preprocess_data takes and ignores (same bytes as v2_eod$sfx);
      # --tiktoken-special-tokens is read by nothing preprocess_data calls
      preprocess tiktoken "v2_eod_ignored$sfx" ../corpus.jsonl --tokenizer-type TikTokenizer \
        --tokenizer-model vocab.json --tiktoken-pattern v2 --vocab-size 2024 --append-eod \
        --tiktoken-special-tokens '<unk>' '<s>' '</s>' '<x>' --tokenizer-metadata \
        tokenizer_metadata.json --vocab-extra-ids 5 --padded-vocab-size 4096 $legacy
    done
    ;;
  wordpiece)
    # --legacy-tokenizer only: core_v0.16.1's default path for BertWordPiece* loads the
    # bert-large-(un)cased tokenizer config from the HuggingFace hub (no network here).
    for type in BertWordPieceLowerCase BertWordPieceCase; do
      preprocess wordpiece "${type}_eod_legacy" ../corpus.jsonl --tokenizer-type "$type" \
        --vocab-file vocab.txt --append-eod --legacy-tokenizer
      preprocess wordpiece "${type}_legacy" ../corpus.jsonl --tokenizer-type "$type" \
        --vocab-file vocab.txt --legacy-tokenizer
    done
    ;;
  *) echo "unknown family $family" >&2; exit 2 ;;
  esac
  store "$family"
done
