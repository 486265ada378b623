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
