"""What tokenbeam prints shows every name escaped (issue 23 item 1, second review): a folder
named with a newline and a terminal escape forges no ``error:`` line and sends no escape, in the
log (``FAILED`` lines), the ``error:`` line and the ``--dry-run`` plan; a name that would become
an output name with a control character (merge's ``--output``, ``count --rename``) is refused
with one line; an input name that is not UTF-8 is refused at planning (item 3)."""

import json
import logging
import os
import sys

import numpy as np
import pytest

from runtime import errors, log
from dataio import indexed, naming
from runtime import redact as redact_mod
from pipelines import count, merge, reshard, tokenize, validate

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


# --- the one escaping point: the log's handler, errors.main ------------------------------------

def test_log_arguments_are_escaped_and_the_message_keeps_its_structure(capsys):
    log.setup("info", others=False)
    redact_mod.register_secret("s3cr3t-value-for-the-test")
    log.get("test").error("FAILED %s: %s", "x_text_document",
                          "/in/ok\nerror: FAKE\x1b[2K/bad.gz: corrupt s3cr3t-value-for-the-test")
    log.get("test").info("line one\nline two %d %s", 3, "caf\udce9")
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: FAILED x_text_document: /in/ok\\nerror: FAKE\\x1b[2K/bad.gz: corrupt REDACTED",
        "line one", "line two 3 caf\\udce9"], err


def test_an_error_line_is_one_line_with_the_name_escaped(capsys):
    def command(argv):
        raise errors.RunError("/in/ok\nerror: FAKE\x1b[2K/bad.gz: corrupt; re-copy it")

    assert errors.main(command, []) == 1
    err = capsys.readouterr().err
    assert err == "error: /in/ok\\nerror: FAKE\\x1b[2K/bad.gz: corrupt; re-copy it\n"


def test_an_error_line_drops_beams_step_suffix():
    exc = errors.ConfigError("input /a\tb.jsonl: bad [while running 'Read'] [while running 'X']")
    assert errors.describe(exc) == ("input /a\\tb.jsonl: bad", 2)


def test_printable_escapes_c0_c1_separators_and_bytes_that_are_not_utf8():
    assert naming.printable("a\nb\r\x1b[2K\x7f\x85\u2028caf\udce9 d\u00e9j\u00e0") == (
        "a\\nb\\r\\x1b[2K\\x7f\\x85\\u2028caf\\udce9 d\u00e9j\u00e0")


# --- through the commands ----------------------------------------------------------------------

@pytest.mark.slow
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
        assert listed == [f"  {shown}/bad.jsonl.gz  0.00 MB  nothing could be decompressed: "
                          "not a readable jsonl.gz file",
                          f"  {shown}/good.jsonl  0.00 MB  " + listed[1].split("MB  ", 1)[1]]
    else:
        assert code == 1, captured.err
        failed = [line for line in captured.err.splitlines() if "FAILED" in line]
        assert len(failed) == 1 and failed[0].startswith(
            f"error: FAILED bad_text_document: {shown}/bad.jsonl.gz: "), captured.err
        assert "committed good_text_document_dc=20_" in captured.out


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_a_bugs_traceback_sends_no_escape(capsys):
    def command(argv):
        raise RuntimeError("/in/x\x1b[2J\x1b]0;title\x07")

    assert errors.main(command, []) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: unexpected RuntimeError (a bug") and "Traceback" in err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b[2J" in err


def _dataset(prefix):
    indexed.write_documents(str(prefix), [[[1, 2, 3]], [[4, 5]]], dtype=np.uint16)


def test_merge_refuses_an_output_named_with_a_control_character(tmp_path, capsys):
    _dataset(tmp_path / "a")
    _dataset(tmp_path / "b")
    evil = tmp_path / "m1" / "evil\nerror: FAKE\x1b[2K"
    (tmp_path / "m1").mkdir()
    code = merge.run(["--input", str(tmp_path / "[ab].bin"), "--output", str(evil)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.count("\n") == 1 and "\x1b" not in captured.err, captured.err
    assert captured.err.startswith(f"error: --output {tmp_path}/m1/evil\\nerror: FAKE\\x1b[2K")
    assert "rename it without control characters" in captured.err
    assert os.listdir(tmp_path / "m1") == []


def test_count_rename_refuses_a_new_name_with_a_control_character(tmp_path, capsys):
    _dataset(tmp_path / "fine")
    _dataset(tmp_path / "evil\nerror: FAKE\x1b[2K")
    before = sorted(os.listdir(tmp_path))
    code = count.run(["--input", str(tmp_path / "*.bin"), "--rename"])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.count("\n") == 1 and "\x1b" not in captured.err, captured.err
    assert captured.err.startswith(f"error: --rename {tmp_path}/evil\\nerror: FAKE\\x1b[2K: ")
    assert sorted(os.listdir(tmp_path)) == before, "nothing is renamed"


def test_count_lists_a_name_with_a_control_character_escaped(tmp_path, capsys):
    _dataset(tmp_path / "evil\nerror: FAKE\x1b[2K")
    assert count.run(["--input", str(tmp_path / "*.bin")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "evil\\nerror: FAKE\\x1b[2K" in out
    assert [line.split()[0] for line in out.splitlines()] == ["dataset", "evil\\nerror:", "total"]


def test_validate_lists_a_name_with_a_control_character_on_one_line(tmp_path, capsys):
    _dataset(tmp_path / "evil\nFAIL forged\x1b[2K")
    assert validate.run([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and len(out.splitlines()) == 1, out
    assert "evil\\nFAIL forged\\x1b[2K" in out
