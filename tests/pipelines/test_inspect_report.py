"""`python -m pipelines.inspect OUT --report`: one self-contained HTML page, opened in a real
headless browser (Debian's chromium driven by Selenium; skipped, saying why, without them).

The output is a real tokenize run whose input name and bad records carry HTML and scripts: the
page must show them as text, run none of them, fetch nothing, and log no console error."""


import numpy as np
import pytest

from pipelines import _inspect_report as report

HOSTILE_STEM = "b<img src=x onerror=window.pwned=1>"
SCRIPT_RECORD = '{"text": "<script>window.pwned=2</script>'  # not valid JSON: a bad record
SECRET = "sv=2024-01-01&sig=Zm9vYmFyc2VjcmV0c2lnbmF0dXJl"


# -- the page alone (unit tier) ----------------------------------------------------------------


def _rows():
    lengths = np.array([0, 5, 9, 120, 7], dtype=np.int64)
    return [report.Row(name=HOSTILE_STEM + "_text_document", documents=5, sequences=4,
                       tokens=141, dtype="uint16", lengths=lengths, input=f"/in/{HOSTILE_STEM}",
                       input_bytes=1000, bad_records=2)]


def test_page_escapes_names_and_records_and_redacts_secrets():
    meta = {"tokenizer": {"kind": "HuggingFaceTokenizer", "model": f"az://c/tok?{SECRET}"},
            "options": ["--input", f"az://c/in/*.jsonl?{SECRET}", "--azure-sas-token", SECRET]}
    bad = report.BadRecords(
        total=2, by_input={f"/in/{HOSTILE_STEM}": 2},
        by_reason=[("not valid JSON", 1), ("missing key 'text'", 1)],
        examples=[{"file": f"/in/{HOSTILE_STEM}", "line": 3, "offset": 40,
                   "reason": "not valid JSON (x)", "snippet": SCRIPT_RECORD + "</td></table>"}])
    page = report.render(title="out</title><script>x()</script>", rows=_rows(), meta=meta,
                         bad=bad, errors_where="/out/_errors", vocab_size=500,
                         summary={"min": 5.0, "p50": 9.0}, empty=1)
    assert page.count("<script") == 1 and page.count("</script>") == 1  # ours alone
    assert "<img" not in page and "onerror=window.pwned=1" in page.replace("&lt;", "<")
    assert "&lt;script&gt;window.pwned=2&lt;/script&gt;" in page
    assert "Zm9vYmFyc2VjcmV0c2lnbmF0dXJl" not in page and "sig=REDACTED" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


def test_a_password_in_a_url_is_masked():
    # https://user:PASSWORD@host/...: a tokenizer or input read over HTTP(S) with credentials
    meta = {"tokenizer": {"kind": "HuggingFaceTokenizer",
                          "model": "https://me:s3cretPassw0rd@host/tok"},
            "options": ["--input", "ftp://me:an0therSecret@host/in/*.jsonl"]}
    page = report.render(title="out", rows=_rows(), meta=meta, bad=report.BadRecords(
        total=0, by_input={}, by_reason=[], examples=[]), errors_where="/out/_errors",
        vocab_size=500, summary={}, empty=0)
    assert "s3cretPassw0rd" not in page and "an0therSecret" not in page
    assert "me:REDACTED@host" in page


@pytest.mark.parametrize("meta", [None, {}, {"tokenizer": "x<y", "options": "--a b",
                                             "versions": ["1"], "dtype": {"<k>": 1}},
                                  {"tokenizer": {"files": "f"}, "options": {"k": None}}])
def test_odd_metadata_still_gives_a_page(meta):
    page = report.render(title="t", rows=_rows(), meta=meta, bad=report.BadRecords(),
                         errors_where=None, vocab_size=None, summary={}, empty=0)
    assert page.count("<script") == 1 and "<y" not in page and "<k>" not in page


def test_reason_kind_groups_particulars():
    assert report.reason_kind("not valid JSON (unexpected end of data: line 1)") == \
        "not valid JSON"
    assert report.reason_kind("missing key 'text' (keys present: a); set --json-keys") == \
        "missing key 'text'"
    assert report.reason_kind("blank line") == "blank line"


# -- a real run, the command, the browser --------------------------------------------------------
