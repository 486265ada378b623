#!/usr/bin/env bash
# Runs Megatron-LM's own tools/preprocess_data.py --split-sentences on corpus.jsonl with the punkt
# model in nltk_data/ (both made by make_inputs.py) and tests/data/megatron_preprocess/tokenizer,
# in four variants, and stores the outputs in OUT_DIR (default: this folder):
#   megatron[_keep_newlines][_no_eod]/corpus_text_sentence.{bin,idx}
#   megatron[_keep_newlines]/corpus_ss.jsonl   (Megatron's sentence lists; --append-eod runs)
# Not run by the tests (the outputs are committed), except by the live test when a Megatron python
# is given (tests/test_megatron_sentences.py).
#
#   MEGATRON_LM=/path/to/Megatron-LM-at-core_v0.16.1 \
#   MEGATRON_PYTHON=/path/to/venv/bin/python \
#   bash tests/data/megatron_sentences/run_megatron.sh [OUT_DIR]
#
# MEGATRON_PYTHON needs megatron-core 0.16.1, torch, transformers, six, regex, pyyaml and
# nltk 3.10.4 (punkt's sentences depend on the NLTK version).
#
# Where Megatron finds the punkt model: preprocess_data.py loads "nltk:tokenizers/punkt/
# english.pickle" when NLTK_DATA is unset, which NLTK >= 3.9 answers with the punkt_tab model
# tokenizers/punkt_tab/english/ found on its data path. So NLTK_DATA is unset here and HOME is a
# scratch folder whose nltk_data/ (the first entry of NLTK's default data path) is a copy of
# ours. (With NLTK_DATA set, Megatron instead opens $NLTK_DATA/tokenizers/punkt/english.pickle as
# a file: a legacy pickle, which a punkt_tab install does not have.) Before that, main() calls
# nltk.download("punkt"): offline it prints "[nltk_data] Error loading punkt: ..." and returns
# False, and the run goes on with our model; a download would change the sentences, so the
# script stops if anything appears in the scratch nltk_data/ beyond our files.
#
# With --partitions 1 (the default), Megatron's first run only writes the sentence-split file
# (INPUT_ss.jsonl, next to the input) and returns; a second identical run finds that file and
# encodes it. Each variant therefore runs twice, on its own copy of the input (a stale _ss file
# from another variant would be reused as it is).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out_dir="$(mkdir -p "${1:-$here}" && cd "${1:-$here}" && pwd)"
: "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout of tag core_v0.16.1}"
: "${MEGATRON_PYTHON:?set MEGATRON_PYTHON to a python with megatron-core 0.16.1, torch and nltk}"
tokenizer="$here/../megatron_preprocess/tokenizer"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home"
cp -R "$here/nltk_data" "$work/home/nltk_data"
(cd "$work/home/nltk_data" && find . -type f | sort) > "$work/nltk_files"

megatron() {  # megatron VARIANT_DIR [flags...]: one run of preprocess_data.py
  local dir="$1"
  shift
  env -u NLTK_DATA HOME="$work/home" PYTHONPATH="$MEGATRON_LM" "$MEGATRON_PYTHON" -W ignore \
    "$MEGATRON_LM/tools/preprocess_data.py" \
    --input "$dir/corpus.jsonl" \
    --output-prefix "$dir/corpus" \
    --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model "$tokenizer" \
    --json-keys text \
    --split-sentences \
    --workers 1 \
    "$@" >> "$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
}

variant() {  # variant NAME [flags...]
  local name="$1" dir="$work/$1"
  shift
  mkdir -p "$dir"
  cp "$here/corpus.jsonl" "$dir/"
  megatron "$dir" "$@"
  test -f "$dir/corpus_ss.jsonl" && test ! -e "$dir/corpus_text_sentence.idx"
  megatron "$dir" "$@"
  grep -q "Error loading punkt" "$dir.log"  # the download was tried and failed, twice
  (cd "$work/home/nltk_data" && find . -type f | sort) | cmp - "$work/nltk_files"
  rm -rf "${out_dir:?}/$name"
  mkdir -p "$out_dir/$name"
  cp "$dir/corpus_text_sentence.bin" "$dir/corpus_text_sentence.idx" "$out_dir/$name/"
  case "$name" in *_no_eod) ;; *) cp "$dir/corpus_ss.jsonl" "$out_dir/$name/" ;; esac
  echo "$name: stored"
}

variant megatron --append-eod
variant megatron_keep_newlines --append-eod --keep-newlines
variant megatron_no_eod
variant megatron_keep_newlines_no_eod --keep-newlines
for keep in "" _keep_newlines; do  # --append-eod changes no sentence
  cmp "$work/megatron$keep/corpus_ss.jsonl" "$work/megatron${keep}_no_eod/corpus_ss.jsonl"
done
