"""`python -m pipelines.inspect URL --report` on an output in blob storage (Azurite): the page is
written beside the shards as a blob, with the table, the bad records read from `_errors/` there,
and no credential in it."""

import json

import pytest

from pipelines import demo
from pipelines import inspect as inspect_cli
from pipelines import tokenize

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py


def test_report_of_an_output_in_blob_storage(azurite, container, hf_tokenizer, tmp_path,
                                            monkeypatch, capsys):
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    inputs = tmp_path / "in"
    inputs.mkdir()
    texts = [r["text"] for r in demo.documents(5, 30)]
    with open(inputs / "web.jsonl", "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
        f.write('{"title": "<b>no text</b>"}\n')
    output = azurite.url(container, "out")
    assert tokenize.run([f"--input={inputs}/*.jsonl", f"--output={output}", "--tokenizer-type",
                         "HuggingFaceTokenizer", f"--tokenizer-model={hf_tokenizer}",
                         "--append-eod", "--log-interval", "0", "--on-bad-record", "skip"]) == 0
    capsys.readouterr()

    assert inspect_cli.run([output, "--report"]) == 0
    assert f"report: {output}/report.html" in capsys.readouterr().out
    page = (azurite.service().get_container_client(container)
            .download_blob("out/report.html").readall().decode("utf-8"))
    meta = json.loads(azurite.service().get_container_client(container)
                      .download_blob("out/metadata.json").readall())
    (shard,) = meta["shards"]
    assert shard["name"] in page and f'data-v="{shard["tokens"]}"' in page
    assert "1 bad record in" in page and "missing key &#x27;text&#x27;" in page
    assert "&lt;b&gt;no text&lt;/b&gt;" in page and "<b>" not in page
    key = azurite.connection_string.split("AccountKey=")[1].split(";")[0]
    assert key not in page
