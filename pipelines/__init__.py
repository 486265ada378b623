"""tokenbeam's commands (``python -m pipelines.<command>``).

Every command process leaves Beam's own Azure filesystem (``azfs://``, module
``apache_beam.io.azure.blobstoragefilesystem``) unloaded. tokenbeam reads and writes Azure
through adlfs (dataio/azure.py), never through Beam's FileSystems, yet ``import apache_beam``
loads that module, and with it the Azure SDK and azure-identity, whenever they are installed:
0.37 of Beam's 1.0 s import on the 2-core machine. A ``None`` in ``sys.modules`` makes that import
raise ModuleNotFoundError, which Beam's filesystems module expects for a filesystem whose
packages are absent. Local workers do the same (dataio/worker_main.py).
"""

import sys

BEAM_AZURE_FILESYSTEM = "apache_beam.io.azure.blobstoragefilesystem"
sys.modules.setdefault(BEAM_AZURE_FILESYSTEM, None)
