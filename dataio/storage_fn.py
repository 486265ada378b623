"""The base of every DoFn that reaches storage: the one place its worker sets storage up."""

from __future__ import annotations

import apache_beam as beam


class StorageDoFn(beam.DoFn):
    """Applies the run's storage plan (``self._storage``: dataio/azure's credentials and block
    size, or None for local files) once per worker, in ``setup()``, before any element: the plan
    travels with the DoFn without its secrets, so each worker applies it itself. A subclass with
    more to set up calls ``super().setup()`` first."""

    _storage = None

    def setup(self):
        if self._storage is not None:
            self._storage.apply()
