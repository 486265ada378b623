"""transforms/tokenizer/registry.py: every Megatron tokenizer type is declared once, registered or
refused with a reason, and what each kind declares (flags, spec fields, class, backends) exists."""

import argparse
import dataclasses

import pytest

from pipelines import options as opts
from transforms import tokenizer as tk
from transforms.tokenizer import registry

# The choices of --tokenizer-type in Megatron-LM core_v0.16.1 (megatron/training/arguments.py,
# _add_tokenizer_args, which tools/preprocess_data.py's parser uses; flags.tsv in
# tests/data/megatron_cli lists that parser's flags).
MEGATRON_TYPES = ("BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer",
                  "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HuggingFaceTokenizer",
                  "Llama2Tokenizer", "TikTokenizer", "MultimodalTokenizer", "NullTokenizer",
                  "NullMultimodalTokenizer", "SFTTokenizer")


def _option_strings() -> set[str]:
    parser = argparse.ArgumentParser()
    opts.TokenizerFlags._add_argparse_args(parser)
    return {s for action in parser._actions for s in action.option_strings}


def test_every_megatron_type_is_registered_or_refused():
    assert set(registry.KINDS) | set(registry.REFUSED) == set(MEGATRON_TYPES)
    assert not set(registry.KINDS) & set(registry.REFUSED)


@pytest.mark.parametrize("name", sorted(registry.REFUSED))
def test_a_refused_type_says_why_in_one_line(name):
    for refuse in (lambda: registry.resolve_kind(name, None), lambda: registry.kind(name)):
        with pytest.raises(tk.TokenizerConfigError) as err:
            refuse()
        message = str(err.value)
        assert name in message and registry.REFUSED[name] in message and "\n" not in message


def test_the_options_offer_exactly_the_registered_kinds():
    parser = argparse.ArgumentParser()
    opts.TokenizerFlags._add_argparse_args(parser)
    choices = next(a.choices for a in parser._actions if "--tokenizer-type" in a.option_strings)
    assert list(choices) == list(registry.KINDS)
    library = next(a.choices for a in parser._actions
                   if "--tokenizer-library" in a.option_strings)
    assert all(registry.LIBRARY_ALIASES[name] in registry.KINDS for name in library)


@pytest.mark.parametrize("name", list(registry.KINDS))
def test_what_a_kind_declares_exists(name):
    kind = registry.KINDS[name]
    assert kind.name == name
    flags = _option_strings()
    assert set(kind.flags) <= flags, set(kind.flags) - flags
    assert {need.flag for need in kind.needs} <= set(kind.flags)
    assert set(kind.file_kinds) <= set(kind.flags)
    fields = {f.name for f in dataclasses.fields(tk.TokenizerSpec)}
    assert {need.attr for need in kind.needs} <= fields
    assert {field for field, _ in kind.reference_only} <= fields
    assert {flag for _, flag in kind.reference_only} <= flags
    assert issubclass(kind.factory, tk.Tokenizer)
    assert kind.fast in (None, registry.FAST_FROM_SENTENCEPIECE, registry.FAST_FROM_RUST)
    assert kind.special_tokens in (None, "always", "default")
    assert kind.family in ("huggingface", "sentencepiece", "simple")


class _ToyTokenizer(tk.Tokenizer):
    library = "builtin"

    def __init__(self, spec):
        self.vocab_size, self.eod = 256, 0

    def _encode_plain(self, texts):
        return [list(t.encode()) for t in texts]


def test_a_new_kind_is_one_declaration(monkeypatch):
    """Declared in the registry alone, a kind loads, has a backend, files and options, and its
    flags are checked; nothing else names it."""
    toy = registry.Kind("ToyTokenizer", family="simple", factory=_ToyTokenizer,
                        flags=("--vocab-size",))
    monkeypatch.setitem(registry.KINDS, "ToyTokenizer", toy)
    spec = tk.TokenizerSpec("ToyTokenizer", backend="auto")
    assert tk.resolve_kind("ToyTokenizer", None) == "ToyTokenizer"
    assert tk.choose_backend(spec, []) == ("reference", "ToyTokenizer has no fast backend")
    tok = tk.load_tokenizer(dataclasses.replace(spec, backend="reference"))
    ids, lengths = tok.encode_batch(["ab", "c"])
    assert ids.tolist() == [97, 98, 99] and lengths.tolist() == [2, 1]
    assert tk.spec_files(spec) == [] and tk.spec_options(spec) == {}
    assert toy.mismatch({"--tokenizer-model": "x"}) is None
