"""The tokenize job on an existing Flink cluster (``python -m runners.flink``): a real
JobManager + TaskManager from the provisioned distribution, Beam's Flink job server from the
provisioned jar, Python SDK workers from a local worker pool (EXTERNAL environment)."""

import json
import shlex
import urllib.request

from runner_support import (assert_no_processes_left, flink_temp_entries, shards, submit_flink,
                            tokenize_args)


def test_tokenize_on_flink_matches_direct_runner(flink_cluster, direct_output, corpus_dir,
                                                  hf_tokenizer, tmp_path):
    out = tmp_path / "flink-out"
    temp_before = flink_temp_entries()
    marker = f"flink-run-{tmp_path}"
    proc = submit_flink("--flink-master", flink_cluster.rest,
                   "--set", "sdk_worker.worker_pool=127.0.0.1:0",
                   "--set", "sdk_worker.parallelism=2",
                   "--", *tokenize_args(corpus_dir, hf_tokenizer, out), marker=marker)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "parallelism 2" in proc.stderr          # the cluster's slot count
    expected = shards(direct_output)
    assert shards(out) == expected
    meta = json.loads((out / "metadata.json").read_text())
    reference = json.loads((direct_output / "metadata.json").read_text())
    assert meta["totals"] == reference["totals"]
    # The Flink job really ran on this cluster, and finished.
    with urllib.request.urlopen(f"http://{flink_cluster.rest}/jobs/overview", timeout=10) as r:
        jobs = json.load(r)["jobs"]
    assert [j["state"] for j in jobs] == ["FINISHED"]
    # Beam's job server, the local worker pool and its SDK workers are gone; Flink kept its
    # temp files in the cluster's folder.
    assert_no_processes_left(marker)
    assert flink_temp_entries() <= temp_before


def test_version_mismatch_is_refused_before_submitting(flink_cluster, corpus_dir, hf_tokenizer,
                                                       tmp_path):
    proc = submit_flink("--flink-master", flink_cluster.rest, "--flink-version", "2.2", "--",
                   *tokenize_args(corpus_dir, hf_tokenizer, tmp_path / "o"), timeout=120)
    assert proc.returncode == 2
    assert "runs Flink 1." in proc.stderr or "built for Flink" in proc.stderr


def test_no_submit_prints_the_flink_command_and_runs_nothing(flink_cluster, flink_stack,
                                                             corpus_dir, hf_tokenizer, tmp_path):
    out = tmp_path / "o"
    proc = submit_flink("--flink-master", flink_cluster.rest, "--no-submit", "--",
                   *tokenize_args(corpus_dir, hf_tokenizer, out), "--azure-sas-token", "S3CRET",
                   timeout=120)
    assert proc.returncode == 0, proc.stderr
    cmd = shlex.split(proc.stdout.strip().splitlines()[-1])
    assert cmd[1:3] == ["-m", "pipelines.tokenize"]
    for flag in ("--runner=FlinkRunner", f"--flink_master={flink_cluster.rest}",
                 "--flink_version=1.19", f"--flink_job_server_jar={flink_stack[2]}",
                 "--environment_type=EXTERNAL", "--parallelism=2"):
        assert flag in cmd
    assert "S3CRET" not in proc.stdout
    assert not out.exists()
