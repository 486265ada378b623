"""The one settings record (transforms/tokenize_config.py): what a shard's fingerprint hashes of
it. The keys and values are those earlier versions hashed, so committed outputs still skip."""

import dataclasses

from transforms.tokenize_config import TokenizeConfig


def test_document_level_settings_are_those_fingerprinted_before():
    config = TokenizeConfig(keys=("text", "title"), append_eod=True, holdout_fraction=0.1,
                            id_key="id", splitter="punkt", lang="german", keep_newlines=True,
                            dtype="uint16", log_interval=5)
    assert config.resume_settings() == {
        "keys": ["text", "title"], "level": "document", "append_eod": True, "skip_empty": False,
        "holdout": 0.1, "id_key": "id", "splitter": None, "lang": None, "keep_newlines": None,
        "dtype": "uint16"}


def test_sentence_level_settings_name_the_splitter():
    config = TokenizeConfig(keys=("text",), level="sentence", skip_empty=True, dtype="int32")
    assert config.resume_settings() == {
        "keys": ["text"], "level": "sentence", "append_eod": False, "skip_empty": True,
        "holdout": 0.0, "id_key": None, "splitter": "auto", "lang": "english",
        "keep_newlines": False, "dtype": "int32"}


def test_every_field_is_fingerprinted_unless_it_says_it_cannot_change_the_output():
    # A new setting is in the resume key unless marked resume=False: it cannot be forgotten.
    left_out = {f.name for f in dataclasses.fields(TokenizeConfig)
                if f.metadata.get("resume", True) is False}
    # max_bad_fraction decides whether a shard is committed, never what a committed one holds
    assert left_out == {"log_interval", "progress", "max_bad_fraction"}
    config = TokenizeConfig(keys=("text",))
    assert config.resume_settings() == \
        dataclasses.replace(config, log_interval=1, progress=object()).resume_settings()
