"""Planning samples of an input, bounded in bytes stored and decompressed: what ``--dry-run``'s
estimates and the first-records check read (pipelines/tokenize/estimate.py)."""

from __future__ import annotations

import gzip

from dataio import fs as fsutil
from dataio.elements import WorkItem
from dataio.readers import Capped, InputFile


# A planning sample (:func:`sample_item`) reads at most this much of a JSONL file, stored and
# decompressed: a 2 MB .gz whose first line unpacks to 2 GB is judged from its first MiB.
SAMPLE_BYTES = 1 << 20


# ... and of a Parquet file, the first row group's requested columns if they hold no more than
# this uncompressed (their size is in the footer); a larger row group gives no sample.
PARQUET_SAMPLE_BYTES = 64 << 20


# ... and of a compressed file streamed to measure how it unpacks (counted, never held), at most
# this many decompressed bytes.
SAMPLE_UNPACKED = 256 << 20


def sample_item(f: InputFile, *, head: int | None = None) -> WorkItem:
    """The work item of a planning sample of ``f`` (the tokenizer self-check, ``--dry-run``'s
    estimates): bounded in bytes (:data:`SAMPLE_BYTES`, :data:`PARQUET_SAMPLE_BYTES`), so no
    input, however its first record is made, costs planning more than that."""
    parquet = f.format == "parquet"
    return WorkItem(path=f.path, stem=f.stem, format=f.format, index=0, error=f.error,
                    row_groups=(0,) if parquet else (),
                    head=head or (PARQUET_SAMPLE_BYTES if parquet else SAMPLE_BYTES))


class _Counting:
    """A binary file read through, counting the bytes read (a decompressor's input)."""

    def __init__(self, raw):
        self._raw, self.read_bytes = raw, 0

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self.read_bytes += len(data)
        return data

    def readable(self) -> bool:
        return True


def decompressed_sizes(path: str, fmt: str, *, stored: int, step: int = 256 << 10,
                       most: int = SAMPLE_UNPACKED) -> list[tuple[int, int]]:
    """How a compressed JSONL file (``fmt``: jsonl.gz or jsonl.zst) unpacks at its start:
    ``(stored bytes read, decompressed bytes)`` after each ``step`` stored bytes or so, up to
    ``stored`` stored bytes or ``most`` decompressed ones (or the end of the file, the last pair
    then being exact). Streamed: memory stays at one read, whatever the ratio. Never raises for
    a damaged file: the pairs are what could be read (the job reports the file)."""
    points: list[tuple[int, int]] = []
    out = 0
    try:
        with fsutil.open_file(path, "rb") as raw:
            counted = _Counting(Capped(raw, stored))
            if fmt == "jsonl.gz":
                stream = gzip.GzipFile(fileobj=counted, mode="rb")
            else:
                import zstandard

                stream = zstandard.ZstdDecompressor().stream_reader(
                    counted, read_size=16 << 10, read_across_frames=True)
            mark = step
            while True:
                chunk = stream.read(1 << 13)  # small reads: the pairs follow the stream closely
                if not chunk:
                    break
                out += len(chunk)
                if out >= most:
                    break
                if counted.read_bytes >= mark:
                    points.append((counted.read_bytes, out))
                    mark = counted.read_bytes + step
            points.append((counted.read_bytes, out))
    except Exception:  # noqa: BLE001 - a damaged or cut-off stream: what was read counts
        pass
    return points
