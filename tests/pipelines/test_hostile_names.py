"""Input file names with control characters (issue 23 item 1): a newline, tab, escape, DEL or C1
control in a name that would become a shard name is refused at planning time with one line
naming the file, before anything is written; the YAML tokenbeam renders for Flink parses back
to what it was given, whatever the values hold. (Blend's data_path.sh and report:
tests/pipelines/test_blend.py; the sbatch script: tests/runners/test_sbatch_render.py.)"""

import os
import subprocess

import pytest
import yaml

from dataio import naming
from runners import flink_cluster, spark

CONTROL_NAMES = ["new\nline", "tab\there", "esc\x1b[31m", "del\x7f", "nel\x85", "cr\rx",
                 "ls\u2028x"]


@pytest.mark.parametrize("stem", CONTROL_NAMES)
def test_base_name_refuses_control_characters(stem):
    with pytest.raises(naming.UnsafeNameError) as info:
        naming.base_name(stem, "text", "document", source=f"/in/{stem}.jsonl")
    message = str(info.value)
    assert len(message.splitlines()) == 1 and message.startswith("input /in/")
    assert naming.printable(stem) in message and "rename" in message


def test_a_json_key_with_a_control_character_is_named():
    with pytest.raises(naming.UnsafeNameError, match=r"^--json-keys te\\nxt: "):
        naming.base_name("en_web", "te\nxt", "document", source="/in/en_web.jsonl")


def test_ordinary_names_pass():
    for stem in ("en_web", "d\u00e9j\u00e0 vu", "$(x) `y` 'q' \"d\" ;&|", "\u4e2d\u6587"):
        assert naming.base_name(stem, "text", "document") == f"{stem}_text_document"


def test_flink_config_yaml_round_trips_hostile_values():
    conf = {"io.tmp.dirs": "/tmp/x\n$(touch PWNED): y # z", "key with: colon\n#": "v",
            "rest.port": 8081, "quoted": "'single' \"double\" \\back", "ctl": "\x1b\x7f\x85\u2028"}
    assert yaml.safe_load(flink_cluster.render_conf(conf)) == conf


def test_printed_spark_submit_line_is_one_shell_word_per_argument(tmp_path, monkeypatch, capsys):
    """``runners.spark submit --no-submit`` prints the spark-submit line to paste into a shell."""
    argv = ["/opt/spark/bin/spark-submit", "--name", "x\n$(touch PWNED)", "--conf",
            "a=`touch PWNED2`; 'q' \"d\" *", "/jobs/it's here.jar"]
    conf_dir = "/etc/hadoop $(touch PWNED3)"
    monkeypatch.setattr(spark, "spark_submit_argv", lambda cfg, staged, run_id, work: argv)
    monkeypatch.setattr(spark, "spark_submit_env", lambda cfg: {"HADOOP_CONF_DIR": conf_dir})
    staged = spark.Staged(job_jar="/jobs/job.jar", runtime_jar="/jobs/rt.jar",
                          job_jar_cluster="/jobs/job.jar", runtime_jar_cluster="/jobs/rt.jar")
    spark._write_request(None, {"kind": "spark", "master": "yarn"}, staged, run_id="r",
                         work=str(tmp_path), output="out")
    out = capsys.readouterr().out
    line = out.split("\nrun: ", 1)[1].split("\nuntil that batch ends", 1)[0]
    assert line.count(argv[0]) == 1
    probe = ('show() { printf "%s\\0" "$HADOOP_CONF_DIR" "$@"; }\n'
             + line.replace(argv[0], "show", 1) + "\n")
    work = tmp_path / "work"
    work.mkdir()
    got = subprocess.run(["bash", "-c", probe], capture_output=True, cwd=work)
    assert got.returncode == 0, got.stderr
    assert os.listdir(work) == [], "the printed line runs a command"
    assert got.stdout.decode().split("\0")[:-1] == [conf_dir, *argv[1:]]


# --- through the commands ----------------------------------------------------------------------
