"""dataio.dataset: packed windows, document ids from the .idx, masks, splits, URLs, ordering.

The datasets are real: demo documents tokenized by a byte-level BPE trained here (with EOD
appended, Megatron-style: empty documents stay empty), written with the indexed writer into a
folder shaped like tokenize output (shards, holdout/, metadata.json, a leftover temporary file).
"""

import http.server
import json
import os
import pickle
import re
import shutil
import threading

import fsspec
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataio import dataset as dsmod
from dataio import dataset_find
from dataio import indexed as ix
from dataio.dataset import Window, get_dataset, shuffled_indices
from pipelines import demo

VOCAB = 600


def _tokenize(tok, texts, eod):
    out = []
    for enc, text in zip(tok.encode_batch(texts), texts):
        out.append(enc.ids + [eod] if text else [])
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A tokenize-shaped folder; returns what the tests compare against."""
    from tokenizers import Tokenizer

    root = tmp_path_factory.mktemp("loader")
    records = [list(demo.documents(seed, 60, long_every=23, empty_every=9)) for seed in (1, 2, 3)]
    texts = [[r["text"] for r in recs] for recs in records]
    tok_dir = demo.train_bpe([t for ts in texts for t in ts if t], str(root / "tokenizer"),
                             vocab_size=VOCAB)
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    eod = tok.token_to_id("<|endoftext|>")
    out = root / "out"
    docs = []  # per shard, in name order: list of token lists
    for k, ts in enumerate(texts):
        shard_docs = _tokenize(tok, ts, eod)
        prefix = str(out / f"demo_part_{k:02d}_text_document")
        if k == 1:
            # Sentence-level shard: several sequences per document, some of length 0.
            with ix.IndexedDatasetWriter(prefix, dtype=np.uint16) as w:
                for d in shard_docs:
                    cut = [len(d) // 3, len(d) // 3, 2 * len(d) // 3]
                    lengths = np.diff([0, *cut, len(d)]).tolist() if d else None
                    w.add_document(d, lengths)
        else:
            ix.write_documents(prefix, shard_docs, dtype=np.uint16)
        docs.append(shard_docs)
    # A shard of only empty documents sorts between part_00 and part_01.
    ix.write_documents(str(out / "demo_part_00a_text_document"), [[], []], dtype=np.uint16)
    docs.insert(1, [[], []])
    holdout_docs = _tokenize(tok, ["Holdout one.", "", "Holdout two!"], eod)
    ix.write_documents(str(out / "holdout" / "demo_part_00_text_document"), holdout_docs,
                       dtype=np.uint16)
    (out / "metadata.json").write_text(json.dumps({"tokenizer": {"vocab_size": VOCAB}}))
    # An interrupted write leaves only temporary names; the loader must not see them.
    stray = ix.IndexedDatasetWriter(str(out / "zz_interrupted"), dtype=np.uint16)
    stray.add_document([1, 2, 3])
    stray._bin.flush()
    flat_docs = [d for shard in docs for d in shard]
    return {
        "root": root, "out": str(out), "tok": tok, "eod": eod,
        "texts": texts,
        "docs": flat_docs,
        "stream": np.concatenate([np.asarray(d, dtype=np.int64) for d in flat_docs]),
        "doc_of_token": np.repeat(np.arange(len(flat_docs)), [len(d) for d in flat_docs]),
        "holdout_docs": holdout_docs,
    }


def _concat(ds, field):
    return np.concatenate([getattr(ds[i], field) for i in range(len(ds))])


@pytest.mark.parametrize("context_length", [1, 7, 128, 1000])
def test_windows_concatenated_equal_the_token_stream(corpus, context_length):
    ds = get_dataset(corpus["out"], context_length)
    stream = corpus["stream"]
    assert ds.num_tokens() == len(stream)
    assert ds.num_files() == 4
    assert len(ds) == len(stream) // context_length
    assert ds.dtype == np.uint16 and ds.vocab_size == VOCAB
    tokens = _concat(ds, "token_ids")
    assert tokens.dtype == np.uint16
    np.testing.assert_array_equal(tokens, stream[:len(ds) * context_length])


@pytest.mark.parametrize("context_length,stride", [(5, 256), (64, 3), (777, 2)])
def test_document_ids_change_exactly_at_idx_boundaries(corpus, context_length, stride,
                                                       monkeypatch):
    monkeypatch.setattr(dsmod._SortedSearch, "STRIDE", stride)  # small: many sample blocks
    ds = get_dataset(corpus["out"], context_length)
    ids = _concat(ds, "document_ids")
    np.testing.assert_array_equal(ids, corpus["doc_of_token"][:len(ids)])
    # The same from the .idx side: jumps sit where documents start, and skip the empty ones.
    starts = np.cumsum([0] + [len(d) for d in corpus["docs"]])[:-1]
    nonempty = np.flatnonzero([len(d) > 0 for d in corpus["docs"]])
    jumps = np.flatnonzero(np.diff(ids)) + 1
    np.testing.assert_array_equal(jumps, starts[nonempty][1:][starts[nonempty][1:] < len(ids)])
    assert any(len(d) == 0 for d in corpus["docs"][:nonempty[-1]]), "fixture needs empty docs"


def test_windows_span_shard_boundaries(corpus):
    ds = get_dataset(corpus["out"], 128)
    first_shard_tokens = sum(len(d) for d in corpus["docs"][:60])
    i = first_shard_tokens // 128
    window = ds[i]
    assert i * 128 < first_shard_tokens < (i + 1) * 128
    assert window.document_ids[0] < 60 <= window.document_ids[-1] - 2  # 2 empty docs between
    np.testing.assert_array_equal(window.token_ids, corpus["stream"][i * 128:(i + 1) * 128])


@given(st.lists(st.integers(0, 40), max_size=60), st.integers(-2, 45), st.integers(1, 5))
def test_sorted_search_matches_numpy(values, x, stride):
    values = np.sort(np.asarray(values, dtype=np.int64))
    raw = bytearray(2 + 8 * len(values))  # unaligned, like the arrays of an .idx
    unaligned = np.frombuffer(raw, dtype="<i8", offset=2)
    unaligned[:] = values
    search = dsmod._SortedSearch(unaligned)
    search.STRIDE = stride
    search.sample = np.ascontiguousarray(unaligned[::stride])
    assert search.right(x) == int(np.searchsorted(values, x, side="right"))


def _reference_mask(ids):
    n = len(ids)
    return np.array([[s <= t and ids[s] == ids[t] for s in range(n)] for t in range(n)])


def test_mask_equals_brute_force(corpus):
    ds = get_dataset(corpus["out"], 48)
    checked_multi = 0
    for i in list(range(0, len(ds), max(1, len(ds) // 25))) + [len(ds) - 1]:
        window = ds[i]
        mask = window.document_mask()
        assert mask.dtype == bool and mask.shape == (48, 48)
        np.testing.assert_array_equal(mask, _reference_mask(window.document_ids))
        ids = window.document_ids
        expected_pos = [sum(1 for s in range(t + 1) if ids[s] == ids[t]) - 1 for t in range(48)]
        np.testing.assert_array_equal(window.position_ids(), expected_pos)
        checked_multi += len(np.unique(ids)) > 1
    assert checked_multi >= 3


def test_mask_of_hand_made_window():
    w = Window(np.arange(6, dtype=np.uint16), np.array([4, 4, 7, 7, 7, 8]))
    np.testing.assert_array_equal(w.segment_bounds(), [0, 2, 5, 6])
    np.testing.assert_array_equal(w.document_mask(), _reference_mask(w.document_ids))


def test_indexing(corpus):
    ds = get_dataset(corpus["out"], 100)
    np.testing.assert_array_equal(ds[np.int64(3)].token_ids, ds[3].token_ids)
    np.testing.assert_array_equal(ds[np.uint8(2)].token_ids, ds[2].token_ids)
    np.testing.assert_array_equal(ds[-1].token_ids, ds[len(ds) - 1].token_ids)
    for bad in (len(ds), -len(ds) - 1):
        with pytest.raises(IndexError, match="out of range"):
            ds[bad]
    with pytest.raises(TypeError, match="integer"):
        ds[1.0]
    with pytest.raises(ValueError, match="context_length"):
        get_dataset(corpus["out"], 0)


def test_whole_documents_decode_to_the_input_text(corpus):
    ds = get_dataset(corpus["out"], 16)
    tok = corpus["tok"]
    texts = corpus["texts"][0]
    for j in range(12):
        ids = ds.document(j)
        assert tok.decode(ids.tolist(), skip_special_tokens=True) == texts[j]
        assert (len(ids) == 0) == (texts[j] == "")


def test_splits(corpus):
    out = corpus["out"]
    train = get_dataset(out, 10)
    assert len(get_dataset(out, 10, split="train")) == len(train)
    holdout = get_dataset(out, 3, split="holdout")
    flat = np.concatenate([np.asarray(d) for d in corpus["holdout_docs"]])
    np.testing.assert_array_equal(_concat(holdout, "token_ids"), flat[:len(holdout) * 3])
    assert holdout.vocab_size == VOCAB  # from the parent's metadata.json
    head, tail = get_dataset(out, 10, split=(0, 0.25)), get_dataset(out, 10, split=(0.25, 1))
    assert len(head) + len(tail) == len(train) and len(head) == len(train) // 4
    np.testing.assert_array_equal(tail[0].token_ids, train[len(head)].token_ids)
    with pytest.raises(ValueError, match="split"):
        get_dataset(out, 10, split="valid")
    with pytest.raises(ValueError, match="fractions"):
        get_dataset(out, 10, split=(0.5, 0.2))
    prefix = os.path.join(out, "demo_part_00_text_document")
    with pytest.raises(ValueError, match="holdout prefixes"):
        get_dataset([prefix], 10, split="holdout")


def test_prefix_list_bin_paths_and_no_metadata(corpus, tmp_path):
    out = corpus["out"]
    names = ["demo_part_02_text_document.bin", "demo_part_00_text_document.idx"]
    for name in names:  # copy without metadata.json
        for ext in (".bin", ".idx"):
            shutil.copy(os.path.join(out, name[:-4] + ext), tmp_path)
    ds = get_dataset([str(tmp_path / n) for n in names], 50)  # the order given, not name order
    assert ds.num_files() == 2 and ds.vocab_size is None
    first = np.concatenate([np.asarray(d) for d in corpus["docs"][-60:]])
    np.testing.assert_array_equal(ds[0].token_ids, first[:50])
    assert ds[0].document_ids[0] == 0


def test_errors_name_the_file(corpus, tmp_path):
    with pytest.raises(FileNotFoundError, match="no .bin/.idx datasets"):
        get_dataset(str(tmp_path), 8)
    with pytest.raises(FileNotFoundError, match="no holdout/"):
        get_dataset(str(tmp_path), 8, split="holdout")
    with pytest.raises(FileNotFoundError, match="nope"):
        get_dataset([str(tmp_path / "nope")], 8)
    ix.write_documents(str(tmp_path / "a"), [[1, 2]], dtype=np.uint16)
    ix.write_documents(str(tmp_path / "b"), [[1, 2]], dtype=np.int32)
    with pytest.raises(ValueError, match="different dtypes"):
        get_dataset(str(tmp_path), 1)
    os.remove(tmp_path / "b.idx")
    with open(tmp_path / "a.bin", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(ix.FormatError, match=r"a\.bin is 6 bytes.*pipelines.validate"):
        get_dataset(str(tmp_path), 1)


def test_metadata_vocab_sizes_must_agree(tmp_path):
    for name, vocab in (("x", 100), ("y", 200)):
        ix.write_documents(str(tmp_path / name / "d"), [[1, 2]], dtype=np.uint16)
        (tmp_path / name / "metadata.json").write_text(json.dumps({"tokenizer":
                                                                   {"vocab_size": vocab}}))
    with pytest.raises(ValueError, match="different vocab sizes"):
        get_dataset([str(tmp_path / "x" / "d"), str(tmp_path / "y" / "d")], 1)


def test_memory_url_equals_local(corpus, monkeypatch):
    monkeypatch.setattr(dsmod, "REMOTE_MAX_OPEN", 2)  # exercise closing the least recently used
    fs = fsspec.filesystem("memory")
    base = "/loader-test"
    for dirpath, _, files in os.walk(corpus["out"]):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), corpus["out"])
            with open(os.path.join(dirpath, name), "rb") as src:
                fs.pipe(f"{base}/{rel}", src.read())
    try:
        local = get_dataset(corpus["out"], 96)
        remote = get_dataset(f"memory://{base}", 96)
        assert remote.num_files() == local.num_files() and len(remote) == len(local)
        assert remote.vocab_size == VOCAB and not remote.shards[0].local
        for i in range(len(local)):
            np.testing.assert_array_equal(remote[i].token_ids, local[i].token_ids)
            np.testing.assert_array_equal(remote[i].document_ids, local[i].document_ids)
        assert sum(s._file is not None for s in remote.shards) <= 2
        holdout = get_dataset(f"memory://{base}", 2, split="holdout")
        assert holdout.num_tokens() == sum(len(d) for d in corpus["holdout_docs"])
    finally:
        fs.rm(base, recursive=True)


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with HTTP Range support; records every (file, bytes) served."""

    served: list = []

    def log_message(self, *args):
        pass

    def send_head(self):
        path = self.translate_path(self.path)
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not os.path.isfile(path) or match is None:
            if self.command == "GET" and os.path.isfile(path):
                self.served.append((os.path.basename(path), None))  # a whole-file read
            return super().send_head()
        size = os.path.getsize(path)
        start = int(match.group(1))
        end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
        f = open(path, "rb")
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.served.append((os.path.basename(path), end - start + 1))
        return _Limited(f, end - start + 1)


