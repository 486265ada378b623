"""What tokenbeam prints shows every name escaped (issue 23 item 1, second review): a folder
named with a newline and a terminal escape forges no ``error:`` line and sends no escape, in the
log (``FAILED`` lines), the ``error:`` line and the ``--dry-run`` plan; a name that would become
an output name with a control character (merge's ``--output``, ``count --rename``) is refused
with one line; an input name that is not UTF-8 is refused at planning (item 3).

The whole-job runs; the unit tests are in tests/pipelines/test_printed_names.py."""

import json
import os
import pytest
from dataio import naming
from pipelines import reshard, tokenize


ROWS = b"".join(json.dumps({"text": f"document {i} " + "word " * i}).encode() + b"\n"
                for i in range(20))


HOSTILE_FOLDER = "ok\nerror: FAKE everything is fine\x1b[2K"


OWN_STARTS = ("error: ", "warning: ", "tokenizer", "workers: ", "note: ")


def _own_lines_only(err: str) -> None:
    """Every stderr line is one of tokenbeam's own (no forged one), and no escape reaches it."""
    assert "\x1b" not in err and "FAKE everything" not in "\n".join(
        line for line in err.splitlines() if line.startswith("error: FAKE")), err
    for line in err.splitlines():
        assert line.startswith(OWN_STARTS), f"a line tokenbeam did not write: {line!r}\n{err}"
        assert not line.startswith("error: FAKE"), err


def _tokenize(inp, out, tokenizer, *extra):
    return tokenize.run([f"--input={inp}", "--output", str(out), "--tokenizer-type",
                         "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer),
                         "--log-interval", "0", "--append-eod", *extra])


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_folder_named_with_a_newline_forges_no_line(hf_tokenizer, tmp_path, capfd, dry_run):
    folder = tmp_path / "i1d" / HOSTILE_FOLDER
    folder.mkdir(parents=True)
    (folder / "bad.jsonl.gz").write_bytes(b"not gzip at all")
    (folder / "good.jsonl").write_bytes(ROWS)
    out = tmp_path / "out"
    code = _tokenize(folder, out, hf_tokenizer, *(["--dry-run"] if dry_run else []))
    captured = capfd.readouterr()
    _own_lines_only(captured.err)
    assert "\x1b" not in captured.out, captured.out
    shown = naming.printable(str(folder))
    if dry_run:
        assert code == 0, captured.err
        listed = [line for line in captured.out.splitlines() if line.startswith("  /")]
        assert listed == [f"  {shown}/bad.jsonl.gz  0.00 MB  unreadable: {shown}/bad.jsonl.gz: "
                          "nothing decompresses: not a jsonl.gz file, or damaged from its start "
                          "(re-copy it or leave it out)",
                          f"  {shown}/good.jsonl  0.00 MB  " + listed[1].split("MB  ", 1)[1]]
    else:
        assert code == 1, captured.err
        failed = [line for line in captured.err.splitlines() if "FAILED" in line]
        assert len(failed) == 1 and failed[0].startswith(
            f"error: FAILED bad_text_document: {shown}/bad.jsonl.gz: "), captured.err
        assert "committed good_text_document_dc=20_" in captured.out


@pytest.mark.parametrize("dry_run", [False, True])
def test_an_input_name_that_is_not_utf8_is_refused_at_planning(hf_tokenizer, tmp_path, capfd,
                                                              dry_run):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "good.jsonl").write_bytes(ROWS)
    with open(os.path.join(os.fsencode(inp), b"caf\xe9.jsonl"), "wb") as f:
        f.write(ROWS)
    out = tmp_path / "out"
    code = _tokenize(inp, out, hf_tokenizer, *(["--dry-run"] if dry_run else []))
    err = capfd.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: input {inp}/caf\\udce9.jsonl: the name is not valid UTF-8")
    assert "rename" in lines[0]
    assert not out.exists() or not list(out.rglob("*.bin"))


def test_reshard_refuses_an_input_name_that_is_not_utf8(tmp_path, capfd):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "en.jsonl").write_bytes(ROWS)
    with open(os.path.join(os.fsencode(inp), b"caf\xe9.jsonl"), "wb") as f:
        f.write(ROWS)
    out = tmp_path / "out"
    code = reshard.run([f"--input={inp}", f"--output={out}", "--language", "en", "--domain",
                        "web", "--subdomain", "x", "--target-size", "20KB"])
    err = capfd.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: input {inp}/caf\\udce9.jsonl: the name is not valid UTF-8")
    assert err.count("\n") == 1 and not out.exists(), err
