"""dataio.dataset: packed windows, document ids from the .idx, masks, splits, URLs, ordering.

The whole-job runs; the unit tests are in tests/dataio/test_dataset.py."""

import json
import os
import numpy as np
from dataio.dataset import get_dataset
from pipelines import demo
from tests.dataio.test_dataset import _concat
from tests.dataio.test_dataset import corpus  # noqa: F401 (fixture)


def test_on_real_tokenize_output(tmp_path):
    """The loader over what `python -m pipelines.tokenize` writes, holdout included."""
    from tokenizers import Tokenizer

    from pipelines import tokenize

    made = demo.make_demo(str(tmp_path / "demo"), files=2, docs_per_file=80)
    out = tmp_path / "out"
    rc = tokenize.run(["--runner=FnApiRunner", "--input", os.path.join(made["corpus"], "*.jsonl"),
                       "--output", str(out), "--tokenizer-type", "HuggingFaceTokenizer",
                       "--tokenizer-model", made["tokenizer"], "--json-keys", "text",
                       "--append-eod", "--holdout-fraction", "0.1", "--id-key", "id"])
    assert rc == 0
    tok = Tokenizer.from_file(os.path.join(made["tokenizer"], "tokenizer.json"))
    eod = tok.token_to_id("<|endoftext|>")
    texts = [json.loads(line)["text"] for name in sorted(os.listdir(made["corpus"]))
             for line in open(os.path.join(made["corpus"], name), encoding="utf-8")]

    train = get_dataset(str(out), 50)
    holdout = get_dataset(str(out), 7, split="holdout")
    assert train.num_files() == holdout.num_files() == 2
    assert train.vocab_size == holdout.vocab_size == tok.get_vocab_size()

    def decoded(ds):
        return [tok.decode(ds.document(j).tolist(), skip_special_tokens=True)
                for j in range(ds.num_documents())]

    train_texts, holdout_texts = decoded(train), decoded(holdout)
    assert sorted(train_texts + holdout_texts) == sorted(texts)  # lossless, nothing lost
    assert 0 < len(holdout_texts) < len(texts) // 4
    it = iter(texts)  # training documents keep the input order
    assert all(any(t == u for u in it) for t in train_texts)

    docs = [tok.encode(t).ids + [eod] if t else [] for t in train_texts]
    stream = np.concatenate([np.asarray(d, dtype=np.int64) for d in docs])
    doc_ids = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    assert train.num_tokens() == len(stream)
    n = len(train) * 50
    np.testing.assert_array_equal(_concat(train, "token_ids"), stream[:n])
    np.testing.assert_array_equal(_concat(train, "document_ids"), doc_ids[:n])
