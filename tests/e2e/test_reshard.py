"""Reshard: planning properties, and the Beam job on generated JSONL / .gz / .zst / Parquet."""

import gzip
import json
import os

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing import test_pipeline
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines import demo
from pipelines import beam_options
from pipelines import reshard
from transforms import reshard as rs

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

REGEX = r"(?P<language>[a-z]+)_(?P<domain>[a-z]+)_"
TEMPLATE = "{language}_{domain}_split_{split:03d}"


# --- pure planning ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, size", [("1GB", 10**9), ("1GiB", 2**30), ("256MB", 256 * 10**6),
                                        ("64KiB", 65536), ("1000", 1000), ("1.5kb", 1500)])
def test_parse_size(text, size):
    assert rs.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "GB", "1 PB", "-1MB", "0"])
def test_parse_size_errors(text):
    with pytest.raises(rs.ReshardError, match="--target-size"):
        rs.parse_size(text)


@pytest.mark.parametrize("template, message", [
    ("{language}_{domain}", "has no \\{split\\} field"),
    ("{language.upper}_{split}", "must be a plain name"),
    ("{language:05d}_{split}", "only \\{split\\} is a number"),
    ("{language}/{split}", "cannot contain folders"),
    ("{language_{split}", "--name-template"),
])
def test_template_errors(template, message):
    with pytest.raises(rs.ReshardError, match=message):
        rs.check_template(template)


def test_fields_and_name_pattern():
    regex = __import__("re").compile(REGEX)
    assert rs.fields_of("data/en_books_001.jsonl", regex=regex, flags={"subdomain": "s"},
                        needed=["language", "domain", "subdomain"]) == \
        {"language": "en", "domain": "books", "subdomain": "s"}
    with pytest.raises(rs.ReshardError, match="no value for \\{subdomain\\}.*--subdomain"):
        rs.fields_of("en_books_1.jsonl", regex=regex, flags={}, needed=["language", "subdomain"])
    folders = __import__("re").compile(r"/(?P<language>[a-z]+)/(?P<domain>[a-z]+)/[^/]+$")
    assert rs.fields_of("az://c/raw/ar/news/part-1.jsonl", regex=folders, flags={},
                        needed=["language", "domain"]) == {"language": "ar", "domain": "news"}
    # Without a "/" the pattern sees only the file name, not the folders above it.
    assert rs.fields_of("/tmp/test_reshard_x/en_books_1.jsonl", regex=regex, flags={},
                        needed=["language"]) == {"language": "en"}
    with pytest.raises(rs.ReshardError, match="does not match this input"):
        rs.fields_of("README.jsonl", regex=regex, flags={}, needed=["language"])
    pattern = rs.name_pattern(TEMPLATE, {"language": "en", "domain": "web"}, ".jsonl")
    assert pattern.fullmatch("en_web_split_007.jsonl")
    assert not pattern.fullmatch("en_web_split_007.jsonl.gz")


def _source(path, fmt="jsonl", fields=(("language", "en"),)):
    return rs.Source(path=path, format=fmt, size=0, fields=fields)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(1, 50), min_size=0, max_size=12), min_size=1, max_size=6),
       st.integers(1, 200))
def test_plan_assigns_every_document_once_in_order(files, target):
    """Documents are byte runs on the offset line; the plan gives each to exactly one shard, in
    order, and a shard's starts fit in the target."""
    measured = [rs.Measured(source=_source(f"f{i:02d}"),
                            unit_sizes=(sum(sizes),)) for i, sizes in enumerate(files)]
    shards = rs.plan_group(measured, target=target)
    total = sum(map(sum, files))
    assert (len(shards) == 0) == (total == 0)
    seen = []
    for pieces in shards:
        shard_bytes = 0
        for piece in pieces:
            sizes = files[int(piece.path[1:])]
            offset = 0
            for j, size in enumerate(sizes):
                if piece.start <= offset < piece.end:
                    seen.append((piece.path, j))
                    shard_bytes += size
                offset += size
        starts = sum(p.end - p.start for p in pieces)
        assert starts <= target
        assert shard_bytes <= target + max(max(s, default=0) for s in files)
    expected = [(f"f{i:02d}", j) for i, sizes in enumerate(files) for j in range(len(sizes))]
    assert seen == expected


