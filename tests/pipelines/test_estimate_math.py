"""The arithmetic of --dry-run's estimates (pipelines/tokenize/estimate.py): which files are
sampled, a rate and its standard error, a file at the sampled files' rate."""

from dataio import readers
from pipelines.tokenize import estimate


def _file(name, size, fmt="jsonl"):
    return readers.InputFile(path=f"/in/{name}", size=size, version="mtime:1")


def test_the_sampled_files_are_spread_over_the_list_per_format():
    files = [_file(f"f{i:02d}.jsonl", 100) for i in range(10)]
    files += [readers.InputFile(path="/in/z.jsonl.zst", size=5, version="mtime:1")]
    picked = estimate.chosen(files)
    assert picked == {"/in/f00.jsonl", "/in/f03.jsonl", "/in/f06.jsonl", "/in/f09.jsonl",
                      "/in/z.jsonl.zst"}


def test_a_rate_is_per_byte_and_its_error_shrinks_with_agreeing_chunks():
    steady, noisy = estimate._Chunks(), estimate._Chunks()
    for docs, nbytes in ((1, 1000), (16, 1000), (4, 4000), (8, 2000)):
        steady.add(docs, nbytes, nbytes // 4)  # 0.25 tokens per byte, whatever the documents
    for nbytes, tokens in ((1000, 100), (1000, 400), (4000, 1000), (2000, 500)):
        noisy.add(1, nbytes, tokens)
    assert steady.rate(2) == (0.25, 0.0)
    rate, error = noisy.rate(2)
    assert rate == 2000 / 8000 and 0.05 < error < 0.5
    assert estimate._Chunks([(3, 100, 25)]).rate(2) == (0.25, 1.0)  # one chunk: no spread known


def test_a_file_beyond_the_sample_gets_its_rate_and_the_widest_bounds():
    a, b = _file("a.jsonl", 1000), _file("b.jsonl", 3000)
    ea = estimate.Estimate(documents=10, tokens=250, low=200, high=300, documents_low=8,
                           documents_high=12)
    eb = estimate.Estimate(documents=30, tokens=750, low=700, high=800, documents_low=30,
                           documents_high=30)
    got = estimate.at_rate_of(_file("c.jsonl", 2000), [(a, ea), (b, eb)])
    assert (got.documents, got.tokens) == (20, 500)
    assert (got.low, got.high) == (2000 * 0.2, 2000 * 0.3)
    assert got.line() == "~20 documents (±20%), ~500 tokens (±20%, at the sampled files' rate)"


def test_texts_the_tokenizer_refuses_are_left_out_of_the_estimate():
    """NullTokenizer reads ids: a word is a bad record in the job, and the dry run's estimate
    counts the other texts (it used to end in a traceback)."""
    from transforms import tokenizer as tk

    null = tk.load_tokenizer(tk.TokenizerSpec(kind="NullTokenizer", vocab_size=100))
    assert estimate._count_tokens(null, ["1 2 3", "hello world", "4"], eod=True) == 4 + 2
