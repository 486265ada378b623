"""runtime/cli.py: a typo on any command's line is one line on stderr, exit 2, naming the nearest
valid flag or choice; --help is unchanged."""

import importlib

import pytest

from runtime import cli, errors

COMMANDS = ["tokenize", "validate", "inspect", "count", "merge", "blend", "signature", "reshard",
            "demo"]


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "usage:" not in err
    return lines[0]


@pytest.mark.parametrize("word, choices, expected", [
    ("HuggingfaceTokenizer", ["HuggingFaceTokenizer", "SentencePieceTokenizer"],
     "HuggingFaceTokenizer"),
    ("sentencepiece", ["HuggingFaceTokenizer", "SentencePieceTokenizer"],
     "SentencePieceTokenizer"),
    ("uint8", ["uint16", "int32", "int64"], "uint16"),
    ("zzz", ["uint16", "int32"], None),
])
def test_nearest_choice(word, choices, expected):
    assert cli.nearest(word, choices) == expected


@pytest.mark.parametrize("typo, meant", [
    ("--tokenizer-typ", "--tokenizer-type"), ("--tokenizer_type", "--tokenizer-type"),
    ("--apend-eod", "--append-eod"), ("--outptu", "--output"), ("--json-key", "--json-keys"),
    ("--tokenizer-tpye=x", "--tokenizer-type"),
])
def test_tokenize_unknown_flag_names_the_nearest(typo, meant, capsys):
    from pipelines import tokenize

    argv = ["--input", "in.jsonl", "--output", "out", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", "10", typo]
    assert tokenize.run(argv) == errors.EXIT_USAGE
    name = typo.split("=")[0]
    assert _one_line(capsys.readouterr().err) == (f"error: unknown flag {name}; did you mean "
                                                  f"{meant}?")


def test_tokenize_bad_choice_is_one_line_with_the_nearest(capsys, tmp_path):
    from pipelines import tokenize

    argv = ["--input", "in.jsonl", "--output", str(tmp_path / "out"),
            "--tokenizer-type", "HuggingfaceTokenizer", "--tokenizer-model", "x"]
    assert tokenize.run(argv) == errors.EXIT_USAGE
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("error: --tokenizer-type HuggingfaceTokenizer: not a choice; did you "
                           "mean --tokenizer-type HuggingFaceTokenizer? (choices: "
                           "HuggingFaceTokenizer, SentencePieceTokenizer, ")
    assert not (tmp_path / "out").exists()


def test_beams_own_choices_get_the_nearest_too(capsys):
    from pipelines import tokenize

    argv = ["--input", "in.jsonl", "--output", "out", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", "10", "--direct_running_mode", "multiprocessing"]
    assert tokenize.run(argv) == errors.EXIT_USAGE
    assert "did you mean --direct_running_mode multi_processing?" in \
        _one_line(capsys.readouterr().err)


def test_a_stray_value_is_refused_not_dropped(capsys):
    # Megatron's --input takes one file: the second used to be dropped without a word
    from pipelines import tokenize

    argv = ["--input", "a.jsonl", "b.jsonl", "--output", "out",
            "--tokenizer-type", "NullTokenizer", "--vocab-size", "10"]
    assert tokenize.run(argv) == errors.EXIT_USAGE
    assert _one_line(capsys.readouterr().err) == (
        "error: unexpected argument 'b.jsonl': not the value of a flag (give --input once per "
        "input); quote a value holding spaces; see --help")


# a typo of one of each command's own flags
TYPOS = {"tokenize": ("--tokenizer-modle", "--tokenizer-model"),
         "validate": ("--eod_id", "--eod-id"), "inspect": ("--max-chras", "--max-chars"),
         "count": ("--renmae", "--rename"), "merge": ("--natural_order", "--natural-order"),
         "blend": ("--totl-tokens", "--total-tokens"), "signature": ("--inptu", "--input"),
         "reshard": ("--target-szie", "--target-size"), "demo": ("--sentence-piece",
                                                                  "--sentencepiece")}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_names_the_nearest_flag(command, capsys):
    module = importlib.import_module(f"pipelines.{command}")
    typo, meant = TYPOS[command]
    assert module.run([typo]) == errors.EXIT_USAGE
    assert _one_line(capsys.readouterr().err) == (f"error: unknown flag {typo}; did you mean "
                                                  f"{meant}?")


def test_other_usage_errors_are_one_line(capsys):
    from pipelines import validate

    assert validate.run([]) == errors.EXIT_USAGE
    assert _one_line(capsys.readouterr().err) == ("error: the following arguments are required: "
                                                  "PATH; see --help")


def test_a_runner_subcommand_typo_names_the_nearest(capsys):
    from runners import slurm

    assert slurm.main(["sumbit"]) == errors.EXIT_USAGE
    assert "did you mean submit?" in _one_line(capsys.readouterr().err)


def test_help_is_argparses_own(capsys):
    from pipelines import validate

    assert validate.run(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m pipelines.validate")


def test_a_runner_typo_is_one_line_not_beams_traceback(capsys, tmp_path):
    from pipelines import tokenize

    (tmp_path / "in.jsonl").write_text('{"text": "1 2"}\n')
    argv = ["--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out"),
            "--tokenizer-type", "NullTokenizer", "--vocab-size", "10"]
    assert tokenize.run(["--runner", "DirectRuner", *argv]) == errors.EXIT_USAGE
    assert _one_line(capsys.readouterr().err).startswith(
        "error: --runner DirectRuner: not a runner Beam knows; did you mean --runner "
        "DirectRunner? ")
    assert not (tmp_path / "out").exists()
    from pipelines import options as opts

    for name in ("FlinkRunner", "flink", "DirectRunner", "my.module.Runner", None):
        opts.check_runner(name)  # Beam's own matching: any case, "Runner" optional


def test_arguments_passed_on_to_another_command_are_not_judged_as_typos(capsys):
    # runners.slurm submit CONFIG -- PIPELINE_ARGS: the tokenize flags are not slurm's typos
    from runners import slurm

    assert slurm.main([]) == errors.EXIT_USAGE
    assert _one_line(capsys.readouterr().err) == ("error: the following arguments are "
                                                  "required: cmd; see --help")


@pytest.mark.parametrize("argv, meant", [
    (["submit", "--nodez", "2", "--", "--input", "x"], "--nodes"),
    (["submit", "--no-sumbit", "--", "--input", "x"], "--no-submit"),
])
def test_a_sub_commands_flag_typo_names_its_nearest_flag(argv, meant, capsys):
    # the sub-command's flags are the ones to match, not only the command's (was "see --help")
    from runners import slurm

    assert slurm.main(argv) == errors.EXIT_USAGE
    assert _one_line(capsys.readouterr().err) == (f"error: unknown flag {argv[1]}; did you mean "
                                                  f"{meant}?")


def test_a_sub_commands_flag_before_it_is_named_not_taken_for_the_sub_command(capsys):
    # runners.slurm --nodes 2 submit: argparse took "2" for the sub-command ("CMD 2: not a
    # choice"); the flag is the one to name, and where it goes
    from runners import slurm

    assert slurm.main(["--nodes", "2", "submit"]) == errors.EXIT_USAGE
    err = _one_line(capsys.readouterr().err)
    assert err.startswith("error: unknown flag --nodes"), err
    assert "after submit" in err, err


def test_a_value_starting_with_a_dash_is_told_how_to_give(capsys):
    # "--input -a.jsonl": argparse's "expected one argument" alone does not say --input=-a.jsonl
    from pipelines import tokenize

    assert tokenize.run(["--input", "-a.jsonl", "--output", "o"]) == errors.EXIT_USAGE
    assert _one_line(capsys.readouterr().err) == (
        "error: --input: expected one argument; a value starting with '-' is given as "
        "--input=-a.jsonl; see --help")
