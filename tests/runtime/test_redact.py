"""runtime.redact: every secret shape is masked, ordinary text is left alone."""

import logging

from hypothesis import example, given, settings, strategies as st

from runtime import redact as r

SIG = "tERpbBaVEHLDX5AgEjz0RE7bUUxNlvP3WaQ2uTzBcTI%3D"
SAS = f"se=2030-01-01T00%3A00%3A00Z&sp=racwdl&sv=2026-10-06&sr=c&sig={SIG}"
KEY = "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS1ub3QtYS1yZWFsLWtleQ=="
CONN = (f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};"
        "EndpointSuffix=core.windows.net")
JWT = "eyJhbGciOiJub25lIn0.eyJhdWQiOiJodHRwczovL3N0b3JhZ2UuYXp1cmUuY29tIn0.c2lnbmF0dXJl"


def test_sas_signature_in_url_is_masked_but_url_stays_readable():
    url = f"https://acct.blob.core.windows.net/corpus/a.jsonl?{SAS}"
    out = r.redact(url)
    assert SIG not in out
    assert out.startswith("https://acct.blob.core.windows.net/corpus/a.jsonl?")
    assert "sig=REDACTED" in out and "sp=racwdl" in out


def test_connection_string_fields_are_masked():
    out = r.redact(CONN)
    assert KEY not in out and "AccountKey=REDACTED" in out and "AccountName=acct" in out
    sas_conn = f"BlobEndpoint=https://acct.blob.core.windows.net;SharedAccessSignature={SAS}"
    out = r.redact(sas_conn)
    assert SIG not in out and "SharedAccessSignature=REDACTED" in out


def test_bearer_tokens_and_jwts_are_masked():
    assert JWT not in r.redact(f"Authorization: Bearer {JWT}")
    assert JWT not in r.redact(f"token was {JWT} (expired)")


def test_secret_flags_in_command_lines_and_argv():
    line = (f"python -m pipelines.tokenize --azure-sas-token {SAS} "
            f"--azure_connection_string='{CONN}' --input abfs://c/x --azure-account-key={KEY}")
    out = r.redact(line)
    assert SIG not in out and KEY not in out and "--input abfs://c/x" in out
    argv = ["--azure-sas-token", SAS, "--input", "abfs://c/x", f"--azure_connection_string={CONN}",
            "--azure-account-key", KEY, "--output", f"https://acct.blob.core.windows.net/o?{SAS}"]
    red = r.redact_argv(argv)
    assert red[:4] == ["--azure-sas-token", "REDACTED", "--input", "abfs://c/x"]
    assert red[4] == "--azure_connection_string=REDACTED"
    assert red[6] == "REDACTED"
    assert SIG not in " ".join(red) and KEY not in " ".join(red)


def test_env_assignments_json_and_reprs():
    text = (f'export AZURE_STORAGE_KEY={KEY}\n{{"sas_token": "{SAS}", "runner": "FnApiRunner"}}\n'
            f"{{'azure_connection_string': '{CONN}', 'workers': 2}}")
    out = r.redact(text)
    assert KEY not in out and SIG not in out
    assert '"runner": "FnApiRunner"' in out and "'workers': 2" in out


def test_registered_bare_secret_is_masked_anywhere():
    bare = "QmFyZUtleVdpdGhOb1NoYXBlQXRBbGw="
    assert r.redact(f"key is {bare}.") == f"key is {bare}."
    r.register_secret(bare)
    assert bare not in r.redact(f"key is {bare}.")


def test_redact_options_masks_secret_named_keys_recursively():
    options = {"azure_sas_token": SAS, "input": [f"https://a.blob.core.windows.net/c/x?{SAS}"],
               "nested": {"account_key": KEY, "workers": 4},
               "azure_connection_string": None, "tokenizer_type": "HuggingFaceTokenizer"}
    out = r.redact_options(options)
    assert out["azure_sas_token"] == "REDACTED"
    assert out["nested"] == {"account_key": "REDACTED", "workers": 4}
    assert out["azure_connection_string"] is None
    assert SIG not in out["input"][0]
    assert out["tokenizer_type"] == "HuggingFaceTokenizer"
    assert options["azure_sas_token"] == SAS, "the input mapping is not modified"


