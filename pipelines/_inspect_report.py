"""The HTML page of ``python -m pipelines.inspect PATH --report [FILE]``: one self-contained file.

What it shows: the per-dataset table (documents, sequences, tokens, tokens per input byte, the
input's bad records, a small length histogram each), the shards not committed (failed, with the
reason from ``_failures/``), the document-length histogram of them all,
the tokenizer, versions and options ``metadata.json`` recorded (secrets redacted again:
runtime/redact.py), and the bad records' reasons and first examples from ``_errors/``.

The page opens offline and cannot be turned against its reader (DESIGN.md rule 16):

- no network: CSS, the one script (sortable tables) and the SVG histograms are inline; its
  Content-Security-Policy allows nothing to be fetched and only that script (by its hash) to run;
- every text taken from names or data (shard and input names, bad records' snippets, options) is
  written through :func:`text`: control characters escaped (:func:`dataio.naming.printable`),
  credentials masked, then HTML-escaped, so that a ``<script>`` in a record stays text.

Pure functions over what :mod:`pipelines.inspect` read (no Beam import); :func:`render` returns
the page as a string.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import datetime as dt
import hashlib
import html
import json
import re

import numpy as np

from dataio import fs as fsutil
from runtime import redact
from dataio.manifest import ERRORS_DIR, failure_record_path
from dataio.naming import printable

MAX_EXAMPLES = 100        # bad records listed one by one (all are counted)
MAX_ROW_HISTOGRAMS = 500  # datasets given a small histogram in their row (the page stays small)
BINS = 60
ROW_BINS = 24


def text(value) -> str:
    """``value`` as page text: control characters escaped, credentials masked, HTML-escaped."""
    return html.escape(redact.redact(printable(str(value))), quote=True)


# -- what the page shows, gathered -----------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """One dataset of the table; ``input_bytes`` and ``bad_records`` are None when unknown
    (a dataset metadata.json does not list)."""

    name: str
    documents: int
    sequences: int
    tokens: int
    dtype: str
    lengths: np.ndarray
    input: str | None = None
    input_bytes: int | None = None
    bad_records: int | None = None


@dataclasses.dataclass(frozen=True)
class BadRecords:
    total: int = 0
    by_input: dict = dataclasses.field(default_factory=dict)   # input path -> count
    by_reason: list = dataclasses.field(default_factory=list)  # (reason, count), most first
    examples: list = dataclasses.field(default_factory=list)   # the first MAX_EXAMPLES reports
    unreadable: int = 0                                        # lines that are not a report


def reason_kind(reason: str) -> str:
    """A bad record's reason without its particulars (``not valid JSON (Expecting ',' ...)``
    -> ``not valid JSON``; ``missing key 'text' (keys present: a); set --json-keys`` ->
    ``missing key 'text'``), so that the reasons group."""
    return re.split(r" \(|; ", reason, maxsplit=1)[0].strip() or reason


def read_bad_records(output: str) -> BadRecords:
    """The reports of ``{output}/_errors/*.jsonl`` (dataio/sink.py writes them), read line by
    line: all counted, by input and by reason, the first :data:`MAX_EXAMPLES` kept."""
    folder = fsutil.join(output, ERRORS_DIR)
    total = unreadable = 0
    by_input: collections.Counter = collections.Counter()
    by_reason: collections.Counter = collections.Counter()
    examples = []
    for relative in sorted(fsutil.files_under(folder)):
        if not relative.endswith(".jsonl"):
            continue
        with fsutil.open_file(fsutil.join(folder, relative), "rb") as lines:
            for raw in lines:
                if not raw.strip():
                    continue
                try:
                    report = json.loads(raw)
                    reason = str(report["reason"])
                except (ValueError, KeyError, TypeError):
                    unreadable += 1
                    continue
                total += 1
                by_input[str(report.get("file"))] += 1
                by_reason[reason_kind(reason)] += 1
                if len(examples) < MAX_EXAMPLES:
                    examples.append(report)
    return BadRecords(total, dict(by_input), by_reason.most_common(), examples, unreadable)


def not_committed(output: str, meta: dict | None) -> list[dict]:
    """The shards ``metadata.json`` lists as not committed (failed, or missing after the run),
    each with the reason its ``_failures/`` record gives (one read per such shard)."""
    found = []
    for entry in (meta or {}).get("shards") or []:
        if not isinstance(entry, dict) or entry.get("status") in ("written", "skipped"):
            continue
        reason = None
        try:
            reason = json.loads(fsutil.read_bytes(
                failure_record_path(output, str(entry.get("shard"))))).get("reason")
        except (OSError, ValueError, AttributeError):
            pass  # no record (a shard missing after the run) or an unreadable one
        found.append({"shard": entry.get("shard"), "input": entry.get("input"),
                      "status": entry.get("status"), "reason": reason})
    return found


def length_bins(lengths: np.ndarray, bins: int) -> tuple[np.ndarray, bool]:
    """Bin edges for a histogram of document lengths, and whether they are log-spaced (when the
    lengths span over two decades). ``lengths`` non-empty, of non-empty documents."""
    low, high = max(1, int(lengths.min())), int(lengths.max())
    log = high / low > 100
    edges = np.geomspace(low, high + 1, bins + 1) if log else np.linspace(low, high + 1, bins + 1)
    return edges, log


# -- SVG -------------------------------------------------------------------------------------


def _number(value: float) -> str:
    return f"{value:,.0f}"


def histogram_svg(lengths: np.ndarray, *, width: int = 760, height: int = 260,
                  bins: int = BINS, small: bool = False) -> str:
    """An inline SVG histogram of ``lengths`` (tokens per non-empty document); ``small``: a
    sparkline for a table row (no axes). Each bar's tooltip gives its range and count."""
    if lengths.size == 0:
        return ('<span class="none">no non-empty documents</span>' if not small
                else '<span class="none">-</span>')
    edges, log = length_bins(lengths, bins)
    counts, _ = np.histogram(lengths, bins=edges)
    left, right, top, bottom = (0, 0, 0, 0) if small else (56, 44, 14, 40)
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(int(counts.max()), 1)
    bar_w = plot_w / len(counts)
    parts = [f'<svg class="{"spark" if small else "hist"}" xmlns="http://www.w3.org/2000/svg" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="document length histogram">']
    for j, count in enumerate(counts):
        if not count:
            continue
        h = plot_h * int(count) / peak
        lo, hi = int(np.ceil(edges[j])), int(np.ceil(edges[j + 1])) - 1
        parts.append(f'<rect x="{left + j * bar_w:.2f}" y="{top + plot_h - h:.2f}" '
                     f'width="{max(bar_w - 0.5, 0.5):.2f}" height="{h:.2f}">'
                     f'<title>{_number(lo)}-{_number(max(hi, lo))} tokens: {int(count):,} '
                     f'documents</title></rect>')
    if not small:
        def x_of(value: float) -> float:
            span = (np.log(edges[-1]) - np.log(edges[0])) if log else edges[-1] - edges[0]
            at = (np.log(value) - np.log(edges[0])) if log else value - edges[0]
            return left + plot_w * float(at / span)

        base = top + plot_h
        parts.append(f'<line class="axis" x1="{left}" y1="{base}" x2="{left + plot_w}" '
                     f'y2="{base}"/><line class="axis" x1="{left}" y1="{top}" x2="{left}" '
                     f'y2="{base}"/>')
        for k in range(5):
            value = float(edges[0] + (edges[-1] - edges[0]) * k / 4) if not log else \
                float(np.exp(np.log(edges[0]) + (np.log(edges[-1]) - np.log(edges[0])) * k / 4))
            parts.append(f'<text x="{x_of(value):.1f}" y="{base + 16}" text-anchor="middle">'
                         f'{_number(value)}</text>')
        parts.append(f'<text x="{left - 6}" y="{top + 10}" text-anchor="end">{peak:,}</text>'
                     f'<text x="{left - 6}" y="{base}" text-anchor="end">0</text>'
                     f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">'
                     f'document length (tokens{", log scale" if log else ""})</text>')
        for p, style, y in ((50, "p50", top + 10), (99, "p99", top + 26)):
            value = float(np.percentile(lengths, p))
            x = x_of(min(max(value, float(edges[0])), float(edges[-1])))
            anchor = "end" if x > left + plot_w * 0.8 else "start"  # keep the label inside
            label_x = x - 3 if anchor == "end" else x + 3
            parts.append(f'<line class="{style}" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" '
                         f'y2="{base}"/><text class="{style}" x="{label_x:.1f}" y="{y}" '
                         f'text-anchor="{anchor}">p{p} {_number(value)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- the page --------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;
color:#222}
h1{font-size:20px;margin-bottom:4px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;
vertical-align:middle}th{background:#f4f6f8;text-align:left;cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
td.n{text-align:right;font-variant-numeric:tabular-nums}tfoot td{font-weight:600}
td.name,td.snippet{font-family:ui-monospace,monospace;font-size:12px;word-break:break-all}
.kv th{cursor:default;width:14em}.none{color:#888}.muted{color:#666}h3.bad{color:#b03030}
svg.hist rect{fill:#4878a8}svg.spark rect{fill:#7ea3c8}svg text{font-size:11px;fill:#444}
svg .axis{stroke:#888}svg line.p50,svg line.p99{stroke:#c44e52;stroke-dasharray:4 3}
svg text.p50,svg text.p99{fill:#c44e52;paint-order:stroke;stroke:#fff;stroke-width:3px}
pre{white-space:pre-wrap;word-break:break-all;background:#f8f8f8;padding:8px}
"""

_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], up = th.getAttribute("aria-sort") !== "ascending";
      var keyed = Array.prototype.map.call(body.rows, function (row) {
        var cell = row.cells[col];
        return {row: row, v: "v" in cell.dataset ? parseFloat(cell.dataset.v) : null,
                t: cell.textContent};
      });
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      keyed.sort(function (a, b) {
        var d = (a.v !== null && b.v !== null) ? a.v - b.v : a.t.localeCompare(b.t);
        return up ? d : -d;
      });
      var rows = document.createDocumentFragment();
      keyed.forEach(function (k) { rows.appendChild(k.row); });
      body.appendChild(rows);
    });
  });
});
"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def _num(value, fmt: str = "{:,}") -> str:
    """A numeric cell (sortable by its value); an unknown value is a dash."""
    if value is None:
        return '<td class="n none" data-v="-1">-</td>'
    return f'<td class="n" data-v="{value}">{fmt.format(value)}</td>'


def _ratio(tokens: int, size: int | None) -> float | None:
    return None if not size else tokens / size


def _shard_table(rows: list[Row]) -> str:
    head = ("<thead><tr><th>dataset</th><th>documents</th><th>sequences</th><th>tokens</th>"
            "<th>dtype</th><th>input bytes</th><th>tokens per byte</th>"
            "<th>bad records (its input)</th><th>length histogram</th></tr></thead>")
    body = []
    for j, r in enumerate(rows):
        spark = (histogram_svg(r.lengths[r.lengths > 0], width=120, height=26, bins=ROW_BINS,
                               small=True)
                 if j < MAX_ROW_HISTOGRAMS else '<span class="none">-</span>')
        title = f' title="input: {text(r.input)}"' if r.input else ""
        body.append(f'<tr><td class="name"{title}>{text(r.name)}</td>{_num(r.documents)}'
                    f'{_num(r.sequences)}{_num(r.tokens)}<td>{text(r.dtype)}</td>'
                    f'{_num(r.input_bytes)}{_num(_ratio(r.tokens, r.input_bytes), "{:.3f}")}'
                    f'{_num(r.bad_records)}<td>{spark}</td></tr>')
    sizes = [r.input_bytes for r in rows]
    known = None if any(s is None for s in sizes) else sum(sizes)
    tokens = sum(r.tokens for r in rows)
    # an input with several --json-keys has several rows: its bad records count once
    per_input = {r.input: r.bad_records for r in rows if r.input and r.bad_records is not None}
    foot = (f'<tfoot><tr><td>total ({len(rows)} dataset{"s" * (len(rows) != 1)})</td>'
            f'{_num(sum(r.documents for r in rows))}{_num(sum(r.sequences for r in rows))}'
            f'{_num(tokens)}<td>{text(",".join(sorted({r.dtype for r in rows})))}</td>'
            f'{_num(known)}{_num(_ratio(tokens, known), "{:.3f}")}'
            f'{_num(sum(per_input.values()) if per_input else None)}<td></td></tr></tfoot>')
    more = (f'<p class="muted">Row histograms for the first {MAX_ROW_HISTOGRAMS:,} datasets.</p>'
            if len(rows) > MAX_ROW_HISTOGRAMS else "")
    return (f'<table class="sortable" id="shards">{head}<tbody>{"".join(body)}</tbody>{foot}'
            f'</table>{more}')


def _kv_table(pairs, *, table_id: str) -> str:
    cells = "".join(f"<tr><th>{text(k)}</th><td>{v}</td></tr>" for k, v in pairs)
    return f'<table class="kv" id="{table_id}"><tbody>{cells}</tbody></table>'


def _value(value) -> str:
    """A metadata value as page text (lists and mappings as compact JSON)."""
    if isinstance(value, str):
        return text(value)
    return text(json.dumps(value, ensure_ascii=False))  # lists, mappings, true/false/null


def _mapping(value, name: str) -> dict:
    """A metadata.json field redacted, as a mapping (anything else shown under ``name``)."""
    value = redact.redact_options(value if value is not None else {})
    return dict(value) if isinstance(value, dict) else {name: value}


def _tokenizer_section(meta: dict | None) -> str:
    if not isinstance(meta, dict) or not meta:
        return '<p class="none">No metadata.json: tokenizer and options unknown.</p>'
    tokenizer = _mapping(meta.get("tokenizer"), "tokenizer")
    files = tokenizer.pop("files", None)
    pairs = [(k, _value(v)) for k, v in tokenizer.items()]
    pairs += [(f"file {j + 1}", f'{text(f.get("path"))} <span class="muted">sha256 '
                                f'{text(f.get("sha256"))}</span>')
              for j, f in enumerate(files if isinstance(files, list) else [])
              if isinstance(f, dict)]
    pairs += [(k, _value(redact.redact_options(meta[k]))) for k in ("dtype", "level")
              if k in meta]
    options = meta.get("options")
    if isinstance(options, list):  # the command line, as tokenize recorded it
        shown = f'<pre id="options">{text(" ".join(redact.redact_argv(options)))}</pre>'
    else:
        shown = _kv_table([(k, _value(v)) for k, v in _mapping(options, "options").items()],
                          table_id="options")
    run = [(k, _value(meta[k])) for k in ("run_id", "started", "finished") if k in meta]
    versions = [(k, _value(v)) for k, v in _mapping(meta.get("versions"), "versions").items()]
    return ("<h3>Tokenizer</h3>" + _kv_table(pairs, table_id="tokenizer")
            + "<h3>Options</h3>" + shown
            + "<h3>Versions and run</h3>" + _kv_table(versions + run, table_id="run"))


def _bad_section(bad: BadRecords, where: str | None) -> str:
    if where is None:
        return '<p class="none">No tokenize output folder here: bad records unknown.</p>'
    if not bad.total and not bad.unreadable:
        return "<p>No bad records (" + text(ERRORS_DIR) + "/ is empty or absent).</p>"
    reasons = "".join(f'<tr><td>{text(reason)}</td>{_num(count)}</tr>'
                      for reason, count in bad.by_reason)
    out = [f"<p>{bad.total:,} bad record{'s' * (bad.total != 1)} in {text(where)}"
           + (f"; {bad.unreadable:,} unreadable line{'s' * (bad.unreadable != 1)} there"
              if bad.unreadable else "") + ".</p>",
           '<table class="sortable" id="reasons"><thead><tr><th>reason</th><th>records</th>'
           f"</tr></thead><tbody>{reasons}</tbody></table>"]
    rows = "".join(
        f'<tr><td class="name">{text(r.get("file"))}</td>{_num(r.get("line"))}'
        f'{_num(r.get("offset"))}<td>{text(r.get("reason"))}</td>'
        f'<td class="snippet">{text(r.get("snippet", ""))}</td></tr>' for r in bad.examples)
    shown = (f"the first {len(bad.examples):,}" if bad.total > len(bad.examples) else "all")
    out.append(f"<h3>Examples ({shown})</h3>"
               '<table class="sortable" id="bad-records"><thead><tr><th>file</th><th>line</th>'
               "<th>byte offset</th><th>reason</th><th>snippet</th></tr></thead>"
               f"<tbody>{rows}</tbody></table>")
    return "".join(out)


def _failed_section(failed: list[dict]) -> str:
    if not failed:
        return ""
    rows = "".join(f'<tr><td class="name">{text(f["shard"])}</td><td>{text(f["status"])}</td>'
                   f'<td>{text(f["reason"] or "no failure record")}</td>'
                   f'<td class="name">{text(f["input"])}</td></tr>' for f in failed)
    return (f'<h3 class="bad">Not committed ({len(failed):,})</h3>'
            '<table class="sortable" id="failed"><thead><tr><th>shard</th><th>status</th>'
            f"<th>reason</th><th>input</th></tr></thead><tbody>{rows}</tbody></table>")


def render(*, title: str, rows: list[Row], meta: dict | None, bad: BadRecords,
           errors_where: str | None, vocab_size: int | None, summary: dict[str, float],
           empty: int, failed: list[dict] = ()) -> str:
    """The whole page. ``summary``: :func:`pipelines.inspect.length_summary` of the non-empty
    documents; ``errors_where``: the ``_errors/`` folder read (None: no output folder);
    ``failed``: :func:`not_committed`."""
    lengths = (np.concatenate([r.lengths for r in rows]) if rows else np.zeros(0, np.int64))
    lengths = lengths[lengths > 0]
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    stats = " &middot; ".join(
        f"{k} {v:,.1f}" if k == "mean" else f"{k} {v:,.0f}" for k, v in summary.items())
    vocab = f"{vocab_size:,}" if vocab_size is not None else "unknown (no metadata.json)"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_csp()}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>tokenbeam report: {text(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>tokenbeam report: {text(title)}</h1>"
        f'<p class="muted">Written {text(now)} by python -m pipelines.inspect --report. '
        "Click a column's heading to sort.</p>"
        f"<h2>Datasets</h2><p>Vocabulary size {vocab}; {empty:,} empty "
        f"document{'s' * (empty != 1)}. Tokens per byte: the dataset's tokens over its input "
        "file's bytes.</p>" + _shard_table(rows) + _failed_section(list(failed))
        + "<h2>Document lengths</h2>"
        + (f"<p>{lengths.size:,} non-empty documents: {stats}</p>" if summary else "")
        + histogram_svg(lengths)
        + "<h2>Tokenizer and options</h2>" + _tokenizer_section(meta)
        + "<h2>Bad records</h2>" + _bad_section(bad, errors_where)
        + f"<script>{_SCRIPT}</script></body></html>\n")
