"""The metadata table under `.hoodie/metadata/` (labformat's own; Hudi v6 readers ignore it).

Three partitions, each a folder of parquet files named by the instant that wrote them:
- `files/<instant>.parquet`: the latest file slice of every file group as of that instant;
- `column_stats/<instant>.parquet`: per base file and column: min, max, null count, value count;
- `bloom_filters/<instant>.parquet`: the record-key bloom filter of each base file that instant wrote.
`files` and `column_stats` are whole snapshots, so a reader needs one small read each; bloom
filters are large and never change, so each instant adds only its own.

They are written inside the commit protocol, after the base files and before the commit is
published, and only metadata of completed instants is read: a reader never sees the metadata
of an uncommitted instant, and rollback deletes a failed instant's metadata with its data.
"""

from __future__ import annotations

import io
import json
import logging
from datetime import date, datetime, timedelta, timezone
from typing import Any, Protocol, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from labformat.fileformat.bloom_filter import RecordKeyFilter, decode
from labformat.fileformat.legacy_bloom import LEGACY_TYPE
from labformat.model.file_group import FileSlice
from labformat.model.column_stats import ColumnStats
from labformat.storage import Storage
from labformat.timeline import METADATA_DIR, Timeline

log = logging.getLogger(__name__)
# What a damaged or missing metadata file raises when read: the storage's errors (OSError), pyarrow's
# (a failed page checksum, a truncated footer), a missing column (KeyError), a value that does not
# decode (ValueError). Any other exception is a bug of ours and goes on.
_UNREADABLE = (OSError, ValueError, KeyError, pa.ArrowException)

FILES = "files"
COLUMN_STATS = "column_stats"
BLOOM_FILTERS = "bloom_filters"

_FILES_SCHEMA = pa.schema([("partition_path", pa.string()), ("file_id", pa.string()), ("path", pa.string()),
                           ("instant", pa.string()), ("size_bytes", pa.int64()), ("num_records", pa.int64())])
_STATS_SCHEMA = pa.schema([("path", pa.string()), ("column", pa.string()), ("min", pa.string()),
                           ("max", pa.string()), ("null_count", pa.int64()), ("value_count", pa.int64()),
                           ("nan_count", pa.int64())])
# `type`: the filter's type code, as in Hudi's own metadata table; files written before it was
# kept hold labformat's first layout.
_BLOOM_SCHEMA = pa.schema([("path", pa.string()), ("bloom", pa.string()), ("type", pa.string())])


class IndexedBaseFile(Protocol):
    """What the metadata table records of a base file: a write task's BaseFileStat, or a rebuild's row.
    Read-only members (properties), so that a BaseFileStat's `column_stats: str` fits `str | None`."""

    @property
    def path(self) -> str: ...
    @property
    def column_stats(self) -> str | None: ...  # JSON, per column: [min, max, nulls, values, NaNs]
    @property
    def bloom(self) -> str | None: ...  # the encoded bloom filter; None: not kept
    @property
    def bloom_type(self) -> str: ...  # its type code


def _path(partition: str, instant: str) -> str:
    return f"{METADATA_DIR}/{partition}/{instant}.parquet"


def _publish_table(storage: Storage, rel: str, table: pa.Table) -> None:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", write_page_checksum=True)
    storage.publish(rel, sink.getvalue())


def _read_table(storage: Storage, rel: str) -> pa.Table:
    # A flipped bit fails its page's checksum (the readers then say why and fall back to footers)
    # instead of a wrong min/max pruning a file that holds a match. Files without checksums read as they are.
    return pq.ParquetFile(io.BytesIO(storage.read_bytes(rel)), page_checksum_verification=True).read()


# ---- values -----------------------------------------------------------------------------------

def decode_value(raw: Any, dtype: T.DataType) -> Any:
    """A stored min/max back to a Python value of the column's type (timestamps: aware UTC datetimes)."""
    if raw is None:
        return None
    if isinstance(dtype, T.TimestampType):
        return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=raw)
    if isinstance(dtype, T.TimestampNTZType):
        return datetime(1970, 1, 1) + timedelta(microseconds=raw)
    if isinstance(dtype, T.DateType):
        return date(1970, 1, 1) + timedelta(days=raw)
    return raw


# ---- writing ----------------------------------------------------------------------------------

def write_metadata(storage: Storage, timeline: Timeline, instant: str, slices_after: list[FileSlice],
                   new_stats: Sequence[IndexedBaseFile], column_stats: bool, bloom_filters: bool,
                   carry_over: bool = True, columns: tuple[str, ...] | None = None) -> None:
    """Write this instant's metadata: the files snapshot, the column stats snapshot, new bloom filters.

    The column stats of files this instant did not write are carried over from the last
    snapshot; when that snapshot is missing or stale the new one is incomplete too, and
    readers detect it (and fall back to footers) until `rebuild` runs.
    """
    files = pa.Table.from_pylist(
        [{"partition_path": s.partition_path, "file_id": s.file_id, "path": s.path, "instant": s.base_instant_time,
          "size_bytes": s.size_bytes, "num_records": s.num_records} for s in slices_after], schema=_FILES_SCHEMA)
    _publish_table(storage, _path(FILES, instant), files)
    if column_stats:
        live = {s.path for s in slices_after}
        rows = []
        previous = MetadataReader(storage, timeline).latest(COLUMN_STATS) if carry_over else None
        if previous is not None:
            try:
                old = _read_table(storage, previous).to_pylist()
            except _UNREADABLE as exc:  # damaged metadata must not block writes
                log.warning("%s: the metadata table's column stats %s are unreadable (%s: %s); this commit's "
                            "snapshot lacks the other files' stats, so readers use footers until a rebuild",
                            storage.base_uri, previous, type(exc).__name__, exc)
                old = []  # the new snapshot lacks those files' stats: readers see it as stale
            rows += [r for r in old if r["path"] in live]
        for stat in new_stats:
            for column, (low, high, nulls, count, nans) in json.loads(stat.column_stats or "{}").items():
                if columns and column not in columns:
                    continue
                rows.append({"path": stat.path, "column": column, "min": json.dumps(low), "max": json.dumps(high),
                             "null_count": nulls, "value_count": count, "nan_count": nans})
        _publish_table(storage, _path(COLUMN_STATS, instant), pa.Table.from_pylist(rows, schema=_STATS_SCHEMA))
    if bloom_filters:
        rows = [{"path": s.path, "bloom": s.bloom, "type": s.bloom_type} for s in new_stats if s.bloom]
        _publish_table(storage, _path(BLOOM_FILTERS, instant), pa.Table.from_pylist(rows, schema=_BLOOM_SCHEMA))


