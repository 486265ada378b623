"""Writing a punkt model as NLTK's punkt_tab data (shared by the sentence tests)."""

import os


def write_punkt_tab(params, model_dir):
    """The four files of NLTK's punkt_tab format."""
    files = {
        "collocations.tab": "".join(f"{a}\t{b}\n" for a, b in sorted(params.collocations)),
        "sent_starters.txt": "".join(f"{w}\n" for w in sorted(params.sent_starters)),
        "abbrev_types.txt": "".join(f"{w}\n" for w in sorted(params.abbrev_types)),
        "ortho_context.tab": "".join(f"{w}\t{v}\n" for w, v in sorted(params.ortho_context.items())),
    }
    for name, content in files.items():
        with open(os.path.join(model_dir, name), "w", encoding="utf-8", newline="") as f:
            f.write(content)


def megatron_language_vars():
    """Megatron-LM's ``CustomLanguageVars`` (tools/preprocess_data.py, ``--keep-newlines``) as a
    class over NLTK's own PunktLanguageVars: the reference the sentence tests compare with."""
    from nltk.tokenize import punkt

    class CustomLanguageVars(punkt.PunktLanguageVars):
        _period_context_fmt = r"""
            \S*                          # the word before the end
            %(SentEndChars)s             # a candidate sentence end
            \s*                          # whitespace stays with the sentence
            (?=(?P<after_tok>
                %(NonWord)s              # punctuation follows
                |
                (?P<next_tok>\S+)        # or the next word (no \s+ before it)
            ))"""

    return CustomLanguageVars
