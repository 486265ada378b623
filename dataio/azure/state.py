"""The Azure state of this process, in one object: :data:`STATE`, an :class:`AzureState`.

Contract:

- :class:`AzurePlan` is what a driver hands its workers: method names, account names,
  endpoints, the block size. No secret; safe to pickle, print and put in the environment.
- :class:`Secrets` holds the secrets of this process (SAS tokens by scope, account keys, a
  connection string). It refuses to be pickled, so none can ride along in a transform.
- :class:`AzureState` holds everything the package remembers between calls: the secrets, the
  plan, the storage options resolved per "account/container" scope, the azure-identity
  credentials, and what was learnt of each account (hierarchical namespace, Put Block From URL).
  :meth:`AzureState.reset` forgets all of it (tests; a new configuration).
- Secrets cross to worker processes only through this process's environment
  (``SECRETS_ENV``, the plan through ``PLAN_ENV``): :meth:`AzureState.export_to_environment`
  writes them, :meth:`AzureState.load_environment` reads them back.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from typing import Any

from runtime import log
from runtime import redact as redactor
from runtime import workers

METHODS = ("sas", "account-key", "connection-string", "default")
SECRETS_ENV = "TOKENBEAM_AZURE_SECRETS"
PLAN_ENV = "TOKENBEAM_AZURE_PLAN"
DEFAULT_BLOCK_SIZE = 16 * 2**20


@dataclasses.dataclass(frozen=True)
class AzurePlan:
    """How a worker re-resolves Azure credentials: no secret, safe to pickle and to print.

    ``chosen`` maps "account/container" scopes to the method that worked on the driver;
    secrets come from the worker's environment (``SECRETS_ENV`` and the standard
    ``AZURE_STORAGE_*`` variables) or from azure-identity.
    """

    order: tuple[str, ...] = METHODS
    chosen: tuple[tuple[str, str], ...] = ()
    endpoints: tuple[tuple[str, str], ...] = ()
    default_account: str | None = None
    managed_identity_client_id: str | None = None
    block_size: int = DEFAULT_BLOCK_SIZE
    secrets_env: str = SECRETS_ENV

    def apply(self) -> None:
        """Adopt this plan in the current process (a worker's ``DoFn.setup``)."""
        log.ensure()   # a cluster worker's log: no line per Azure request (runtime/log.py)
        configure_worker(self)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "AzurePlan":
        raw = json.loads(text)
        for key in ("order",):
            raw[key] = tuple(raw[key])
        for key in ("chosen", "endpoints"):
            raw[key] = tuple(tuple(pair) for pair in raw[key])
        return cls(**raw)



class Secrets:
    """Secrets of this process. Refuses to be pickled so none can ride along in a transform."""

    def __init__(self):
        self.sas_by_scope: dict[str, str] = {}   # "acct/container", "acct" or "" -> SAS
        self.keys: dict[str, str] = {}           # account or "" -> key
        self.connection_string: str | None = None

    def __reduce__(self):
        raise TypeError("Azure secrets are process-local and must not be pickled")

    def to_env_json(self) -> str:
        return json.dumps({"sas": self.sas_by_scope, "keys": self.keys,
                           "connection_string": self.connection_string})

    def merge_env_json(self, text: str) -> None:
        raw = json.loads(text)
        for scope, sas in (raw.get("sas") or {}).items():
            self.sas_by_scope.setdefault(scope, sas)
        for account, key in (raw.get("keys") or {}).items():
            self.keys.setdefault(account, key)
        if raw.get("connection_string") and not self.connection_string:
            self.connection_string = raw["connection_string"]
        for value in [*self.sas_by_scope.values(), *self.keys.values(), self.connection_string]:
            redactor.register_secret(value)



class AzureState:
    """Everything this process remembers about Azure; one instance, :data:`STATE`.

    Each attribute is guarded by ``lock`` where a read and a write must not interleave (a
    resolution, a new plan); refuses to be pickled, as its secrets do.
    """

    def __init__(self):
        self.lock = threading.RLock()
        self._forget()

    def _forget(self) -> None:
        self.secrets = Secrets()
        self.plan: AzurePlan | None = None
        self.resolved: dict[str, tuple[str, dict[str, Any]]] = {}  # scope -> (method, options)
        self.credentials: dict[str | None, tuple[Any, Any]] = {}   # client id -> (aio, sync)
        self.hns: dict[str, bool] = {}              # account -> hierarchical namespace
        self.block_from_url: dict[str, bool] = {}   # account -> has Put Block From URL
        # a worker (configure_worker ran) away from the submitting command: its flags and
        # `az login` do not reach it. Not so in the command's own process (DirectRunner runs
        # the DoFns in it: configure_from_options set ``submitting``) nor in the local workers
        # it starts (--workers N: they inherit its environment, runtime/workers.py).
        self.on_worker = False
        self.submitting = False

    def __reduce__(self):
        raise TypeError("Azure secrets are process-local and must not be pickled")

    def reset(self) -> None:
        """Forget every secret, plan and resolution, here and in the environment."""
        with self.lock:
            self._forget()
            os.environ.pop(PLAN_ENV, None)
            os.environ.pop(SECRETS_ENV, None)

    def install_plan(self, plan: AzurePlan) -> None:
        self.plan = plan
        os.environ[PLAN_ENV] = plan.to_json()

    def current_plan(self) -> AzurePlan:
        """The plan of this process: installed by configure, else the one a driver left in the
        environment (a worker), else the defaults. Adopting one also loads inherited secrets."""
        with self.lock:
            if self.plan is None:
                text = os.environ.get(PLAN_ENV)
                self.plan = AzurePlan.from_json(text) if text else AzurePlan(
                    default_account=os.environ.get("AZURE_STORAGE_ACCOUNT_NAME"))
                self.load_environment()
            return self.plan

    def load_environment(self) -> None:
        text = os.environ.get(self.plan.secrets_env if self.plan else SECRETS_ENV)
        if text:
            self.secrets.merge_env_json(text)

    def export_to_environment(self) -> None:
        """Secrets given by flag or URL go into this process's environment so that worker
        processes started from it inherit them (the value is never printed, pickled or written
        to a file)."""
        secrets = self.secrets
        if secrets.sas_by_scope or secrets.keys or secrets.connection_string:
            os.environ[self.current_plan().secrets_env] = secrets.to_env_json()


STATE = AzureState()


def configure_worker(plan: AzurePlan | None = None) -> None:
    """On a worker (``DoFn.setup``): adopt the driver's plan; secrets come from the
    environment. Cheap and idempotent; paths resolve lazily on first use."""
    with STATE.lock:
        STATE.on_worker = not (STATE.submitting or workers.is_local_worker())
        if plan is not None and STATE.plan != plan:
            STATE.install_plan(plan)
        STATE.load_environment()
