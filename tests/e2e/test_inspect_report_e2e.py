"""`python -m pipelines.inspect OUT --report`: one self-contained HTML page, opened in a real
headless browser (Debian's chromium driven by Selenium; skipped, saying why, without them).

The whole-job runs; the unit tests are in tests/pipelines/test_inspect_report.py."""

import json
import os
import shutil
import pytest

from pipelines import demo
from pipelines import inspect as inspect_cli
from pipelines import tokenize
from tests.pipelines.test_inspect_report import HOSTILE_STEM, SCRIPT_RECORD


MISSING_KEY_RECORD = '{"body": "<img src=y onerror=window.pwned=3>"}'


@pytest.fixture(scope="module")
def run_output(hf_tokenizer, tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    texts = [r["text"] for r in demo.documents(3, 40, long_every=7, empty_every=9)]
    inputs = root / "in"
    inputs.mkdir()
    demo.write_jsonl(str(inputs / "a.jsonl"), [{"text": t} for t in texts[:12]])
    with open(inputs / f"{HOSTILE_STEM}.jsonl", "w", encoding="utf-8") as f:
        for t in texts[12:]:
            f.write(json.dumps({"text": t}) + "\n")
        f.write(SCRIPT_RECORD + "\n" + MISSING_KEY_RECORD + "\n")  # 2 of 30: committed
    (inputs / "c.jsonl").write_text('{"text": "fine"}\n[1]\n')  # 1 of 2 bad: fails
    out = root / "out"
    status = tokenize.run([f"--input={inputs}/*.jsonl", "--output", str(out), "--log-interval",
                           "0", "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                           hf_tokenizer, "--append-eod", "--on-bad-record", "skip"])
    assert status == 1  # c.jsonl's shard failed; the report says so
    return {"out": out, "inputs": inputs, "texts": texts}


def test_report_default_path_and_contents(run_output, capsys):
    out = run_output["out"]
    assert inspect_cli.run([str(out), "--report"]) == 0
    page_path = out / "report.html"
    assert f"report: {page_path}" in capsys.readouterr().out
    page = page_path.read_text(encoding="utf-8")
    meta = json.loads((out / "metadata.json").read_text())
    for entry in [e for e in meta["shards"] if e["name"]]:  # every dataset, tokens per byte
        size = next(i["size"] for i in meta["inputs"] if i["path"] == entry["input"])
        assert f'data-v="{entry["tokens"]}">{entry["tokens"]:,}<' in page
        assert f'{entry["tokens"] / size:.3f}' in page
    assert "not valid JSON" in page and "missing key &#x27;text&#x27;" in page
    assert page.count("<script") == 1
    assert 'id="failed"' in page and "c_text_document" in page and "max-bad-fraction" in page
    # a name given for the report that is a file the command reads is refused, nothing written
    idx = next(p for p in out.iterdir() if p.name.startswith("a_text") and p.suffix == ".idx")
    before = idx.read_bytes()
    assert inspect_cli.run([str(out), "--report", str(idx)]) == 2
    assert idx.read_bytes() == before


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="session")
def browser():
    """One headless chromium for the session (Selenium; the system's browser and driver, so
    nothing is downloaded)."""
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("no chromium/chromedriver on PATH: apt-get install chromium chromium-driver "
                    "(scripts/setup.sh --test does)")
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="no selenium: pip install -e '.[test]'")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", "--window-size=1280,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)  # a hang detector, not a timing
    try:
        yield driver
    finally:
        driver.quit()


def test_report_renders_in_a_browser_and_runs_nothing_from_data(run_output, browser,
                                                                 tmp_path):
    from selenium.webdriver.common.by import By

    page_path = tmp_path / "page.html"
    assert inspect_cli.run([str(run_output["out"]), "--report", str(page_path)]) == 0
    browser.get_log("browser")  # start from an empty console
    browser.get(page_path.as_uri())

    assert browser.title.startswith("tokenbeam report:")
    rows = browser.find_elements(By.CSS_SELECTOR, "#shards tbody tr")
    names = [r.find_element(By.CSS_SELECTOR, "td").text for r in rows]
    assert len(rows) == 2 and names[0].startswith("a_text_document_dc=")
    assert names[1].startswith(HOSTILE_STEM + "_text_document_dc="), names  # shown as text
    bad_column = [r.find_elements(By.CSS_SELECTOR, "td")[7].text for r in rows]
    assert bad_column == ["0", "2"]
    failed = browser.find_elements(By.CSS_SELECTOR, "#failed tbody tr")
    assert [r.find_element(By.CSS_SELECTOR, "td").text for r in failed] == ["c_text_document"]
    histogram = browser.find_element(By.CSS_SELECTOR, "svg.hist")
    assert histogram.size["width"] > 300 and histogram.size["height"] > 100
    assert len(histogram.find_elements(By.CSS_SELECTOR, "rect")) > 3
    assert len(browser.find_elements(By.CSS_SELECTOR, "#shards svg.spark")) == 2
    snippets = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#bad-records td.snippet")]
    assert SCRIPT_RECORD in snippets and MISSING_KEY_RECORD in snippets
    assert browser.find_element(By.ID, "tokenizer").text.count("HuggingFaceTokenizer") == 1

    # nothing from the data ran or became an element; the page fetched nothing
    assert browser.execute_script("return window.pwned === undefined")
    assert len(browser.find_elements(By.TAG_NAME, "img")) == 0
    assert len(browser.find_elements(By.TAG_NAME, "script")) == 1
    assert browser.execute_script(
        "return performance.getEntriesByType('resource').length") == 0

    # the page's own script runs (its hash is in the page's policy): sorting by tokens
    tokens = [int(r.find_elements(By.CSS_SELECTOR, "td")[3].text.replace(",", ""))
              for r in rows]
    header = browser.find_elements(By.CSS_SELECTOR, "#shards thead th")[3]
    header.click()
    header.click()  # descending
    assert header.get_attribute("aria-sort") == "descending"
    shown = [int(r.find_elements(By.CSS_SELECTOR, "td")[3].text.replace(",", ""))
             for r in browser.find_elements(By.CSS_SELECTOR, "#shards tbody tr")]
    assert shown == sorted(tokens, reverse=True)

    problems = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert problems == []
    assert os.path.getsize(page_path) < 200_000


def test_report_given_a_folder_writes_report_html_in_it(run_output, tmp_path, capsys):
    # "inspect OUT --report OUT" (or any folder): was os.replace's IsADirectoryError traceback
    out = run_output["out"]
    folder = tmp_path / "pages"
    folder.mkdir()
    assert inspect_cli.run([str(out), "--report", str(folder)]) == 0
    assert f"report: {folder / 'report.html'}" in capsys.readouterr().out
    assert (folder / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in folder.iterdir()) == ["report.html"]
