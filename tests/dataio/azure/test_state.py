"""dataio.azure.state: one object holds what the process knows about Azure; reset forgets it."""

import os
import pickle

import pytest

from dataio import azure


def test_state_refuses_pickling_and_reset_forgets_everything(monkeypatch):
    state = azure.STATE
    with pytest.raises(TypeError, match="must not be pickled"):
        pickle.dumps(state)
    azure.absorb_sas("https://acct.blob.core.windows.net/c/x?sv=1&sig=S1gnatureValue")
    state.hns["acct"] = True
    state.block_from_url["acct"] = False
    state.install_plan(azure.AzurePlan(default_account="acct"))
    assert state.secrets.sas_by_scope == {"acct/c": "sv=1&sig=S1gnatureValue"}
    assert azure.SECRETS_ENV in os.environ and azure.PLAN_ENV in os.environ
    azure.reset()
    assert azure.STATE is state, "one object for the process's lifetime"
    assert (state.secrets.sas_by_scope, state.secrets.keys, state.secrets.connection_string,
            state.plan, state.resolved, state.credentials, state.hns,
            state.block_from_url) == ({}, {}, None, None, {}, {}, {}, {})
    assert azure.SECRETS_ENV not in os.environ and azure.PLAN_ENV not in os.environ


def test_a_worker_adopts_the_plan_and_secrets_its_driver_left_in_the_environment(monkeypatch):
    plan = azure.AzurePlan(default_account="acct", block_size=1000)
    monkeypatch.setenv(azure.PLAN_ENV, plan.to_json())
    monkeypatch.setenv(azure.SECRETS_ENV, '{"sas": {"acct/c": "sv=1&sig=W0rkerSignature"}}')
    assert azure.STATE.plan is None
    assert azure.STATE.current_plan() == plan
    assert azure.STATE.secrets.sas_by_scope == {"acct/c": "sv=1&sig=W0rkerSignature"}
    assert azure.with_account(azure.parse("abfs://c/x")).account == "acct"
