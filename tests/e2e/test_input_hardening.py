"""Issue 23, items 11, 15, 16 and 17 through the real tokenize command: an alias is tokenized
once; a FIFO input is refused with one line instead of hanging the job; a planning sample of a
``.gz`` whose first line unpacks to 100 MB stays small and the good files still run; a damaged
tokenizer.json exits 2 with one line; a Spark-style ``t.parquet/`` folder is tokenized part by
part. The unit tests are tests/dataio/test_input_identity.py, tests/dataio/test_sample_bounds.py
and tests/transforms/test_tokenizer_damaged.py."""

import json
import os
import shutil
import subprocess
import sys
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import tokenize

pytestmark = pytest.mark.slow  # whole-job runs: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROWS = [{"text": f"document number {i} " + "word " * (i % 40)} for i in range(200)]
RAW = b"".join(json.dumps(r).encode() + b"\n" for r in ROWS)


def _argv(inputs, output, tokenizer, *extra):
    return [*(f"--input={p}" for p in inputs), "--output", str(output),
            "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer),
            "--log-interval", "0", "--append-eod", *map(str, extra)]


def _stems(folder):
    return sorted({n.split("_text_document")[0] for n in os.listdir(folder) if n.endswith(".idx")})


def test_a_symlinked_alias_is_tokenized_once(hf_tokenizer, tmp_path, capfd):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "v3.jsonl").write_bytes(RAW)
    os.symlink("v3.jsonl", inp / "latest.jsonl")
    out = tmp_path / "out"
    assert tokenize.run(_argv([inp, inp / "v3.jsonl"], out, hf_tokenizer)) == 0
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "latest.jsonl (the same file as" in err
    assert _stems(out) == ["v3"]
    meta = json.loads((out / "metadata.json").read_text())
    assert [os.path.basename(i["path"]) for i in meta["inputs"]] == ["v3.jsonl"]


def test_a_fifo_input_is_refused_not_waited_on(hf_tokenizer, tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "good.jsonl").write_bytes(RAW)
    os.mkfifo(inp / "pipe.jsonl")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "pipelines.tokenize",
                           *_argv([inp], out, hf_tokenizer)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # a hang detector: it used to wait forever
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "pipe.jsonl" in line]
    assert len(errors) == 1 and "FIFO" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists() or not _stems(out)


def test_a_gz_bomb_does_not_stop_planning(hf_tokenizer, tmp_path, capfd):
    inp = tmp_path / "in"
    inp.mkdir()
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    with open(inp / "a_bomb.jsonl.gz", "wb") as f:  # sampled first: sorted before good.jsonl
        f.write(gz.compress(b'{"text": "'))
        block = b"a" * (4 << 20)
        for _ in range(25):  # 100 MB in one line, from ~100 KB
            f.write(gz.compress(block))
        f.write(gz.compress(b'"}\n') + gz.flush())
    (inp / "good.jsonl").write_bytes(RAW)
    assert tokenize.run(_argv([inp], tmp_path / "out", hf_tokenizer, "--dry-run")) == 0
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err
    assert "good.jsonl" in captured.out and "a_bomb.jsonl.gz" in captured.out


def test_a_truncated_tokenizer_json_exits_2_with_one_line(hf_tokenizer, tmp_path, capfd):
    folder = tmp_path / "tok"
    shutil.copytree(hf_tokenizer, folder)
    data = (folder / "tokenizer.json").read_bytes()
    cut = next(i for i, b in enumerate(data) if b >= 0xC0) + 1  # inside a UTF-8 character
    (folder / "tokenizer.json").write_bytes(data[:cut])
    (tmp_path / "a.jsonl").write_bytes(RAW)
    assert tokenize.run(_argv([tmp_path / "a.jsonl"], tmp_path / "out", folder)) == 2
    err = capfd.readouterr().err
    assert "Traceback" not in err and "a bug" not in err
    lines = [line for line in err.splitlines() if "tokenizer.json" in line]
    assert len(lines) == 1 and "damaged or truncated" in lines[0], err


def test_a_spark_folder_is_tokenized_part_by_part(hf_tokenizer, tmp_path, capfd):
    data = tmp_path / "data"
    spark = data / "t.parquet"
    spark.mkdir(parents=True)
    for k in range(2):
        name = f"part-{k:05d}-0a1b.snappy.parquet"
        pq.write_table(pa.Table.from_pylist(ROWS[k * 100:(k + 1) * 100]), spark / name)
        (spark / f".{name}.crc").write_bytes(b"crc")
    (spark / "_SUCCESS").write_bytes(b"")
    out = tmp_path / "out"
    assert tokenize.run(_argv([data], out, hf_tokenizer)) == 0
    err = capfd.readouterr().err
    assert "Traceback" not in err and "corrupt" not in err
    assert _stems(out) == ["t_part-00000-0a1b", "t_part-00001-0a1b"]
    docs = [int(n.split("_dc=")[1].split("_")[0]) for n in os.listdir(out) if n.endswith(".idx")]
    assert sorted(docs) == [100, 100]
