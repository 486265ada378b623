"""tokenbeam's commands (``python -m pipelines.<command>``).

Every command process leaves Beam's own Azure filesystem (``azfs://``, module
``apache_beam.io.azure.blobstoragefilesystem``) unloaded: tokenbeam reaches Azure through adlfs
(the dataio.azure package), never through Beam's FileSystems. Nothing plain does it:
``import apache_beam`` imports ``apache_beam.io.filesystems``, which imports that module
unconditionally, and it loads the Azure SDK and azure-identity whenever they are installed
(adlfs needs them); Beam has no option to leave a filesystem out. Beam's filesystems module
catches ModuleNotFoundError for a filesystem whose packages are absent, and a ``None`` in
``sys.modules`` raises exactly that. It is set here because this package is imported before
any command module imports Beam (``python -m pipelines.X`` imports it first); a local worker
calls :func:`leave_beam_azure_unloaded` itself before it imports Beam (runners/worker_main.py).
"""

import sys

BEAM_AZURE_FILESYSTEM = "apache_beam.io.azure.blobstoragefilesystem"


def leave_beam_azure_unloaded() -> None:
    """Make ``import apache_beam`` skip its Azure filesystem (see above); before Beam's import."""
    sys.modules.setdefault(BEAM_AZURE_FILESYSTEM, None)


leave_beam_azure_unloaded()

# A command's log is set up before its module runs, so that Beam's import-time chatter obeys
# --log-level in every command (reshard imports Beam at the top). While ``python -m
# pipelines.X`` imports this package, sys.argv[0] is "-m" (see the docs of ``python -m``); a
# console script's argv[0] is its own name. Library use (tests, notebooks) is left alone.
if sys.argv and (sys.argv[0] == "-m" or sys.argv[0].rsplit("/", 1)[-1].startswith("tokenbeam-")):
    from runtime import log as _log

    _log.setup(_log.level_from_argv(sys.argv[1:]))