def test_ordinary_text_is_untouched_and_redaction_is_idempotent():
    for text in ["tokenizer_model=/x/tokenizer.json", "tc=5812345 sc=7230 dc=7230",
                 "abfs://corpus/raw/en_*.jsonl", "eod_token: 0", "--tokenizer-type GPT2BPETokenizer",
                 "signature=abc", "design=fast"]:
        assert r.redact(text) == text
    once = r.redact(f"{CONN} {SAS} Bearer {JWT}")
    assert r.redact(once) == once


def test_logging_filter_redacts_messages_and_arguments(caplog):
    logger = logging.getLogger("tokenbeam.test.redact")
    r.install_logging_filter(logger)
    with caplog.at_level(logging.INFO, logger="tokenbeam.test.redact"):
        logger.info("opening %s with %s", f"https://a.blob.core.windows.net/c/x?{SAS}", CONN)
    assert SIG not in caplog.text and KEY not in caplog.text
    assert "https://a.blob.core.windows.net/c/x?" in caplog.text


def test_split_secret_flags_takes_both_forms_out_and_registers_the_values():
    argv = ["--input", "abfs://c/x", "--azure-sas-token", SAS, f"--azure_account_key={KEY}",
            "--Azure-Connection-String", CONN, "--append-eod"]
    clean, secrets = r.split_secret_flags(argv)
    assert clean == ["--input", "abfs://c/x", "--append-eod"]
    assert secrets == {"azure_sas_token": SAS, "azure_account_key": KEY,
                       "azure_connection_string": CONN}
    assert KEY not in r.redact(f"the key {KEY} in a sentence")


def test_split_secret_flags_needs_a_value():
    import pytest

    from runtime import errors

    with pytest.raises(ValueError, match="--azure-sas-token needs a value") as raised:
        r.split_secret_flags(["--input", "x", "--azure-sas-token"])
    assert errors.describe(raised.value)[1] == errors.EXIT_USAGE


def test_split_and_redact_argv_know_the_same_flags():
    flags = [f"--{name}" for name in sorted(r.SECRET_NAMES)]
    flags += [f.replace("_", "-") for f in flags]
    for flag in flags:
        assert r.secret_flag(flag) is not None and r.secret_flag(f"{flag}=v") is not None
        argv = [flag, "value-of-the-secret", "--keep", "x"]
        clean, secrets = r.split_secret_flags(argv)
        assert clean == ["--keep", "x"] and list(secrets.values()) == ["value-of-the-secret"]
        assert r.redact_argv(argv) == [flag, "REDACTED", "--keep", "x"]
    for plain in ("--input", "--json-keys", "-azure-sas-token", "azure_sas_token",
                  "--tokenizer-model"):
        assert r.secret_flag(plain) is None


_PIECES = ["sig=", "AccountKey=", "SharedAccessSignature=", "Bearer ", "bearer\t", "SharedKey a:",
           "https://", "u:p@", "eyJabcdefgh.", "ijklmnop.", "--", "password", "=", ":", " ", "/",
           "abc", "K9+/=", ";", "&", "\"", "'"]


@given(st.lists(st.sampled_from(_PIECES), max_size=8).map("".join))
@settings(max_examples=1000)
@example("--password abc Bearer abc SharedKey a:K9+/ eyJabcdefgh.ijklmnop.abc")
def test_the_shortcut_for_texts_no_pattern_can_match_changes_no_result(text):
    every_pattern = text
    for pattern, replacement in r._PATTERNS:
        every_pattern = pattern.sub(replacement, every_pattern)
    assert r.redact(text) == every_pattern
