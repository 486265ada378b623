"""Shared fixtures: a generated multilingual corpus and a tokenizer trained on it. The
independent format reference the tests compare against is in tests/megatron_reference.py."""

import json
import os
import sys

import pytest

# Compiled modules are cached (__pycache__/, ignored by git) even where PYTHONDONTWRITEBYTECODE is
# set, as on the 2-core machine: otherwise pytest rewrites and compiles every test module on every
# run, and every process a test starts compiles tokenbeam's modules again (1.1 s of compiling in a
# 5.5 s run of one test). Only this test session and the processes it starts.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

from pipelines import demo  # noqa: E402

# --- the two tiers -------------------------------------------------------------------------------
# `pytest -m "not slow"` is the unit tier (each transform, DoFn, CombineFn and command's pieces on
# its own; about a minute on 2 cores); `pytest` (the README's test command) runs everything. A test
# is slow when it runs a whole job (pipelines.*.run, a CLI subprocess), injects faults into one, or
# needs a real service. The tiers are folders:
# - tests/e2e/ holds every such test; its conftest.py marks all of them slow, so a file there needs
#   no marker. The service fixtures live beside their users (tests/e2e/azure/conftest.py: Azurite;
#   tests/e2e/runners/conftest.py: Flink, SLURM, Spark/Livy, the DirectRunner reference), one
#   service per session.
# - every other folder is the unit tier and mirrors the package it tests (tests/dataio/,
#   tests/transforms/, tests/transforms/tokenizer/, tests/runtime/, tests/runners/, and
#   tests/pipelines/test_<command>.py); tests/ itself holds the whole-project checks (README, docs
#   site, import graph, setup.py) and the helpers the tests import by name.
# - a unit file keeps a few whole-job tests only with `@pytest.mark.slow` on each; and any test
#   that requests a service fixture is marked here wherever it lives, so a service test cannot land
#   in the unit tier by forgetting the marker.
SERVICE_FIXTURES = frozenset({
    "azurite", "container", "own_azurite",       # tests/e2e/azure/conftest.py: Azurite (npm)
    "flink_stack", "flink_cluster",              # tests/e2e/runners/conftest.py: Flink + job server
    "slurm_cluster",                             # tests/e2e/runners/conftest.py: slurmctld/slurmd
    "spark_cluster", "yarn_cluster",             # tests/e2e/runners/: Spark, Livy, YARN
    "direct_output",                             # tests/e2e/runners/conftest.py: a whole tokenize run
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _backend_check_cache(tmp_path_factory):
    """The fast backend's self-check cache (transforms.tokenizer.check_cache_path) of every test
    in a temporary folder, never the user's ~/.cache; subprocesses inherit it."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg_cache"))
    yield
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    """Three JSONL files: several scripts, code, emoji, empty and long documents."""
    root = tmp_path_factory.mktemp("corpus")
    for k in range(3):
        records = list(demo.documents(100 + k, 240, long_every=61, empty_every=37))
        records.insert(5, {"id": "ws", "lang": "xx", "text": "  leading\tand trailing  \n"})
        records.insert(9, {"id": "ctl", "lang": "xx", "text": "nul\u0000 bell\u0007 \u2028 sep"})
        demo.write_jsonl(str(root / f"c{k}_web.jsonl"), records)
    return root


@pytest.fixture(scope="session")
def corpus_texts(corpus_dir):
    texts = {}
    for path in sorted(corpus_dir.glob("*.jsonl")):
        texts[path.name] = [json.loads(line)["text"] for line in path.open(encoding="utf-8")]
    return texts


@pytest.fixture(scope="session")
def hf_tokenizer(corpus_texts, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok") / "bpe"
    texts = [t for ts in corpus_texts.values() for t in ts if t]
    return demo.train_bpe(texts, str(folder), vocab_size=1200)


@pytest.fixture(scope="session")
def hf_encode(hf_tokenizer):
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(os.path.join(hf_tokenizer, "tokenizer.json"))
    return tok, (lambda s: tok.encode(s, add_special_tokens=False).ids), \
        tok.token_to_id("<|endoftext|>")


# --- Beam unit tests: a pipeline, small inputs written by the test, secrets to look for ----------

@pytest.fixture
def make_pipeline():
    """``make_pipeline()`` -> a TestPipeline on Beam's in-process FnApiRunner (what the local
    runner uses; never Beam 2.77's Prism download). Use it as ``with make_pipeline() as p:``;
    leaving the block runs the pipeline and its ``assert_that`` checks."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from apache_beam.testing.test_pipeline import TestPipeline

    return lambda: TestPipeline(runner=FnApiRunner())


@pytest.fixture
def write_jsonl(tmp_path):
    """``write_jsonl(name, records)`` -> path of ``tmp_path/name`` holding one line per record
    (a dict is dumped as JSON, bytes are written as they are)."""
    def write(name: str, records) -> str:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n"
                                  for r in records))
        return str(path)

    return write


AZURE_SECRETS = ("sv=2024-01-01&sig=unit-tier-sas-NEVER-pickled",
                 "dW5pdC10aWVyLWFjY291bnQta2V5LU5FVkVSLXBpY2tsZWQ=")


@pytest.fixture
def azure_storage_plan():
    """A real worker storage plan (dataio.azure.AzurePlan) made while this process holds an
    Azure SAS token and account key (:data:`AZURE_SECRETS`), as a driver given
    ``--azure-sas-token``/``--azure-account-key`` does. No Azure path is involved, so nothing
    is contacted; the process's Azure state is reset afterwards."""
    from dataio import azure

    azure.reset()
    plan = azure.configure_from_options({"azure_sas_token": AZURE_SECRETS[0],
                                         "azure_account_key": AZURE_SECRETS[1],
                                         "azure_account_name": "unittier"})
    assert plan is not None
    yield plan
    azure.reset()


@pytest.fixture
def ship():
    """``ship(dofn)``: pickle it as Beam ships a DoFn to a worker (cloudpickle), check that no
    secret of :data:`AZURE_SECRETS` is in the bytes, and return the worker's copy."""
    import cloudpickle

    def ship_(obj):
        blob = cloudpickle.dumps(obj)
        for secret in AZURE_SECRETS:
            assert secret.encode() not in blob, f"a secret rides along in the pickled {obj!r}"
        return cloudpickle.loads(blob)

    return ship_
