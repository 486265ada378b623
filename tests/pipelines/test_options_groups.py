"""pipelines/options.py: each job parses its own option groups (and Beam's and the runners'
flags), never another job's; each group's validate() is called from one place."""

import os

import pytest

from runtime import errors
from pipelines import beam_options
from pipelines import options as opts
from pipelines import reshard  # registers ReshardOptions with Beam, as any import of it does
from pipelines import tokenize
from pipelines.tokenize import checks

ARGV = ["--input", "in/", "--output", "out/", "--tokenizer-type", "NullTokenizer",
        "--vocab-size", "100", "--log-interval", "0"]
RESHARD = reshard.GROUPS


def test_tokenize_refuses_another_jobs_flag():
    with pytest.raises(opts.OptionsError, match=r"^unknown flag --target-size; see --help$"):
        beam_options.parse([*ARGV, "--target-size", "1GB"], groups=opts.GROUPS)


def test_tokenize_command_refuses_another_jobs_flag_in_one_line(tmp_path, capsys):
    (tmp_path / "in.jsonl").write_text('{"text": "1 2"}\n')
    status = tokenize.run(["--input", str(tmp_path / "in.jsonl"), "--output",
                           str(tmp_path / "out"), "--tokenizer-type", "NullTokenizer",
                           "--vocab-size", "10", "--name-regex", "x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert err == ["error: unknown flag --name-regex; see --help"]
    assert not (tmp_path / "out").exists()


def test_a_job_with_its_groups_refuses_tokenize_flags():
    argv = ["--input", "in/", "--output", "out/", "--target-size", "1MB"]
    options = beam_options.parse(argv, groups=RESHARD)
    assert options.view_as(reshard.ReshardOptions).target_size == "1MB"
    with pytest.raises(opts.OptionsError, match="unknown flag --tokenizer-type"):
        beam_options.parse([*argv, "--tokenizer-type", "x"], groups=RESHARD)


def test_beams_and_the_runners_flags_pass():
    from runners.spark_jar import SparkJobOptions  # declares Spark's --storage_level

    options = beam_options.parse([*ARGV, "--runner=DirectRunner", "--direct_num_workers=1",
                          "--storage_level=MEMORY_AND_DISK"], groups=opts.GROUPS)
    assert options.get_all_options()["storage_level"] == "MEMORY_AND_DISK"
    assert options.view_as(SparkJobOptions).storage_level == "MEMORY_AND_DISK"


def test_without_groups_it_is_the_tokenize_jobs_parse():
    with pytest.raises(opts.OptionsError, match="unknown flag --target-size"):
        beam_options.parse([*ARGV, "--target-size", "1GB"])


def test_a_bad_log_level_is_refused():
    # one line naming the choices (runtime/cli.py), from either parser: no usage, no exit
    for parse in (lambda argv: beam_options.parse(argv, groups=opts.GROUPS), opts.parse_flags):
        with pytest.raises(errors.ConfigError, match=r"^--log-level loud: not a choice "
                           r"\(choices: debug, info, warning, error\)$"):
            parse([*ARGV, "--log-level", "loud"])
    assert opts.parse_flags([*ARGV, "--log-level", "debug"]).log_level == "debug"


@pytest.mark.parametrize("extra, message", [
    (["--log-interval", "-1"], "--log-interval -1: give a number of documents"),
    (["--holdout-fraction", "1.5"], "--holdout-fraction must be in [0, 1)"),
    (["--azure-block-size-mb", "0"], "--azure-block-size-mb 0.0: give a positive size"),
    (["--tokenizer-type", "BertWordPieceCase"], "needs --legacy-tokenizer"),
])
def test_each_group_validates(extra, message):
    argv = [*ARGV, *extra]
    with pytest.raises(opts.OptionsError) as found:
        opts.validate(opts.parse_flags(argv))
    assert message in str(found.value)
    with pytest.raises(opts.OptionsError) as found:  # the same from Beam's PipelineOptions
        opts.validate(beam_options.parse(argv, groups=opts.GROUPS))
    assert message in str(found.value)


def test_validation_starts_with_the_output():
    with pytest.raises(opts.OptionsError, match="--output is required"):
        opts.validate(opts.parse_flags(["--input", "x", "--log-interval", "-1"]))


def test_a_group_without_validate_is_skipped():
    assert not hasattr(reshard.ReshardOptions, "validate")  # the group this test is about
    assert opts.validate(reshard.parse(["--input", "in/", "--output", "out/"]),
                         groups=RESHARD) is None  # skipped: no AttributeError
    # skipped, not the end of the checks: the job's other groups are still validated
    with pytest.raises(opts.OptionsError, match="--input is required"):
        opts.validate(reshard.parse(["--output", "out/"]), groups=RESHARD)


def test_preflight_validates_through_the_one_function(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(opts, "validate", lambda options, groups=opts.GROUPS: seen.append(groups)
                        or (_ for _ in ()).throw(opts.OptionsError("stop here")))
    with pytest.raises(opts.OptionsError, match="stop here"):
        checks.preflight(opts.parse_flags(ARGV))
    assert seen == [opts.GROUPS]


def test_log_interval_default_is_in_help():
    text = opts.help_parser("x").format_help()
    assert "default 10000" in text and "--log-level" in text


def test_tokenize_console_script_is_declared():
    setup_py = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "setup.py")
    assert "tokenbeam-tokenize=pipelines.tokenize:main" in open(setup_py).read()
    assert callable(tokenize.main)
