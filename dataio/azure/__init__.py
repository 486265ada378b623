"""Azure Blob Storage and ADLS Gen2 for :mod:`dataio.fs`: URLs, credentials, commit, lease.

One module per concern; this package re-exports what callers use, so ``from dataio import
azure; azure.configure_from_options(...)`` is the way in:

- :mod:`~dataio.azure.urls`: every URL form that names a blob (abfs, abfss, az, https,
  path-style), parsed into one ``AzureLocation``; connection strings.
- :mod:`~dataio.azure.credentials`: which credential each container uses (SAS, account key,
  connection string, DefaultAzureCredential), checked up front on the driver, re-resolved
  lazily on workers; secrets out of argv before Beam parses it.
- :mod:`~dataio.azure.commit`: :func:`replace`, a commit that leaves ``target`` whole and
  stores no secret in the account.
- :mod:`~dataio.azure.lease`: :func:`acquire_lease`, one run at a time per output;
  :func:`renew_lease`, the proof (from any process) that a run still holds it.
- :mod:`~dataio.azure.storage_errors`: retries announced, storage faults as one line.
- :mod:`~dataio.azure.scheme`: these URLs as a :mod:`dataio.fs` scheme (registered on import).
- :mod:`~dataio.azure.state`: the one object, :data:`STATE`, holding everything this process
  remembers (secrets, the worker plan, resolved storage options, per-account facts);
  :func:`reset` forgets it.

Secrets never enter a pickled transform, Beam's pipeline options, a log or the storage
account: the plan handed to workers is secret-free, the secrets object refuses to be pickled,
and secrets reach worker processes only through the environment they inherit.

Importing this package imports no Azure SDK (adlfs and azure-* are the ``[azure]`` extra):
each function imports what it calls.
"""

from dataio.azure.commit import replace
from dataio.azure.credentials import (METHOD_TITLES, AzureCredentialError, absorb_sas,
                                      configure_from_options,
                                      filesystem_and_path, method_for, prepare_argv, reset,
                                      with_account)
from dataio.azure.lease import (BlobLease, LeaseHeldError, LeaseLostError, acquire_lease,
                                renew_lease)
from dataio.azure.state import (DEFAULT_BLOCK_SIZE, METHODS, PLAN_ENV, SECRETS_ENV, STATE,
                                AzurePlan, AzureState, configure_worker)
from dataio.azure.scheme import AzureScheme
from dataio.azure.urls import (AZURE_PROTOCOLS, DEV_ACCOUNT, AzureLocation, AzurePathError,
                               is_azure_url, parse, parse_connection_string, strip_sas, url_like)

__all__ = [
    "AZURE_PROTOCOLS", "DEFAULT_BLOCK_SIZE", "DEV_ACCOUNT", "METHODS", "METHOD_TITLES",
    "PLAN_ENV", "SECRETS_ENV", "STATE",
    "AzureCredentialError", "AzureLocation", "AzureScheme", "AzurePathError", "AzurePlan", "AzureState",
    "BlobLease", "LeaseHeldError", "LeaseLostError",
    "absorb_sas", "acquire_lease", "configure_from_options", "configure_worker",
    "filesystem_and_path", "is_azure_url", "method_for", "parse", "parse_connection_string",
    "prepare_argv", "renew_lease", "replace", "reset", "strip_sas", "url_like", "with_account",
]
