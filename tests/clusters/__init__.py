"""Throw-away clusters on this host (Flink, SLURM, Spark + Livy, Azurite) for the tests and the
benchmarks.

Not shipped (``setup.py`` packages only ``dataio``, ``transforms``, ``pipelines``,
``runners``): import them as ``tests.clusters.local_flink`` and so on, with the repository root
on ``sys.path`` (``python -m pytest`` from the root, or the bench scripts' own path setup).
"""
