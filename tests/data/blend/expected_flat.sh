#!/usr/bin/env bash
# Megatron-LM data blend written by tokenbeam (python -m pipelines.blend).
# 3 of 4 shards, 1000 tokens to sample.
# Use: source this file, then pass "${DATA_PATH[@]}" to pretrain_gpt.py.
#   ar: probability 0.25
#   en: probability 0.75
DATA_PATH=(
  --data-path
  "0.25" "/data/tok/ar_books_a_split_00000_text_document_dc=10_sc=10_tc=200"
  "0.3" "/data/tok/en_books_a_split_00000_text_document_dc=4_sc=4_tc=100"
  "0.45" "/data/tok/en_web_a_split_00000_text_document_dc=9_sc=9_tc=300"
)
