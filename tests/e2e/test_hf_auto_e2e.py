"""transforms/tokenizer/hf_auto.py: a HuggingFace folder loaded as Megatron loads it, from any
storage; the vocabulary size (hence the dtype) is transformers' len(tokenizer).

The whole-job runs; the unit tests are in tests/transforms/tokenizer/test_hf_auto.py."""

import os
import subprocess
import sys
from tests.transforms.tokenizer.test_hf_auto import DATA


def test_transformers_is_imported_quietly(tmp_path):
    code = ("from transforms import tokenizer as tk; tk.load_tokenizer(tk.TokenizerSpec("
            f"'HuggingFaceTokenizer', model={os.path.join(DATA, 't5')!r}))")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("TRANSFORMERS_VERBOSITY", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=root, timeout=300)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout == "", proc.stderr
