"""The tokenize job's settings, one record without Beam: the planner makes it from the flags,
the pipeline's transforms run with it, and a shard's resume key hashes what it says
(:meth:`TokenizeConfig.resume_settings`), so that a setting cannot reach the output without
reaching the fingerprint too.

Every field is part of the resume key unless its metadata says otherwise: ``resume=False``
(it cannot change the output bytes), ``resume="sentence"`` (it matters only at the sentence
level; None otherwise), and ``resume_name`` (the key's name, kept from earlier versions so that
committed outputs keep their fingerprints).
"""

from __future__ import annotations

import dataclasses


def _field(default, **metadata):
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class TokenizeConfig:
    keys: tuple[str, ...]
    level: str = "document"  # or "sentence"
    append_eod: bool = False
    skip_empty: bool = False
    holdout_fraction: float = _field(0.0, resume_name="holdout")
    id_key: str | None = None  # the holdout hashes a document's id (its text without one)
    splitter: str = _field("auto", resume="sentence")
    lang: str = _field("english", resume="sentence")
    keep_newlines: bool = _field(False, resume="sentence")
    dtype: str = ""  # of the token ids on disk (numpy's name); "" until the planner decides
    log_interval: int = _field(10_000, resume=False)
    # An input whose records are bad beyond it fails its shards (dataio/sink.py too_many_bad);
    # it decides whether a shard is committed, never what a committed shard holds.
    max_bad_fraction: float = _field(0.1, resume=False)
    # transforms.progress.ProgressPlan: the driver's planned bytes and workers, for progress lines
    progress: object = _field(None, resume=False)

    def resume_settings(self) -> dict:
        """The settings a shard's fingerprint hashes (dataio/manifest.py keeps them in the
        commit record, so a later run can name what changed)."""
        settings = {}
        for f in dataclasses.fields(self):
            role = f.metadata.get("resume", True)
            if role is False:
                continue
            value = getattr(self, f.name)
            if role == "sentence" and self.level != "sentence":
                value = None
            settings[f.metadata.get("resume_name", f.name)] = \
                list(value) if isinstance(value, tuple) else value
        return settings
