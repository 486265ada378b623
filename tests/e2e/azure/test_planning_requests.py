"""Discovery on Azure takes sizes and etags from the listing: a few requests for many blobs, and
exactly the InputFiles (so the resume keys) that asking each blob gives."""

from dataio import azure
from dataio import discovery
from dataio import fs as fsutil


def test_discover_lists_blobs_without_a_request_each(azurite, container):
    client = azurite.service().get_container_client(container)
    for i in range(40):
        client.upload_blob(f"corpus/part_{i:03d}.jsonl", b'{"text": "x"}\n' * (i + 1))
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    corpus = azurite.url(container, "corpus")
    expected = {p: discovery._input_file(p) for p in fsutil.glob(corpus + "/*.jsonl")}
    assert len(expected) == 40 and all(f.version.startswith("etag:") for f in expected.values())
    for pattern in (corpus, corpus + "/part_*.jsonl"):
        before = len(azurite.settled_responses())
        files = discovery.discover([pattern])
        asked = len(azurite.settled_responses(before)) - before
        assert {f.path: f for f in files} == expected
        assert asked < 10, f"{asked} requests for 40 blobs"


def test_rerun_planning_checks_commit_records_from_one_listing(azurite, container, tmp_path,
                                                               hf_tokenizer, monkeypatch):
    """A rerun's planning on Azure reads each commit record once and takes the sizes of the
    files they name from one listing (not a request per file), and redoes, saying why, a shard
    whose blob is gone or of another size than its record says (issue 23, item 20)."""
    import json

    from dataio import manifest
    from pipelines import tokenize

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(12):
        (corpus / f"web_{i:02d}.jsonl").write_text(
            "".join(json.dumps({"text": f"document {i} line {j}"}) + "\n" for j in range(i + 1)))
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    output = azurite.url(container, "out")
    argv = [f"--input={corpus}", f"--output={output}", "--tokenizer-type",
            "HuggingFaceTokenizer", f"--tokenizer-model={hf_tokenizer}", "--append-eod",
            "--log-interval", "0"]
    assert tokenize.run(argv) == 0

    def plan():
        _, options, _ = tokenize.setup(argv + ["--dry-run"])
        before = len(azurite.settled_responses())
        job = tokenize.plan(options, checked=True)
        return job, len(azurite.settled_responses(before)) - before

    job, asked = plan()
    assert len(job.shards) == 12 and all(s.skip for s in job.shards)
    # a few listings and 12 record reads (2 requests each: adlfs asks a blob's size on open);
    # the sizes of the .bin and .idx files come from one fresh listing, never a request each
    assert asked <= 6 + 2 * 12, f"{asked} requests to plan 12 committed shards"

    client = azurite.service().get_container_client(container)
    gone = manifest.read_commit_record(output, "web_03_text_document")["name"]
    record = manifest.read_commit_record(output, "web_07_text_document")
    resized = record["name"]
    client.delete_blob(f"out/{gone}.bin")
    client.upload_blob(f"out/{resized}.bin", b"\0\0", overwrite=True)
    job, _ = plan()
    redo = {s.shard: s.reason for s in job.shards if not s.skip}
    assert redo == {
        "web_03_text_document": f"{gone}.bin is missing (its commit record names it)",
        "web_07_text_document": f"{resized}.bin is 2 bytes but its commit record says "
                                f"{record['bin_size']}"}


def test_a_nested_corpus_folder_is_read_recursively_from_one_listing(azurite, container):
    """FineWeb's layout on Azure (issue 24 part 3): ``--input az://.../data`` reads every dump's
    files below it from one recursive listing, names those of one name by their folder, and
    takes each blob's size and etag from the listing (the resume keys asking each blob gives)."""
    client = azurite.service().get_container_client(container)
    for blob in ("data/CC-MAIN-2024-10/000_00000.jsonl", "data/CC-MAIN-2024-18/000_00000.jsonl",
                 "data/CC-MAIN-2024-18/001_00000.jsonl", "data/.cache/x.jsonl",
                 "data/CC-MAIN-2024-18/t.parquet/part-00000.parquet",
                 "data/CC-MAIN-2024-18/t.parquet/_SUCCESS"):
        client.upload_blob(blob, b'{"text": "x"}\n')
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    data = azurite.url(container, "data")
    before = len(azurite.settled_responses())
    files = discovery.discover([data])
    asked = len(azurite.settled_responses(before)) - before
    for i in range(40):  # 40 more blobs in 8 more folders: no request more
        client.upload_blob(f"data/CC-MAIN-2025-{i % 8:02d}/{100 + i:03d}_00000.jsonl", b"{}\n")
    before = len(azurite.settled_responses())
    assert len(discovery.discover([data])) == 44
    asked_more = len(azurite.settled_responses(before)) - before
    assert [(f.path[len(data) + 1:], f.stem) for f in files] == [
        ("CC-MAIN-2024-10/000_00000.jsonl", "CC-MAIN-2024-10_000_00000"),
        ("CC-MAIN-2024-18/000_00000.jsonl", "CC-MAIN-2024-18_000_00000"),
        ("CC-MAIN-2024-18/001_00000.jsonl", "001_00000"),
        ("CC-MAIN-2024-18/t.parquet/part-00000.parquet", "t_part-00000")]
    jsonl = [f for f in files if f.format == "jsonl"]
    assert all(f.version == discovery._input_file(f.path).version and
               f.size == discovery._input_file(f.path).size for f in jsonl)
    # one recursive listing; what grows is a request or two per folder (the check for a reshard
    # manifest in each folder of inputs, jsonl_sink.refusal_of_inputs), never one per blob
    assert asked_more - asked < 40, f"{asked} requests for 6 blobs, {asked_more} for 46"
    mirrored = discovery.discover([data + "/"], layout="mirror")
    assert [f.stem for f in mirrored][:2] == ["CC-MAIN-2024-10/000_00000",
                                              "CC-MAIN-2024-18/000_00000"]


def test_a_fresh_run_clears_no_records_shard_by_shard(azurite, container, tmp_path,
                                                      hf_tokenizer, monkeypatch):
    """Before the run, the failure records and error files of the shards it writes are found by
    one listing of each folder: 30 shards on a fresh output cost a few requests, not 2 each
    (issue 24 part 2); a failure record there is still removed."""
    import json

    from dataio import manifest
    from pipelines import tokenize
    from pipelines.tokenize import driver

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(30):
        (corpus / f"web_{i:02d}.jsonl").write_text(json.dumps({"text": f"document {i}"}) + "\n")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    output = azurite.url(container, "fresh")
    argv = [f"--input={corpus}", f"--output={output}", "--tokenizer-type",
            "HuggingFaceTokenizer", f"--tokenizer-model={hf_tokenizer}", "--append-eod"]
    _, options, _ = tokenize.setup(argv)
    fsutil.write_bytes_atomic(manifest.failure_record_path(output, "web_04_text_document"), b"{}")
    job = tokenize.plan(options, checked=True)
    assert len(job.to_process) == 30
    before = len(azurite.settled_responses())
    driver.prepare_output(job)
    asked = len(azurite.settled_responses(before)) - before
    # a listing of each control folder (and of _parts/, the kept work items): not per shard
    assert asked <= 12, f"{asked} requests to clear the records of 30 shards"
    assert not fsutil.exists(manifest.failure_record_path(output, "web_04_text_document"))