def test_plan_parquet_units_cover_only_overlapping_row_groups():
    m = rs.Measured(source=_source("p", "parquet"), unit_sizes=(100, 100, 100))
    shards = rs.plan_group([m], target=150)
    assert [p.units for (p,) in shards] == [((0, 0), (1, 100)), ((1, 100), (2, 200))]


# --- the job ---------------------------------------------------------------------------------

def _corpus(folder):
    """Two groups (en_books, ar_web) across plain, gzip, zstd JSONL and Parquet; blank lines
    and a missing final newline included."""
    folder.mkdir()
    en = [json.dumps(r, ensure_ascii=False).encode() for r in
          demo.documents(1, 150, langs=["en", "code"], long_every=40, empty_every=25)]
    (folder / "en_books_000.jsonl").write_bytes(b"\n".join(en[:60]) + b"\n\n  \n")
    (folder / "en_books_001.jsonl.gz").write_bytes(gzip.compress(b"\n".join(en[60:100]) + b"\n"))
    (folder / "en_books_002.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(b"\n".join(en[100:]) + b"\n"))
    (folder / "en_books_003.jsonl").write_bytes(b"\n".join(en[100:110]))  # no final newline
    ar = list(demo.documents(2, 120, langs=["ar"], long_every=30))
    pq.write_table(pa.Table.from_pylist(ar[:70]), folder / "ar_web_000.parquet",
                   row_group_size=16)
    (folder / "ar_web_001.jsonl").write_bytes(
        b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in ar[70:]))
    expected = {"en_books": en + en[100:110], "ar_web": ar}
    return expected


def _group_documents(out, prefix, extension=".jsonl"):
    names = sorted(n for n in os.listdir(out) if n.startswith(prefix) and n.endswith(extension))
    lines = []
    for name in names:
        data = (out / name).read_bytes()
        if extension == ".jsonl.gz":
            data = gzip.decompress(data)
        elif extension == ".jsonl.zst":
            data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        assert data.endswith(b"\n")
        lines.append(data[:-1].split(b"\n"))
    return names, lines


def _run(*args):
    return reshard.run([str(a) for a in args])


def _check_output(out, expected, target):
    longest = max(len(line) + 1 for lines in expected.values() for line in
                  (x if isinstance(x, bytes) else json.dumps(x).encode() for x in lines))
    for group, docs in expected.items():
        names, shards = _group_documents(out, group)
        assert names == [f"{group}_split_{i:03d}.jsonl" for i in range(len(names))]
        got = [line for shard in shards for line in shard]
        if group == "ar_web":  # Parquet rows come back as JSON objects
            assert [json.loads(x) for x in got] == docs
        else:
            assert got == docs
        for shard in shards:
            size = sum(len(x) + 1 for x in shard)
            assert 0 < size <= target + longest


def test_reshard_mixed_formats_groups_and_sizes(tmp_path, capsys):
    expected = _corpus(tmp_path / "in")
    target = 40_000
    assert _run("--input", tmp_path / "in" / "*", "--output", tmp_path / "out",
                "--target-size", target, "--name-regex", REGEX, "--name-template", TEMPLATE) == 0
    _check_output(tmp_path / "out", expected, target)
    assert sorted(os.listdir(tmp_path / "out")) == sorted(
        n for n in os.listdir(tmp_path / "out") if not n.startswith("."))  # no temp left
    assert "shards," in capsys.readouterr().out