class _Limited:
    def __init__(self, f, n):
        self.f, self.left = f, n

    def read(self, size=-1):
        size = self.left if size < 0 else min(size, self.left)
        data = self.f.read(size)
        self.left -= len(data)
        return data

    def close(self):
        self.f.close()


@pytest.fixture
def http_root(tmp_path):
    pytest.importorskip("aiohttp", reason="fsspec's http filesystem needs aiohttp")
    handler = type("Handler", (_RangeHandler,), {"served": []})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: handler(*a, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield tmp_path, f"http://127.0.0.1:{server.server_address[1]}", handler.served
    finally:
        server.shutdown()
        server.server_close()


def test_http_reads_bin_by_ranges_only(http_root):
    root, url, served = http_root
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 3000, 5000)
    with ix.IndexedDatasetWriter(str(root / "big"), dtype=np.uint16) as w:
        w.add_batch(rng.integers(0, 60000, int(lengths.sum())), lengths, np.ones_like(lengths))
    bin_size = os.path.getsize(root / "big.bin")
    reads = 3
    assert bin_size > 4 * reads * dsmod.REMOTE_BLOCK_SIZE
    local = get_dataset([str(root / "big")], 512)
    remote = get_dataset([f"{url}/big"], 512)
    served.clear()
    for i in (0, len(local) // 2, len(local) - 1):
        np.testing.assert_array_equal(remote[i].token_ids, local[i].token_ids)
        np.testing.assert_array_equal(remote[i].document_ids, local[i].document_ids)
    bin_reads = [n for name, n in served if name == "big.bin"]
    assert bin_reads and None not in bin_reads, served  # only ranged GETs of the .bin
    # Each window touches at most two cache blocks.
    assert sum(bin_reads) <= 2 * reads * dsmod.REMOTE_BLOCK_SIZE, (sum(bin_reads), bin_size)


def test_pickle_round_trip_reopens_lazily(corpus):
    ds = get_dataset(corpus["out"], 64)
    first = ds[5]
    clone = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(clone[5].token_ids, first.token_ids)
    np.testing.assert_array_equal(clone[5].document_ids, first.document_ids)


def test_shuffled_order_is_deterministic(corpus):
    ds = get_dataset(corpus["out"], 32)
    a, b, c = ds.permutation(1), ds.permutation(1), ds.permutation(2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, ds.permutation(1, epoch=1))
    np.testing.assert_array_equal(np.sort(a), np.arange(len(ds)))
    view = ds.shuffled(1)
    assert len(view) == len(ds)
    np.testing.assert_array_equal(view[0].token_ids, ds[a[0]].token_ids)
    np.testing.assert_array_equal(shuffled_indices(10, seed=3), shuffled_indices(10, seed=3))


def test_torch_adapter(corpus):
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed (optional dependency); the adapter is untested here")
    from torch.utils.data import DataLoader, DistributedSampler

    from dataio.torch_dataset import TorchTokenDataset

    ds = get_dataset(corpus["out"], 32)
    tds = TorchTokenDataset(ds, with_mask=True)
    item = tds[3]
    assert item["input_ids"].tolist() == ds[3].token_ids.tolist()
    assert item["document_ids"].tolist() == ds[3].document_ids.tolist()
    assert item["attention_mask"].shape == (32, 32)
    sampler = DistributedSampler(tds, num_replicas=2, rank=1, shuffle=True, seed=0)
    batch = next(iter(DataLoader(tds, batch_size=4, sampler=sampler, num_workers=2)))
    assert batch["input_ids"].shape == (4, 32)


# --- finding datasets: the one home of every command's dataset lookup ----------------------------

def _pairs(folder, names):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        ix.write_documents(str(folder / name), [[1, 2]], dtype=np.uint16)
    return folder


def test_list_datasets_incomplete_modes(tmp_path, capsys):
    from dataio import readers

    folder = _pairs(tmp_path / "d", ["a", "b", "c"])
    os.remove(folder / "b.idx")  # a lone .bin: an unfinished write
    os.remove(folder / "c.bin")  # a lone .idx
    (folder / f".a.bin{ix.TEMPORARY_MARK}x").write_bytes(b"")
    (folder / "holdout").mkdir()
    _pairs(folder / "holdout", ["h"])
    names = lambda found: [os.path.basename(p) for p in found]  # noqa: E731
    with pytest.raises(readers.InputError, match=r"b\.bin has no b\.idx.*--skip-incomplete") as info:
        dataset_find.list_datasets(str(folder))
    assert info.value.exit_status == 1
    assert names(dataset_find.list_datasets(str(folder), incomplete="skip")) == ["a"]
    assert "warning: skipped" in capsys.readouterr().err
    assert names(dataset_find.list_datasets(str(folder), incomplete="keep")) == ["a", "b", "c"]
    assert names(dataset_find.list_datasets(str(folder), incomplete="idx")) == ["a", "c"]
    assert dataset_find.list_datasets(str(folder), incomplete="keep")[0] == str(folder / "a")
    with pytest.raises(readers.InputError, match="is not a folder"):
        dataset_find.list_datasets(str(folder / "a.bin"))
    with pytest.raises(ValueError, match="incomplete="):
        dataset_find.list_datasets(str(folder), incomplete="maybe")


def test_find_datasets_forms_and_duplicates(tmp_path):
    from dataio import readers

    folder = _pairs(tmp_path / "d", ["x_2", "x_10", "y"])
    every = sorted(str(folder / n) for n in ("x_2", "x_10", "y"))
    assert dataset_find.find_datasets([str(folder)]) == every
    assert dataset_find.find_datasets([str(folder / "x_*.bin")]) == every[:2]
    # one dataset spelled three ways is found once
    assert dataset_find.find_datasets([str(folder / "y"), str(folder) + "/./y.idx",
                                str(folder / "y.bin")]) == [str(folder / "y")]
    with pytest.raises(readers.InputError, match="no .bin/.idx datasets match") as info:
        dataset_find.find_datasets([str(folder / "z*")])
    assert info.value.exit_status == 1
    # "keep" (validate): a path naming nothing stands for its prefix; an empty folder adds none
    (tmp_path / "empty").mkdir()
    assert dataset_find.find_datasets([str(tmp_path / "nothing.bin"), str(tmp_path / "empty")],
                               incomplete="keep") == [str(tmp_path / "nothing")]
    os.remove(folder / "y.idx")
    with pytest.raises(readers.InputError, match=r"y\.bin has no y\.idx"):
        dataset_find.find_datasets([str(folder / "y.bin")])
    assert dataset_find.find_datasets([str(folder / "*")], incomplete="skip") == every[:2]


def test_find_datasets_on_urls():
    mem = fsspec.filesystem("memory")
    for name in ("a", "b"):
        for ext in (".bin", ".idx"):
            mem.pipe(f"/find-test/{name}{ext}", b"")
    try:
        # paths keep the URL form that fsutil.glob gives ("memory:///find-test/...")
        found = dataset_find.find_datasets(["memory://find-test"])
        assert [p.rsplit("/find-test/", 1) for p in found] == [["memory://", "a"],
                                                               ["memory://", "b"]]
        assert dataset_find.find_datasets(["memory://find-test/b.idx"]) == [found[1]]
    finally:
        mem.rm("/find-test", recursive=True)


def test_input_error_is_one_class_with_its_status():
    from runtime import errors
    from dataio import readers

    assert issubclass(readers.InputError, errors.ConfigError)
    assert readers.InputError("x").exit_status == errors.EXIT_USAGE
    assert pickle.loads(pickle.dumps(readers.InputError("y", exit_status=1))).exit_status == 1
