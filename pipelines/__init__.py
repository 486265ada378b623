"""tokenbeam's commands (``python -m pipelines.<command>``).

Every command process leaves Beam's own Azure filesystem (``azfs://``, module
``apache_beam.io.azure.blobstoragefilesystem``) unloaded. tokenbeam reads and writes Azure
through adlfs (the dataio.azure package), never through Beam's FileSystems, yet ``import
apache_beam`` loads that module, and with it the Azure SDK and azure-identity, whenever they are installed:
0.37 of Beam's 1.0 s import on the 2-core machine. A ``None`` in ``sys.modules`` makes that import
raise ModuleNotFoundError, which Beam's filesystems module expects for a filesystem whose
packages are absent. Local workers do the same (runners/worker_main.py).
"""

import sys

BEAM_AZURE_FILESYSTEM = "apache_beam.io.azure.blobstoragefilesystem"
sys.modules.setdefault(BEAM_AZURE_FILESYSTEM, None)

# A command's log is set up before its module runs, so that Beam's import-time chatter obeys
# --log-level in every command (reshard imports Beam at the top). While ``python -m
# pipelines.X`` imports this package, sys.argv[0] is "-m" (see the docs of ``python -m``); a
# console script's argv[0] is its own name. Library use (tests, notebooks) is left alone.
if sys.argv and (sys.argv[0] == "-m" or sys.argv[0].rsplit("/", 1)[-1].startswith("tokenbeam-")):
    from runtime import log as _log

    _log.setup(_log.level_from_argv(sys.argv[1:]))