def test_reshard_is_deterministic_across_runs_workers_and_input_order(tmp_path):
    _corpus(tmp_path / "in")
    files = sorted(str(p) for p in (tmp_path / "in").iterdir())
    common = ["--target-size", "30KB", "--name-regex", REGEX, "--name-template", TEMPLATE,
              "--compression", "gzip"]
    assert _run(*[f"--input={f}" for f in files], "--output", tmp_path / "a", *common) == 0
    assert _run(*[f"--input={f}" for f in reversed(files)], "--output", tmp_path / "b",
                "--workers", "2", "--direct_runner_bundle_repeat", "1", *common) == 0
    a = {n: (tmp_path / "a" / n).read_bytes() for n in os.listdir(tmp_path / "a")}
    b = {n: (tmp_path / "b" / n).read_bytes() for n in os.listdir(tmp_path / "b")}
    assert a == b and len(a) > 4  # the manifest too
    assert all(n.endswith(".jsonl.gz") for n in a if n != "_reshard_manifest")


def test_compressed_output_equals_plain(tmp_path):
    expected = _corpus(tmp_path / "in")
    base = ["--input", tmp_path / "in", "--target-size", "50KB", "--name-regex", REGEX,
            "--name-template", TEMPLATE]
    assert _run(*base, "--output", tmp_path / "plain") == 0
    assert _run(*base, "--output", tmp_path / "zst", "--compression", "zstd") == 0
    for group in expected:
        plain_names, plain = _group_documents(tmp_path / "plain", group)
        zst_names, zst = _group_documents(tmp_path / "zst", group, ".jsonl.zst")
        assert [n + ".zst" for n in plain_names] == zst_names and plain == zst


def test_documents_larger_than_the_target_keep_numbers_contiguous(tmp_path):
    (tmp_path / "in").mkdir()
    big = [json.dumps({"text": "x" * n}).encode() for n in (5000, 10, 8000, 10, 10)]
    (tmp_path / "in" / "en_web_0.jsonl").write_bytes(b"\n".join(big) + b"\n")
    assert _run("--input", tmp_path / "in", "--output", tmp_path / "out", "--target-size",
                "1000", "--language", "en", "--domain", "web", "--name-template",
                "{language}_{domain}_{split}") == 0
    names, shards = _group_documents(tmp_path / "out", "en_web")
    assert names == [f"en_web_{i}.jsonl" for i in range(len(names))]
    assert [line for s in shards for line in s] == big
    assert len(names) < 14  # 14 spans were planned; the ones inside big documents are dropped


def test_build_with_test_pipeline(tmp_path):
    expected = _corpus(tmp_path / "in")
    options = reshard.parse(["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
                             "--target-size", "100KB", "--name-regex", REGEX,
                             "--name-template", TEMPLATE])
    with test_pipeline.TestPipeline(runner=FnApiRunner(), options=options) as p:
        reshard.build(p, options)
    _check_output(tmp_path / "out", expected, 100_000)


def test_dry_run_existing_outputs_and_overwrite(tmp_path, capsys):
    _corpus(tmp_path / "in")
    base = ["--input", tmp_path / "in", "--output", tmp_path / "out", "--name-regex", REGEX,
            "--name-template", TEMPLATE]
    assert _run(*base, "--target-size", "20KB", "--dry-run") == 0
    plan = capsys.readouterr().out
    assert "en_books_split_000.jsonl: 4 input(s)" in plan and "measured during the run" in plan
    assert not (tmp_path / "out").exists()
    assert _run(*base, "--target-size", "20KB") == 0
    many = sorted(os.listdir(tmp_path / "out"))
    capsys.readouterr()
    assert _run(*base, "--target-size", "60KB") == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path / "out")) == many
    (tmp_path / "out" / "notes.txt").write_text("kept")
    assert _run(*base, "--target-size", "60KB", "--overwrite") == 0
    fewer = sorted(os.listdir(tmp_path / "out"))
    assert len(fewer) < len(many) and "notes.txt" in fewer
    assert "en_books_split_000.jsonl" in fewer


