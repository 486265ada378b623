"""Blend weights for Megatron-LM's ``--data-path`` from shard names, a domain ratio file and
per-language probabilities. Pure functions: no I/O, no Beam.

Contract:

- A shard is named ``{language}_{domain}_..._dc={docs}_sc={seqs}_tc={tokens}``: its language is
  the first ``_`` field of the base name, its domain the second, its tokens ``tc=``.
- ``data_ratio`` is flat ``{domain: multiplier}`` or per language
  ``{language: {domain: multiplier}}``. A multiplier of 0, a domain (or, per language, a language)
  that is not listed, ``tc=0`` or a language probability of 0 leaves the shard out; it stays in
  the report with the reason.
- ``lang_prob`` ``{language: p}`` is normalised to sum to 1.
- For language ``l`` and used shard ``i``: ``weight_i = tc_i * multiplier(l, domain_i)``,
  ``probability_i = weight_i / (sum of weights in l) * lang_prob[l]``; tokens to sample
  ``= probability_i * total_tokens``; epochs ``= tokens to sample / tc_i``. Arithmetic is exact
  (fractions); the probabilities of the used shards sum to exactly 1.
- Errors (:class:`BlendError`, status 1; :class:`ConfigError`, status 2, for a malformed
  configuration; the message names the file and the fix): a shard whose language is
  not in ``lang_prob``; a language in ``lang_prob`` with no shard; a language with a positive
  probability whose shards all weigh 0; malformed names or configuration.
- Exclusions (``exclude``) match a shard's full name or its name without the counts and are
  applied first; an excluded shard's language is not checked.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
import shlex
from fractions import Fraction
from typing import Iterable, Mapping

from runtime import errors
from dataio import naming


class BlendError(errors.TokenbeamError, ValueError):
    """The inputs cannot be blended as asked; the message says which file and what to fix
    (exit status 1)."""


class ConfigError(BlendError, errors.ConfigError):
    """A ratio, probability or exclusion file that is malformed in itself (exit status 2)."""


@dataclasses.dataclass(frozen=True)
class Shard:
    name: str  # base name, without .bin/.idx
    path: str  # what goes into --data-path
    language: str
    domain: str
    tokens: int


def parse_shard(name: str, path: str | None = None) -> Shard:
    """A :class:`Shard` from a prefix (``path`` defaults to the prefix itself)."""
    base = name.rstrip("/").rsplit("/", 1)[-1]
    counts = naming.parse_counts(base)
    if counts is None:
        raise BlendError(f"shard {base!r} has no _dc=N_sc=N_tc=N counts in its name; add them with "
                         "`python -m pipelines.count --input ... --rename`")
    fields = naming.strip_counts(base).split("_")
    if len(fields) < 2 or not fields[0] or not fields[1]:
        raise BlendError(f"shard {base!r} does not start with {{language}}_{{domain}}_; rename it "
                         "so its first two '_' fields are its language and domain")
    return Shard(name=base, path=path if path is not None else name, language=fields[0],
                 domain=fields[1], tokens=counts[2])


def _number(value, *, where: str) -> Fraction:
    # bool is an int in Python; a true/false in a ratio file is a mistake, not 1/0.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (isinstance(value, float) and not math.isfinite(value)):
        raise ConfigError(f"{where}: {value!r} is not a finite number")
    # repr keeps the decimal the user wrote (0.1 -> 1/10), so hand-computed cases are exact.
    number = Fraction(value) if isinstance(value, int) else Fraction(repr(value))
    if number < 0:
        raise ConfigError(f"{where}: {value!r} is negative; use 0 to leave it out")
    return number


@dataclasses.dataclass(frozen=True)
class Ratios:
    """Domain multipliers, flat (``per_language`` is None) or per language."""

    flat: Mapping[str, Fraction] | None
    per_language: Mapping[str, Mapping[str, Fraction]] | None

    def multiplier(self, language: str, domain: str) -> tuple[Fraction | None, str]:
        """``(multiplier, "")`` or ``(None, reason the shard is left out)``."""
        table = self.flat
        if self.per_language is not None:
            if language not in self.per_language:
                return None, f"language {language!r} not in data_ratio"
            table = self.per_language[language]
        if domain not in table:
            return None, f"domain {domain!r} not in data_ratio"
        return table[domain], ""


def parse_ratios(obj, *, source: str = "data_ratio.json") -> Ratios:
    if not isinstance(obj, dict) or not obj:
        raise ConfigError(f"{source}: expected a non-empty object {{domain: multiplier}} or "
                         "{language: {domain: multiplier}}")
    nested = [isinstance(v, dict) for v in obj.values()]
    if all(nested):
        return Ratios(flat=None, per_language={
            lang: {dom: _number(m, where=f"{source}: {lang}.{dom}") for dom, m in table.items()}
            for lang, table in obj.items()})
    if any(nested):
        raise ConfigError(f"{source}: mixes per-language objects and plain multipliers; use either "
                         "{domain: multiplier} or {language: {domain: multiplier}} throughout")
    return Ratios(flat={dom: _number(m, where=f"{source}: {dom}") for dom, m in obj.items()},
                  per_language=None)


def parse_lang_prob(obj, *, source: str = "lang_prob.json") -> dict[str, Fraction]:
    """``{language: p}`` normalised to sum to 1."""
    if not isinstance(obj, dict) or not obj:
        raise ConfigError(f"{source}: expected a non-empty object {{language: probability}}")
    probs = {lang: _number(p, where=f"{source}: {lang}") for lang, p in obj.items()}
    total = sum(probs.values())
    if total == 0:
        raise ConfigError(f"{source}: every probability is 0; give at least one language a "
                         "positive probability")
    return {lang: p / total for lang, p in probs.items()}


def parse_exclude(obj, *, source: str = "exclude.json") -> list[str]:
    """A list of shard names, or ``{"exclude_iterator_name": [...]}``."""
    if isinstance(obj, dict):
        if set(obj) != {"exclude_iterator_name"}:
            raise ConfigError(f"{source}: an object must have exactly one key, "
                             "\"exclude_iterator_name\"; or give a plain list of shard names")
        obj = obj["exclude_iterator_name"]
    if not isinstance(obj, list) or not all(isinstance(n, str) for n in obj):
        raise ConfigError(f"{source}: expected a list of shard names (strings)")
    return [n.rstrip("/").rsplit("/", 1)[-1].removesuffix(".bin").removesuffix(".idx")
            for n in obj]


USED = "used"


@dataclasses.dataclass(frozen=True)
class ShardBlend:
    shard: Shard
    status: str  # USED or the reason it is left out
    multiplier: Fraction | None
    probability: Fraction
    sampled: Fraction  # tokens to sample

    @property
    def used(self) -> bool:
        return self.status == USED

    @property
    def epochs(self) -> Fraction | None:
        return self.sampled / self.shard.tokens if self.shard.tokens else None


@dataclasses.dataclass(frozen=True)
class Blend:
    shards: list[ShardBlend]  # every shard, sorted by name
    total_tokens: int
    lang_prob: dict[str, Fraction]
    max_epochs: Fraction | None
    unmatched_excludes: list[str]

    @property
    def used(self) -> list[ShardBlend]:
        return [s for s in self.shards if s.used]

    def over_max_epochs(self) -> list[ShardBlend]:
        if self.max_epochs is None:
            return []
        return [s for s in self.used if s.epochs is not None and s.epochs > self.max_epochs]


def compute_blend(shards: Iterable[Shard], *, ratios: Ratios, lang_prob: Mapping[str, Fraction],
                  total_tokens: int, exclude: Iterable[str] = (), max_epochs=None,
                  sources: Mapping[str, str] | None = None) -> Blend:
    """The blend described in the module docstring. ``sources`` maps ``"lang_prob"``,
    ``"data_ratio"`` and ``"exclude"`` to the file names used in error messages."""
    src = {"lang_prob": "lang_prob.json", "data_ratio": "data_ratio.json",
           "exclude": "exclude.json", **(sources or {})}
    if total_tokens <= 0:
        raise BlendError(f"--total-tokens must be positive, got {total_tokens}")
    shards = sorted(shards, key=lambda s: s.name)
    if not shards:
        raise BlendError("no shards to blend; check --signature / --input")
    seen: set[str] = set()
    for s in shards:
        if s.name in seen:
            raise BlendError(f"shard {s.name!r} appears twice; give each dataset once")
        seen.add(s.name)

    excluded = set(exclude)
    matched = {n for s in shards for n in (s.name, naming.strip_counts(s.name)) if n in excluded}
    is_excluded = {s.name: s.name in excluded or naming.strip_counts(s.name) in excluded
                   for s in shards}
    kept = [s for s in shards if not is_excluded[s.name]]

    unknown = sorted({s.language for s in kept if s.language not in lang_prob})
    if unknown:
        examples = ", ".join(next(s.name for s in kept if s.language == lang) for lang in unknown)
        raise BlendError(f"{src['lang_prob']} has no probability for language(s) "
                         f"{', '.join(map(repr, unknown))} (e.g. shard {examples}); add them "
                         f"(0 leaves them out) or list those shards in {src['exclude']}")
    languages_with_shards = {s.language for s in kept}
    missing = sorted(set(lang_prob) - languages_with_shards)
    if missing:
        n_excl = sum(is_excluded.values())
        hint = f" ({n_excl} shard(s) excluded by {src['exclude']})" if n_excl else ""
        raise BlendError(f"{src['lang_prob']} lists language(s) "
                         f"{', '.join(map(repr, missing))} but no shard has that language{hint}; "
                         f"remove them from {src['lang_prob']} or add their shards")

    status: dict[str, tuple[str, Fraction | None]] = {}
    for s in shards:
        if is_excluded[s.name]:
            status[s.name] = (f"excluded by {src['exclude']}", None)
            continue
        multiplier, reason = ratios.multiplier(s.language, s.domain)
        if multiplier is None:
            status[s.name] = (reason, None)
        elif multiplier == 0:
            status[s.name] = ("multiplier 0", multiplier)
        elif s.tokens == 0:
            status[s.name] = ("no tokens (tc=0)", multiplier)
        elif lang_prob[s.language] == 0:
            status[s.name] = ("language probability 0", multiplier)
        else:
            status[s.name] = (USED, multiplier)

    weight_of_language: dict[str, Fraction] = {}
    for s in shards:
        reason, multiplier = status[s.name]
        if reason == USED:
            weight_of_language[s.language] = (weight_of_language.get(s.language, Fraction(0))
                                              + s.tokens * multiplier)
    for lang in sorted(languages_with_shards):
        if lang_prob[lang] > 0 and lang not in weight_of_language:
            reasons = sorted({status[s.name][0] for s in kept if s.language == lang})
            raise BlendError(f"language {lang!r} has probability {float(lang_prob[lang]):.6g} but "
                             f"none of its shards can be used ({'; '.join(reasons)}); give its "
                             f"domains a positive multiplier in {src['data_ratio']} or set its "
                             f"probability to 0 in {src['lang_prob']}")

    results = []
    for s in shards:
        reason, multiplier = status[s.name]
        if reason == USED:
            probability = s.tokens * multiplier / weight_of_language[s.language] \
                * lang_prob[s.language]
        else:
            probability = Fraction(0)
        results.append(ShardBlend(shard=s, status=reason, multiplier=multiplier,
                                  probability=probability, sampled=probability * total_tokens))
    return Blend(shards=results, total_tokens=total_tokens, lang_prob=dict(lang_prob),
                 max_epochs=None if max_epochs is None else Fraction(max_epochs),
                 unmatched_excludes=sorted(excluded - matched))


# ---------------------------------------------------------------------------------------------
# outputs

_SAFE_PATH = re.compile(r"[A-Za-z0-9_./:=+@%,-]*")


def bash_word(text: str) -> str:
    """``text`` as one bash word: in double quotes when it has only harmless characters (the
    usual look of a --data-path entry), otherwise single-quoted so that ``$``, backquotes, ``!``,
    quotes and newlines stay literal."""
    if _SAFE_PATH.fullmatch(text):
        return f'"{text}"'
    return shlex.quote(text)


def format_probability(p: Fraction) -> str:
    return repr(float(p))


def render_script(blend: Blend) -> str:
    """A bash file defining ``DATA_PATH=( --data-path "p1" "path1" ... )``. Every name is one
    quoted word (:func:`bash_word`) or, in a comment, escaped (:func:`dataio.naming.printable`):
    sourcing the file defines DATA_PATH and runs nothing, whatever the shard names hold."""
    used = blend.used
    lines = [
        "#!/usr/bin/env bash",
        "# Megatron-LM data blend written by tokenbeam (python -m pipelines.blend).",
        f"# {len(used)} of {len(blend.shards)} shards, {blend.total_tokens} tokens to sample.",
        "# Use: source this file, then pass \"${DATA_PATH[@]}\" to pretrain_gpt.py.",
    ]
    for lang in sorted(blend.lang_prob):
        # A comment ends at a newline: names in comments are written with escapes.
        lines.append(f"#   {naming.printable(lang)}: probability "
                     f"{float(blend.lang_prob[lang]):.6g}")
    lines.append("DATA_PATH=(")
    lines.append("  --data-path")
    for s in used:
        lines.append(f"  {bash_word(format_probability(s.probability))} {bash_word(s.shard.path)}")
    lines.append(")")
    return "\n".join(lines) + "\n"


REPORT_COLUMNS = ["level", "language", "domain", "shard", "status", "multiplier", "probability",
                  "tokens_available", "tokens_used", "tokens_sampled", "epochs", "share_before",
                  "share_after", "over_max_epochs"]


def _fmt(x: Fraction | None, digits: int = 6) -> str:
    return "" if x is None else f"{float(x):.{digits}g}"


def report_rows(blend: Blend) -> list[dict[str, str]]:
    """Every shard, then totals per language, per language and domain, per domain and overall.

    ``tokens_available`` counts every shard (the data before sampling), ``tokens_used`` only the
    shards in the blend; ``epochs`` of a group is its sampled tokens over its used tokens;
    ``share_before``/``share_after`` are shares of all available / all sampled tokens.
    """
    all_tokens = sum(s.shard.tokens for s in blend.shards)
    over = {s.shard.name for s in blend.over_max_epochs()}
    rows = []
    for s in blend.shards:
        rows.append({
            "level": "shard", "language": s.shard.language, "domain": s.shard.domain,
            "shard": s.shard.name, "status": s.status, "multiplier": _fmt(s.multiplier),
            "probability": format_probability(s.probability),
            "tokens_available": str(s.shard.tokens),
            "tokens_used": str(s.shard.tokens if s.used else 0),
            "tokens_sampled": str(round(s.sampled)), "epochs": _fmt(s.epochs),
            "share_before": _fmt(Fraction(s.shard.tokens, all_tokens) if all_tokens else None),
            "share_after": format_probability(s.probability),
            "over_max_epochs": "yes" if s.shard.name in over else "",
        })

    def group(level: str, key, language: str, domain: str) -> dict[str, str]:
        members = [s for s in blend.shards if key(s)]
        available = sum(s.shard.tokens for s in members)
        used = sum(s.shard.tokens for s in members if s.used)
        sampled = sum((s.sampled for s in members), Fraction(0))
        probability = sum((s.probability for s in members), Fraction(0))
        return {
            "level": level, "language": language, "domain": domain, "shard": "",
            "status": f"{sum(s.used for s in members)} of {len(members)} shards used",
            "multiplier": "", "probability": format_probability(probability),
            "tokens_available": str(available), "tokens_used": str(used),
            "tokens_sampled": str(round(sampled)),
            "epochs": _fmt(sampled / used if used else None),
            "share_before": _fmt(Fraction(available, all_tokens) if all_tokens else None),
            "share_after": format_probability(probability),
            "over_max_epochs": str(sum(s.shard.name in over for s in members)) if over else "",
        }

    languages = sorted({s.shard.language for s in blend.shards})
    domains = sorted({s.shard.domain for s in blend.shards})
    for lang in languages:
        rows.append(group("language", lambda s, l=lang: s.shard.language == l, lang, ""))
    for lang in languages:
        for dom in sorted({s.shard.domain for s in blend.shards if s.shard.language == lang}):
            rows.append(group("language_domain", lambda s, l=lang, d=dom:
                              s.shard.language == l and s.shard.domain == d, lang, dom))
    for dom in domains:
        rows.append(group("domain", lambda s, d=dom: s.shard.domain == d, "", dom))
    rows.append(group("total", lambda s: True, "", ""))
    return rows


def render_report(blend: Blend) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=REPORT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(report_rows(blend))
    return out.getvalue()


def summary_lines(blend: Blend) -> list[str]:
    """A short per-language table for the terminal."""
    head = f"{'language':<10} {'probability':>11} {'shards':>9} {'available':>15} " \
           f"{'sampled':>15} {'epochs':>8}"
    lines = [head]
    for row in report_rows(blend):
        if row["level"] in ("language", "total"):
            name = row["language"] or "total"
            shards = row["status"].split(" shards")[0].replace(" of ", "/")
            lines.append(f"{name:<10} {float(row['probability']):>11.6f} {shards:>9} "
                         f"{row['tokens_available']:>15} {row['tokens_sampled']:>15} "
                         f"{row['epochs'] or '-':>8}")
    return lines