def delete_metadata_of(storage: Storage, instant: str) -> None:
    """Delete the metadata table's entries an instant wrote (before writing them again)."""
    for partition in (FILES, COLUMN_STATS, BLOOM_FILTERS):
        storage.delete(_path(partition, instant))


# ---- reading ----------------------------------------------------------------------------------

class MetadataReader:
    """Reads the metadata of completed instants only, up to `as_of`.

    The latest snapshot is that of the instant that completed last, not of the latest instant
    time: with concurrent writers an earlier instant may complete after a later one, and its
    snapshot, written at its commit, is the one that includes the other's files.
    """

    def __init__(self, storage: Storage, timeline: Timeline, as_of: str | None = None):
        self.storage = storage
        order = [i.time for i in timeline.completed_writes_by_completion(as_of)]
        self.completed = set(order)
        self._rank = {time: n for n, time in enumerate(order)}
        self.latest_instant = order[-1] if order else None
        self.files_read = 0  # metadata-table files this reader opened, for the reports that count them
        self.entries_read = 0  # their rows (column stats: one per file and column; bloom filters: one per file)

    def _instants(self, partition: str) -> list[str]:
        """The completed instants with an entry in `partition`, in the order they completed."""
        out = []
        for info in self.storage.list(f"{METADATA_DIR}/{partition}"):
            leaf = info.path.rsplit("/", 1)[-1]
            if leaf.endswith(".parquet") and leaf[:-8] in self.completed:
                out.append(leaf[:-8])
        return sorted(out, key=self._rank.__getitem__)

    def latest(self, partition: str) -> str | None:
        instants = self._instants(partition)
        return _path(partition, instants[-1]) if instants else None

    def column_stats(self, expected: list[FileSlice], schema: T.StructType
                     ) -> tuple[dict[str, dict[str, ColumnStats]] | None, str]:
        """Per base file path, per column: its stats. None (and the reason) when missing, stale or corrupt."""
        instants = self._instants(COLUMN_STATS)
        if not instants:
            return None, "no column stats in the metadata table"
        if instants[-1] != self.latest_instant:
            return None, f"column stats are stale (newest {instants[-1]}, table at {self.latest_instant})"
        try:
            self.files_read += 1
            rows = _read_table(self.storage, _path(COLUMN_STATS, instants[-1])).to_pylist()
            self.entries_read += len(rows)
        except _UNREADABLE as exc:  # an unreadable file is not trusted: the footers answer
            log.warning("%s: the metadata table's column stats are unreadable (%s: %s); using the base files' "
                        "footers", self.storage.base_uri, type(exc).__name__, exc)
            return None, f"column stats unreadable ({type(exc).__name__}: {exc})"
        types = {f.name: f.dataType for f in schema.fields}
        out: dict[str, dict[str, ColumnStats]] = {}
        for r in rows:
            if r["column"] in types:
                out.setdefault(r["path"], {})[r["column"]] = ColumnStats(
                    decode_value(json.loads(r["min"]), types[r["column"]]),
                    decode_value(json.loads(r["max"]), types[r["column"]]), r["null_count"], r["value_count"],
                    r["nan_count"])
        missing = {s.path for s in expected} - set(out)
        if missing:
            return None, f"column stats are stale: {len(missing)} base files have none"
        return out, "metadata table"

    def bloom_filters(self, paths: list[str]) -> tuple[dict[str, RecordKeyFilter] | None, str]:
        """The bloom filters of these base files, read from the instants that wrote them."""
        wanted = set(paths)
        found: dict[str, RecordKeyFilter] = {}
        try:
            for instant in reversed(self._instants(BLOOM_FILTERS)):  # candidates are mostly new files
                if not wanted - set(found):
                    break
                self.files_read += 1
                table = _read_table(self.storage, _path(BLOOM_FILTERS, instant))
                self.entries_read += table.num_rows
                types = (table.column("type").to_pylist() if "type" in table.column_names
                         else [LEGACY_TYPE] * table.num_rows)
                for path, raw, kind in zip(table.column("path").to_pylist(), table.column("bloom").to_pylist(), types):
                    if path in wanted:
                        found[path] = decode(raw, kind)
        except _UNREADABLE as exc:  # as for column stats
            log.warning("%s: the metadata table's bloom filters are unreadable (%s: %s); using the base files' "
                        "footers", self.storage.base_uri, type(exc).__name__, exc)
            return None, f"bloom filters unreadable ({type(exc).__name__}: {exc})"
        if wanted - set(found):
            return None, f"bloom filters missing for {len(wanted - set(found))} base files"
        return found, "metadata table"
