"""A HuggingFace folder's Rust backend on a worker (transforms/tokenizer/hf_resolved.py): built
from what the driver resolved and self-checked, without importing transformers; the same ids, the same
description and resume key as the tokenizer the driver loaded with transformers.

The whole-job runs; the unit tests are in tests/transforms/tokenizer/test_hf_resolved.py."""

import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
import pytest

from transforms import tokenizer as tk
from tests.transforms.tokenizer.test_hf_resolved import DATA, ROOT, TEXTS, _driver_spec, _ids


# A worker: the spec as the job pickles it, the tokenizer its DoFn's setup loads, its ids,
# and which of the heavy libraries the process imported.
WORKER = """
import json, pickle, sys
from transforms import tokenizer as tk
spec = pickle.load(open(sys.argv[1], "rb"))
tok = tk.load_tokenizer(spec)
ids, lengths = tok.encode_batch(json.loads(sys.argv[2]))
print(json.dumps({"ids": [int(i) for i in ids], "lengths": [int(n) for n in lengths],
                  "backend": tok.name, "eod": tok.eod, "vocab": tok.vocab_size,
                  "transformers": "transformers" in sys.modules}))
"""


@pytest.mark.parametrize("folder", ["gemma", "qwen2", "split_special_tokens"])
def test_worker_builds_the_rust_backend_without_transformers(tmp_path, folder):
    spec = _driver_spec(folder, eod_id=None)
    assert spec.resolved is not None
    (tmp_path / "spec.pickle").write_bytes(pickle.dumps(spec))
    proc = subprocess.run([sys.executable, "-c", WORKER, str(tmp_path / "spec.pickle"),
                           json.dumps(TEXTS)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["transformers"] is False
    reference = tk.load_tokenizer(dataclasses.replace(spec, backend="reference", resolved=None))
    assert got["backend"] == spec.backend
    assert (got["eod"], got["vocab"]) == (reference.eod, reference.vocab_size)
    assert (got["ids"], got["lengths"]) == _ids(reference)


# The job's driver loads the folder with transformers; its worker processes (started after it,
# inheriting its environment) find a transformers that notes the import and refuses it.
JOB_DRIVER = """
import os, sys
from transforms.tokenizer import hf_auto
hf_auto.quiet_transformers()
os.environ["PYTHONPATH"] = os.pathsep.join([sys.argv[1], os.environ["PYTHONPATH"]])
from pipelines import tokenize
sys.exit(tokenize.run(sys.argv[2:]))
"""


POISON = """
import os
open(os.path.join(os.environ["TOKENBEAM_TEST_MARKS"], f"transformers-{os.getpid()}"), "w").close()
raise ImportError("a worker imported transformers")
"""


@pytest.mark.parametrize("folder", ["gemma", "split_special_tokens"])
def test_workers_job_without_transformers_gives_megatron_bytes(tmp_path, folder):
    import gzip

    from megatron_reference import read_pair

    poison = tmp_path / "poison" / "transformers"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text(POISON)
    marks = tmp_path / "marks"
    marks.mkdir()
    out, inputs = tmp_path / "out", tmp_path / "in"
    inputs.mkdir()
    for name in ("a.jsonl", "b.jsonl"):  # two work items: two workers
        shutil.copy(os.path.join(DATA, "corpus.jsonl"), inputs / name)
    argv = ["--input", str(inputs), "--output", str(out),
            "--json-keys", "text", "--log-interval", "0", "--workers", "2", "--append-eod",
            "--tokenizer-type", "HuggingFaceTokenizer",
            "--tokenizer-model", os.path.join(DATA, folder)]
    proc = subprocess.run([sys.executable, "-c", JOB_DRIVER, str(poison.parent), *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT,
                               "TOKENBEAM_TEST_MARKS": str(marks)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "workers: 2 " in proc.stderr, proc.stderr[-3000:]
    assert not list(marks.iterdir()), "a worker imported transformers"
    names = sorted(n[:-4] for n in os.listdir(out) if n.endswith(".idx"))
    assert len(names) == 2
    prefix = os.path.join(DATA, "megatron", f"{folder}_eod", "corpus_text_document")
    with gzip.open(prefix + ".bin.gz") as b, gzip.open(prefix + ".idx.gz") as i:
        expected = (b.read(), i.read())
    assert all(read_pair(str(out / name)) == expected for name in names)