@pytest.mark.parametrize("extra, message", [
    (["--name-template", "{language}_{domain}"], "has no {split} field"),
    (["--name-regex", "(?P<language>zz)"], "does not match this input"),
    (["--name-regex", "(?P<language>[a-z]+)_"], "no value for {domain}"),
    (["--name-regex", "(?P<language"], "--name-regex"),
    (["--name-regex", REGEX, "--language", "en"], "both --language and --name-regex"),
    (["--name-regex", REGEX, "--subdomain", "x"], "--subdomain is given but"),
    (["--name-regex", REGEX, "--target-size", "big"], "--target-size 'big'"),
    (["--name-regex", REGEX, "--no-such-flag"], "unknown flag --no-such-flag"),
])
def test_configuration_errors_exit_2(tmp_path, capsys, extra, message):
    _corpus(tmp_path / "in")
    args = ["--input", tmp_path / "in", "--output", tmp_path / "out"]
    if "--name-template" not in extra:
        args += ["--name-template", TEMPLATE]
    assert _run(*args, *extra) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag, value", [("--tokenizer-type", "x"), ("--json-keys", "text"),
                                         ("--log-interval", "5")])
def test_the_tokenize_jobs_flags_are_refused(tmp_path, capsys, flag, value):
    """Beam's parser would take every flag of every options class imported; reshard takes only
    its own and Beam's."""
    _corpus(tmp_path / "in")
    assert _run("--input", tmp_path / "in", "--output", tmp_path / "out", "--name-regex", REGEX,
                "--name-template", TEMPLATE, flag, value) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"error: unknown flag {flag}: it is the tokenize job's, not "
                                "reshard's; see --help"]
    assert not (tmp_path / "out").exists()


def test_beam_flags_and_shared_flags_pass(tmp_path):
    options = reshard.parse(["--input", "x", "--output", "y", "--overwrite", "--dry-run",
                             "--workers", "2", "--runner", "DirectRunner",
                             "--direct_runner_bundle_repeat=1", "--compression", "zstd"])
    io = options.view_as(beam_options.InputOutputOptions)
    assert (io.input, io.output, io.overwrite, io.plan_only) == (["x"], "y", True, True)
    assert options.view_as(reshard.ReshardOptions).compression == "zstd"


def test_missing_inputs_exit_2(tmp_path, capsys):
    assert _run("--input", tmp_path / "nothing*.jsonl", "--output", tmp_path / "out",
                "--language", "en", "--domain", "x", "--subdomain", "y") == 2
    assert "matches no input file" in capsys.readouterr().err


def test_corrupt_input_fails_cleanly(tmp_path, capsys):
    _corpus(tmp_path / "in")
    (tmp_path / "in" / "en_books_009.jsonl.gz").write_bytes(b"\x1f\x8b not really gzip")
    assert _run("--input", tmp_path / "in", "--output", tmp_path / "out", "--name-regex", REGEX,
                "--name-template", TEMPLATE, "--target-size", "50KB") == 1
    assert "en_books_009.jsonl.gz: cannot decompress" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def test_fsspec_urls(tmp_path):
    expected = _corpus(tmp_path / "in")
    mem = fsspec.filesystem("memory")
    for path in (tmp_path / "in").iterdir():
        mem.pipe(f"/reshard-test/in/{path.name}", path.read_bytes())
    try:
        assert _run("--input", "memory://reshard-test/in/*", "--output",
                    "memory://reshard-test/out", "--target-size", "40KB", "--name-regex", REGEX,
                    "--name-template", TEMPLATE) == 0
        (tmp_path / "out").mkdir()
        for name in mem.ls("/reshard-test/out", detail=False):
            (tmp_path / "out" / os.path.basename(name)).write_bytes(mem.cat(name))
        assert not any(n.startswith(".") for n in os.listdir(tmp_path / "out"))
        _check_output(tmp_path / "out", expected, 40_000)
    finally:
        mem.rm("/reshard-test", recursive=True)
