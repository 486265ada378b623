"""runners.config: YAML + overrides, validation messages, locating Flink and the jar, secrets."""

import os

import pytest
from runner_support import ROOT

from runners import config as rc

SHIPPED = {"flink_slurm": "runners/flink_slurm.yaml", "flink": "runners/flink.yaml",
           "direct": "runners/direct.yaml"}


@pytest.mark.parametrize("kind", sorted(SHIPPED))
def test_shipped_configs_load(kind):
    cfg = rc.load(os.path.join(ROOT, SHIPPED[kind]), kind=kind)
    assert cfg["kind"] == kind


def test_command_line_wins_over_file_and_file_over_defaults(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("kind: flink_slurm\nnodes: 3\npartition: cpu\nsdk_worker:\n  port: 5000\n")
    cfg = rc.load(str(path), {"nodes": 5, "sdk_worker.parallelism": 2,
                              "flink_conf.akka.ask.timeout": "60 s"})
    assert cfg["nodes"] == 5                       # command line
    assert cfg["partition"] == "cpu"               # file
    assert cfg["sdk_worker"] == {"port": 5000, "parallelism": 2}
    assert cfg["time"] == rc.FLINK_SLURM_DEFAULTS["time"]   # default
    assert cfg["flink_conf"] == {"akka.ask.timeout": "60 s"}


def test_relative_paths_become_absolute_against_base_dir(tmp_path):
    cfg = rc.load(None, {"log_dir": "logs", "python_env": "../env"}, kind="flink_slurm",
                  base_dir=str(tmp_path / "work"))
    assert cfg["log_dir"] == str(tmp_path / "work" / "logs")
    assert cfg["python_env"] == str(tmp_path / "env")


@pytest.mark.parametrize("text, expected", [
    ("kind: flink_slurm\nnode: 2\n", "unknown key 'node'"),
    ("kind: flink_slurm\nsdk_worker:\n  prot: 1\n", "unknown key 'sdk_worker.prot'"),
    ("kind: flink_slurm\nnodes: 0\n", "nodes = 0 is invalid"),
    ("kind: flink_slurm\ntime: 90 min\n", "time = '90 min' is invalid"),
    ("kind: flink_slurm\nmemory: 32 GB\n", "memory = '32 GB' is invalid"),
    ("kind: flink_slurm\npartition: a b\n", "partition = 'a b' is invalid"),
    ("kind: flink_slurm\naccount: \"x;rm\"\n", "account = 'x;rm' is invalid"),
    ("kind: flink_slurm\nextra_sbatch: [\"--a\\n#SBATCH --b\"]\n", "extra_sbatch"),
    ("kind: flink_slurm\ntime: \"00:05:00\"\nsignal_before_end: 300\n", "signal_before_end"),
    ("kind: flink_slurm\ntaskmanager_memory: lots\n", "taskmanager_memory"),
    ("kind: hadoop\n", "kind must be one of"),
    ("kind: flink\nflink_master: nowhere\n", "flink_master"),
    ("- a list\n", "mapping"),
])
def test_bad_values_are_refused_naming_file_and_key(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(rc.ConfigError) as err:
        rc.load(str(path))
    assert expected in str(err.value)
    assert str(path) in str(err.value)


def test_kind_must_match_the_launcher(tmp_path):
    with pytest.raises(rc.ConfigError, match="needs a 'flink_slurm' config"):
        rc.load(os.path.join(ROOT, "runners/flink.yaml"), kind="flink_slurm")


def test_missing_file_names_the_shipped_configs():
    with pytest.raises(rc.ConfigError, match="runners/flink_slurm.yaml"):
        rc.load("no/such.yaml")


def test_override_values_are_yaml():
    assert rc.parse_override("nodes=4") == ("nodes", 4)
    assert rc.parse_override("memory=null") == ("memory", None)
    assert rc.parse_override("requeue=true") == ("requeue", True)
    assert rc.parse_override("time=01:00:00") == ("time", "01:00:00")
    with pytest.raises(rc.ConfigError, match="KEY=VALUE"):
        rc.parse_override("nodes")


def test_slurm_time_limits_in_seconds():
    assert rc._seconds("30") == 1800
    assert rc._seconds("01:02:03") == 3723
    assert rc._seconds("2-00") == 172800
    assert rc._seconds("1-01:00:00") == 90000


def _fake_dist(root, version):
    os.makedirs(root / "lib")
    (root / "lib" / f"flink-dist-{version}.jar").write_bytes(b"")
    return root


def test_flink_home_and_jar_are_found_and_checked(tmp_path):
    home = _fake_dist(tmp_path / "flink", "1.19.3")
    jar = tmp_path / "beam-runners-flink-1.19-job-server-2.70.0.jar"
    jar.write_bytes(b"")
    cfg = rc.load(None, {"flink_home": str(home), "job_server_jar": str(jar)},
                  kind="flink_slurm")
    assert rc.resolve_flink(cfg) == (str(home), "1.19.3")
    assert rc.resolve_job_server_jar(cfg, "1.19.3") == str(jar)
    with pytest.raises(rc.ConfigError, match="built for Flink 1.19"):
        rc.resolve_job_server_jar(cfg, "2.2.1")
    cfg["flink_version"] = "2.2"
    with pytest.raises(rc.ConfigError, match="holds Flink 1.19.3"):
        rc.resolve_flink(cfg)


def test_flink_version_picks_the_provisioned_distribution(tmp_path):
    home = _fake_dist(tmp_path / "dist", "1.19.3")
    stamp = tmp_path / "cache" / "flink" / "1.19.3" / ".installed"
    stamp.parent.mkdir(parents=True)
    stamp.write_text(str(home) + "\n")
    cfg = rc.load(None, {"cache_dir": str(tmp_path / "cache"), "flink_version": "1.19"},
                  kind="flink_slurm")
    assert rc.resolve_flink(cfg) == (str(home), "1.19.3")


def test_missing_flink_and_jar_say_how_to_get_them(tmp_path):
    cfg = rc.load(None, {"cache_dir": str(tmp_path)}, kind="flink_slurm")
    with pytest.raises(rc.ConfigError, match="scripts/setup.sh --flink"):
        rc.resolve_flink(cfg)
    with pytest.raises(rc.ConfigError, match="job_server_jar"):
        rc.resolve_job_server_jar(cfg)


def test_secrets_are_dropped_or_masked_with_a_warning():
    args = ["--input", "https://acct.blob.core.windows.net/c/x.jsonl?sv=2024&sig=S3CRETsig",
            "--azure-sas-token", "tok3n", "--azure-account-key=K3Y", "--output", "out"]
    safe, warnings = rc.split_secrets(args)
    text = " ".join(safe)
    assert "S3CRETsig" not in text and "tok3n" not in text and "K3Y" not in text
    assert "--azure-sas-token" not in text and "--azure-account-key" not in text
    assert safe[-2:] == ["--output", "out"]
    assert safe[1].startswith("https://acct.blob.core.windows.net/c/x.jsonl?sv=2024&sig=")
    assert len(warnings) == 3
    assert any("environment" in w for w in warnings)


def test_plain_arguments_pass_untouched():
    args = ["--input", "/data/a b/*.jsonl", "--json-keys", "text", "--append-eod"]
    assert rc.split_secrets(args) == (args, [])


def test_file_paths_are_taken_from_the_file_folder_and_flags_from_the_shell(tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    path = folder / "c.yaml"
    path.write_text("kind: flink_slurm\npython_env: ../env\nlog_dir: logs\n")
    cfg = rc.load(str(path), {"cache_dir": "cache"}, base_dir=str(tmp_path / "shell"))
    assert cfg["python_env"] == str(tmp_path / "env")            # the file's value
    assert cfg["log_dir"] == str(folder / "logs")
    assert cfg["cache_dir"] == str(tmp_path / "shell" / "cache")  # the command line's


def test_shipped_configs_name_the_checkout_venv_and_cache_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = rc.load(os.path.join(ROOT, "runners/flink_slurm.yaml"), kind="flink_slurm")
    assert cfg["python_env"] == os.path.join(ROOT, ".venv")
    assert cfg["cache_dir"] == os.path.join(ROOT, ".cache")
    for name in ("flink.yaml", "spark.yaml", "spark_hdinsight.yaml", "spark_synapse.yaml"):
        assert rc.load(os.path.join(ROOT, "runners", name))["cache_dir"] == \
            os.path.join(ROOT, ".cache"), name
