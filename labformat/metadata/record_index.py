"""RECORD_INDEX (Hudi 0.14) in labformat's layout: each key's partition path and file group, in `.hoodie/metadata/record_index/`.

Keys are sharded as Hudi shards them (Java's `String.hashCode` of the key, `abs(abs(h) % shards)`),
so a lookup reads each shard in one Spark task. A shard is a *base* (every live key as of one
completed instant) followed by *deltas* (what each later commit changed: a key's new location,
or `deleted`), as Hudi's metadata table keeps HFiles and log blocks. Per shard and base or delta,
one parquet file sorted by key in row groups of `ROW_GROUP_ROWS` entries: a lookup reads only the
row groups whose key range holds a key it looks for, so its cost follows the keys looked up and
the entries near them, never the number of data files.

Files: `<instant>.<name>.<shard:04d>.parquet` and one manifest `<instant>.<name>.json`, published
last (no manifest, no index data). `name` is `delta` for the changes of the commit `instant`,
written before that commit publishes (a rollback deletes them with the rest of its metadata), or
`base-<stamp>` for a base describing the table as of the completed instant `instant`.

A reader trusts manifests of completed instants only: the newest base, then the deltas of the
instants that completed after it. The index is stale when a write completed after the base
without leaving a delta (it ran without keeping the index): an upsert through RECORD_INDEX then
builds a new base first, and says so.

Every file is verified where it is read, since a wrong entry is silent (a key found nowhere is an
insert: the table then holds it twice). A manifest carries a CRC32 of its own text and, per file,
its entries, its size and a CRC32 of its parquet footer (which names the file itself, so a file
copied over another fails it); the files carry parquet page checksums. The driver compares sizes
with its listing (no extra read); a task compares the rest on the files it opens, and raises
CorruptIndexError. Either way the index is rebuilt from the base files. So is an index that a
commit left *untrusted*: one that stored a key in a second file group (a non-global index, a bulk
insert), which the delta's own tasks detect; the rebuild then refuses the table.
"""

from __future__ import annotations

import bisect
import io
import json
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, Observation, Row, SparkSession
from pyspark.sql import functions as F

from labformat.errors import ConfigError, CorruptIndexError
from labformat.fileformat.java_hash import record_index_shards
from labformat.fileformat.log_file import (BlockType, LogFormatError, data_block_keys, deleted_records, live_blocks,
                                           read_blocks)
from labformat.fileformat.parquet_io import read_base_file, unreadable
from labformat.model.file_group import FileSlice
from labformat.storage import Storage
from labformat.timeline import METADATA_DIR, Timeline
from labformat.spark.compat import default_parallelism
from labformat.spark.partitioning import partitioned_by
from labformat.spark.tasks import map_in_arrow, apply_in_arrow, arrow_udf

RECORD_INDEX = "record_index"
INDEX_DIR = f"{METADATA_DIR}/{RECORD_INDEX}"
ROW_GROUP_ROWS = 4096

ENTRY = pa.schema([("key", pa.string()), ("partition_path", pa.string()), ("file_id", pa.string()),
                   ("deleted", pa.bool_())])
ENTRY_DDL = "key string, partition_path string, file_id string, deleted boolean"
_KEYS_DDL = "key string, partition_path string, file_id string, is_new boolean"
# duplicates: keys stored in two file groups (an example in `twice`); unchecked: why a delta's
# inserted keys could not be checked against the index.
_WRITTEN_DDL = ("shard int, path string, entries long, size long, footer_crc long, duplicates long, twice string, "
                "unchecked string")
_WRITTEN = pa.schema([("shard", pa.int32()), ("path", pa.string()), ("entries", pa.int64()), ("size", pa.int64()),
                      ("footer_crc", pa.int64()), ("duplicates", pa.int64()), ("twice", pa.string()),
                      ("unchecked", pa.string())])
_FILE_KEY = b"labformat.record_index.file"  # in each file's footer: the path it was written as
# A lookup's matches; one row per shard with a null key carries the entries it read.
FOUND_DDL = "key string, partition_path string, file_id string, entries long"


class IndexFile(NamedTuple):
    """One shard's file of a base or delta, as its manifest records it: what a reader checks."""

    path: str
    entries: int
    size: int
    footer_crc: int  # CRC32 of the parquet footer and its 8-byte trailer


def _checksum(body: dict[str, Any]) -> int:
    return zlib.crc32(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8"))


@dataclass(frozen=True)
class Manifest:
    """One base or delta: per shard, its file; for a delta, why the commit left the index untrusted."""

    instant: str
    name: str  # "delta", or "base-<stamp>"
    shards: int
    files: dict[int, IndexFile] = field(default_factory=dict)
    untrusted: str | None = None  # a commit that stored a key twice, or could not check its inserts

    @property
    def is_base(self) -> bool:
        return self.name != "delta"

    @property
    def path(self) -> str:
        return f"{INDEX_DIR}/{self.instant}.{self.name}.json"

    @property
    def entries(self) -> int:
        return sum(f.entries for f in self.files.values())

    def _body(self) -> dict[str, Any]:
        return {"instant": self.instant, "name": self.name, "shards": self.shards, "untrusted": self.untrusted,
                "files": {str(s): list(f) for s, f in sorted(self.files.items())}}

    def to_json(self) -> str:
        body = self._body()
        return json.dumps({**body, "checksum": _checksum(body)}, indent=1)

    @classmethod
    def from_json(cls, text: str, verify: bool = True) -> "Manifest":
        """ValueError when `verify` and the text fails its checksum (or, written before manifests had
        one, has none: its files cannot be checked either)."""
        raw = json.loads(text)
        stored = raw.pop("checksum", None)
        if verify and stored != _checksum(raw):
            raise ValueError("it has no checksum (written before manifests had one)" if stored is None
                             else "it fails its checksum")
        files = {int(s): IndexFile(f[0], int(f[1]), int(f[2]) if len(f) > 2 else -1, int(f[3]) if len(f) > 3 else -1)
                 for s, f in raw["files"].items()}
        return cls(raw["instant"], raw["name"], int(raw["shards"]), files, raw.get("untrusted"))


@dataclass(frozen=True)
class IndexView:
    """The record index as of a timeline: a base and the deltas after it, oldest first."""

    shards: int
    base: Manifest | None
    deltas: tuple[Manifest, ...]
    stale: str | None = None  # why the index does not cover the table (None: it does)

    def files(self) -> dict[int, list[IndexFile]]:
        """Per shard, its files oldest first: what a lookup merges (a later entry wins)."""
        out: dict[int, list[IndexFile]] = {}
        for manifest in ([self.base] if self.base else []) + list(self.deltas):
            for shard, f in manifest.files.items():
                out.setdefault(shard, []).append(f)
        return out

    @property
    def entries(self) -> int:
        """Entries stored in the base and deltas (a key updated twice counts twice)."""
        return sum(m.entries for m in ([self.base] if self.base else []) + list(self.deltas))


def _listing(storage: Storage) -> tuple[list[tuple[str, str, str]], dict[str, int]]:
    """(instant, name, path) of every manifest present, and every file's size."""
    names, sizes = [], {}
    for info in storage.list(INDEX_DIR):
        sizes[info.path] = info.size
        leaf = info.path.rsplit("/", 1)[-1]
        if leaf.endswith(".json") and not leaf.startswith("."):
            instant, _, name = leaf[:-5].partition(".")
            names.append((instant, name, info.path))
    return names, sizes


def _manifest_names(storage: Storage) -> list[tuple[str, str, str]]:
    """(instant, name, path) of every manifest present."""
    return _listing(storage)[0]


def exists(storage: Storage) -> bool:
    """Whether the table keeps a record index (any manifest, complete or not): writes then keep it."""
    return bool(_manifest_names(storage))


def current(storage: Storage, timeline: Timeline) -> tuple[IndexView | None, str]:
    """The index as of `timeline`, or None and why when there is none to use: none kept, stale,
    untrusted, or damaged (a manifest failing its checksum, a file missing or of another size than
    its manifest records, seen in the listing this reads anyway)."""
    order = [i.time for i in timeline.completed_writes_by_completion()]
    rank = {t: n for n, t in enumerate(order)}
    names, sizes = _listing(storage)
    present = [(instant, name, path) for instant, name, path in names if instant in rank]
    if not present:
        return None, "the table has no record index"
    bases = sorted((m for m in present if m[1] != "delta"), key=lambda m: (rank[m[0]], m[1]))
    path = bases[-1][2] if bases else None
    try:
        base = Manifest.from_json(storage.read_text(path)) if path else None
        after = rank[base.instant] if base else -1
        deltas = []
        for _, _, path in sorted((m for m in present if m[1] == "delta" and rank[m[0]] > after),
                                 key=lambda m: rank[m[0]]):
            deltas.append(Manifest.from_json(storage.read_text(path)))
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        return None, f"record index manifest {path} unreadable ({type(exc).__name__}: {exc})"
    shards = (base or deltas[0]).shards if (base or deltas) else 0
    covered = {d.instant for d in deltas}
    missing = [t for t in order[after + 1:] if t not in covered]
    view = IndexView(shards, base, tuple(deltas))
    if missing:
        return None, (f"the record index is stale: {len(missing)} commit(s) after "
                      f"{base.instant if base else 'its start'} did not keep it (first {missing[0]})")
    if any(m.shards != shards for m in deltas):
        return None, "the record index's base and deltas disagree on the shard count"
    for manifest in ([base] if base else []) + deltas:
        for f in manifest.files.values():
            if f.path not in sizes:
                return None, f"record index file {f.path} is missing (listed by {manifest.path})"
            if sizes[f.path] != f.size:
                return None, (f"record index file {f.path} is {sizes[f.path]} bytes where {manifest.path} records "
                              f"{f.size}: replaced or damaged")
    untrusted = next((d for d in deltas if d.untrusted), None)
    if untrusted is not None:
        return None, f"the record index is untrusted since commit {untrusted.instant}: {untrusted.untrusted}"
    return view, "metadata table"


def shards_of(storage: Storage) -> int | None:
    """The shard count of the index the table keeps, from its newest manifest (stale or not)."""
    names = sorted(_manifest_names(storage))
    for _, _, path in reversed(names):
        try:
            return Manifest.from_json(storage.read_text(path), verify=False).shards
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


# ---- Spark tasks --------------------------------------------------------------------------------

def shard_column(key_column: Column, shards: int) -> Column:
    """Each key's shard, as a Spark column computed in Arrow batches."""

    @arrow_udf("int")
    def shard(keys: pa.Array) -> pa.Array:
        return pa.array(record_index_shards(keys, shards), pa.int32())

    column: Column = shard(key_column)
    return column


def _keys_of_files(batches: Iterator[pa.RecordBatch], base_uri: str) -> Iterator[pa.RecordBatch]:
    """Task: per listed file slice (base file or none, file id, is_new, log paths as JSON), the record
    keys it holds, with their partition path: its base file's, then each log's blocks in order (a
    data block adds its keys, a delete block removes them)."""
    storage = Storage(base_uri)
    schema = pa.schema([("key", pa.string()), ("partition_path", pa.string()), ("file_id", pa.string()),
                        ("is_new", pa.bool_())])
    for batch in batches:
        for path, file_id, is_new, logs in zip(*(batch.column(c).to_pylist()
                                                for c in ("path", "file_id", "is_new", "logs"))):
            keys: list[str] = []
            parts: list[str | None] = []
            if path:
                table = read_base_file(storage, path, ["_hoodie_record_key", "_hoodie_partition_path"])
                keys = table.column(0).to_pylist()
                parts = table.column(1).to_pylist()
            logs = json.loads(logs) if logs else []
            if logs:
                keys, parts = _after_logs(storage, logs, keys, parts)
            n = len(keys)
            yield pa.RecordBatch.from_arrays(
                [pa.array(keys, pa.string()), pa.array(parts, pa.string()), pa.array([file_id] * n, pa.string()),
                 pa.array([is_new] * n, pa.bool_())], schema=schema)


def _after_logs(storage: Storage, logs: list[str], keys: list[str], parts: list[str | None]
                ) -> tuple[list[str], list[str | None]]:
    """A file slice's keys (and partition paths) once its logs are applied to its base file's."""
    blocks = []
    for log in logs:
        try:
            blocks += read_blocks(storage.read_bytes(log))
        except (OSError, LogFormatError) as exc:
            raise unreadable(log, exc, "log file") from None
    where = dict(zip(keys, parts))
    alive = dict.fromkeys(keys, True)
    for block in live_blocks(blocks):
        if block.block_type == BlockType.AVRO_DATA:
            # A key a log adds lies in the slice's partition: that of any key it ever held.
            home = next(iter(where.values()), None)
            for added in data_block_keys(block):
                alive[added] = True
                where.setdefault(added, home)
        elif block.block_type == BlockType.DELETE:
            for key, part, _ in deleted_records(block):
                if key is not None:
                    alive[key] = False
                    where.setdefault(key, part)
    chosen = [k for k, a in alive.items() if a]
    return chosen, [where.get(k) for k in chosen]


def _publish_parquet(storage: Storage, rel: str, table: pa.Table) -> tuple[int, int]:
    """Write one index file; its size and its footer's CRC32, for the manifest."""
    sink = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({_FILE_KEY: rel.encode("utf-8")}), sink, compression="zstd",
                   row_group_size=ROW_GROUP_ROWS, write_page_checksum=True)
    data = sink.getvalue()
    # A retried or speculative task writes the same entries: replacing is safe, refusing would fail it.
    storage.replace(rel, data)
    footer = int.from_bytes(data[-8:-4], "little") + 8
    return len(data), zlib.crc32(data[-footer:])


def _twice(keys: pa.ChunkedArray) -> tuple[int, str | None]:
    """Keys of a sorted column found twice in a row: how many, and the first."""
    if len(keys) < 2:
        return 0, None
    again = pc.equal(keys.slice(1), keys.slice(0, len(keys) - 1))
    found = keys.slice(1).filter(again)
    return len(found), (found[0].as_py() if len(found) else None)


def _stored_elsewhere(storage: Storage, part: pa.Table, before: list[IndexFile]) -> tuple[int, str | None]:
    """Of the keys a delta's commit inserted (`inserted`: in a file group it wrote that did not hold
    them), those the index before it holds in another file group: what a non-global write stores a
    second time. Reads only the row groups near those keys."""
    inserted = part.filter(part.column("inserted"))
    if not inserted.num_rows or not before:
        return 0, None
    wanted = inserted.column("key").to_pylist()  # sorted, as `part` is
    prior = _latest_per_key([_read_entries(storage, f, wanted)[0] for f in before])
    if not prior.num_rows:
        return 0, None
    prior = prior.select(["key", "partition_path", "file_id"]).rename_columns(["key", "was_part", "was_file"])
    both = inserted.select(["key", "partition_path", "file_id"]).join(prior, "key", use_threads=False)
    moved = pc.or_(pc.not_equal(both.column("partition_path"), both.column("was_part")),
                   pc.not_equal(both.column("file_id"), both.column("was_file")))
    elsewhere = both.filter(pc.fill_null(moved, True)).sort_by("key")
    return elsewhere.num_rows, (elsewhere.column("key")[0].as_py() if elsewhere.num_rows else None)


def _write_shards(batches: Iterator[pa.RecordBatch], base_uri: str, prefix: str,
                  before: dict[int, list[IndexFile]] | None = None) -> Iterator[pa.RecordBatch]:
    """Task: write each shard it holds as `<prefix>.<shard>.parquet`, sorted by key; report entries
    and keys stored in two file groups: found twice (a base, or a delta whose commit put a key in two
    file groups: `locations`), or, with `before` (the index the delta follows, for a commit that did
    not look its inserted keys up globally), inserted where the index holds them elsewhere."""
    storage = Storage(base_uri)
    collected = list(batches)
    rows = []
    table = pa.Table.from_batches(collected) if collected else None
    if table is not None and table.num_rows:
        table = table.sort_by([("shard", "ascending"), ("key", "ascending")])
        for shard in pc.unique(table.column("shard")).to_pylist():
            whole = table.filter(pc.equal(table.column("shard"), shard))
            part = whole.select(ENTRY.names).cast(ENTRY)
            duplicates, twice = _twice(part.column("key"))
            unchecked = None
            if "locations" in whole.column_names:
                spread = whole.filter(pc.greater(whole.column("locations"), 1))
                if spread.num_rows:
                    duplicates, twice = duplicates + spread.num_rows, twice or spread.column("key")[0].as_py()
                if before is not None:
                    try:
                        n, key = _stored_elsewhere(storage, whole, before.get(shard, []))
                    except CorruptIndexError as exc:  # the write goes on; the next lookup rebuilds the index
                        n, key, unchecked = 0, None, str(exc)
                    duplicates, twice = duplicates + n, twice or key
            rel = f"{prefix}.{shard:04d}.parquet"
            size, crc = _publish_parquet(storage, rel, part)
            rows.append({"shard": shard, "path": rel, "entries": part.num_rows, "size": size, "footer_crc": crc,
                         "duplicates": duplicates, "twice": twice, "unchecked": unchecked})
    yield pa.RecordBatch.from_pylist(rows, schema=_WRITTEN)


def _latest_per_key(parts: list[pa.Table]) -> pa.Table:
    """The newest entry of each key over `parts` (oldest first), deleted keys dropped."""
    if not parts:
        return ENTRY.empty_table()
    ordered = pa.concat_tables([p.select(ENTRY.names).cast(ENTRY).append_column("_order", pa.array([n] * p.num_rows, pa.int32()))
                                for n, p in enumerate(parts)])
    grouped = ordered.group_by("key", use_threads=False).aggregate([("_order", "max")])
    newest = pa.table({"key": grouped.column("key"), "_order": grouped.column("_order_max")})
    latest = ordered.join(newest, keys=["key", "_order"], join_type="inner", use_threads=False)
    return latest.filter(pc.invert(latest.column("deleted"))).select(ENTRY.names).sort_by("key")


def _mismatch(f: IndexFile, detail: str) -> CorruptIndexError:
    return CorruptIndexError(f"record index file {f.path} does not match its manifest ({detail}): replaced or "
                             "damaged; a RECORD_INDEX upsert rebuilds the index from the base files, as does "
                             "rebuild_metadata")


def _read_entries(storage: Storage, f: IndexFile, keys: list[str] | None) -> tuple[pa.Table, int]:
    """A shard file's entries whose key is in sorted `keys` (all when None), reading only the row
    groups whose key range holds one of them; and the entries read. The file is checked against its
    manifest (size, footer CRC, entries) and its pages against their checksums: CorruptIndexError."""
    try:
        with storage.fs.open_input_file(storage.full_path(f.path)) as source:
            size = source.size()
            if size != f.size:
                raise _mismatch(f, f"{size} bytes, not {f.size}")
            footer = int.from_bytes(source.read_at(4, size - 8), "little") + 8 if size >= 12 else size
            if zlib.crc32(source.read_at(footer, size - footer)) != f.footer_crc:
                raise _mismatch(f, "its footer's checksum differs")
            parquet = pq.ParquetFile(source, page_checksum_verification=True)
            if parquet.metadata.num_rows != f.entries:
                raise _mismatch(f, f"{parquet.metadata.num_rows} entries, not {f.entries}")
            if keys is None:
                table = parquet.read(use_threads=False)
                return table, table.num_rows
            groups = []
            for g in range(parquet.num_row_groups):
                stats = parquet.metadata.row_group(g).column(0).statistics
                if stats is None or not stats.has_min_max:
                    groups.append(g)
                    continue
                at = bisect.bisect_left(keys, stats.min)
                if at < len(keys) and keys[at] <= stats.max:
                    groups.append(g)
            if not groups:
                return ENTRY.empty_table(), 0
            table = parquet.read_row_groups(groups, use_threads=False)
    except (OSError, ValueError) as exc:
        raise CorruptIndexError(f"record index file {f.path} cannot be read ({type(exc).__name__}: {exc}): damaged; "
                                "a RECORD_INDEX upsert rebuilds the index from the base files, as does "
                                "rebuild_metadata") from None
    read = table.num_rows
    return table.filter(pc.is_in(table.column("key"), value_set=pa.array(keys, pa.string()))), read


def _lookup_shard(keys: pa.Table, files: dict[int, list[IndexFile]], base_uri: str) -> pa.Table:
    """applyInArrow task: the current location of each key of one shard that the index holds, and one
    row (null key) carrying the entries read."""
    storage = Storage(base_uri)
    out_schema = pa.schema([("key", pa.string()), ("partition_path", pa.string()), ("file_id", pa.string()),
                            ("entries", pa.int64())])
    shard = keys.column("shard")[0].as_py() if keys.num_rows else None
    wanted = sorted(set(keys.column("key").to_pylist()))
    parts, read = [], 0
    for f in files.get(shard, []) if shard is not None else []:  # no key: no shard
        found, n = _read_entries(storage, f, wanted)
        parts.append(found)
        read += n
    latest = _latest_per_key(parts)
    counted = pa.table({"key": pa.array([None], pa.string()), "partition_path": pa.array([None], pa.string()),
                        "file_id": pa.array([None], pa.string()), "entries": pa.array([read], pa.int64())})
    matches = latest.select(["key", "partition_path", "file_id"]).append_column(
        "entries", pa.array([0] * latest.num_rows, pa.int64()))
    return pa.concat_tables([matches.cast(out_schema), counted.cast(out_schema)])


def _merge_shards(batches: Iterator[pa.RecordBatch], base_uri: str, files: dict[int, list[IndexFile]],
                  prefix: str) -> Iterator[pa.RecordBatch]:
    """Task: each listed shard's base and deltas merged into a new base file."""
    storage = Storage(base_uri)
    rows = []
    for batch in batches:
        for shard in batch.column("shard").to_pylist():
            merged = _latest_per_key([_read_entries(storage, f, None)[0] for f in files.get(shard, [])])
            rel = f"{prefix}.{shard:04d}.parquet"
            size, crc = _publish_parquet(storage, rel, merged)
            rows.append({"shard": shard, "path": rel, "entries": merged.num_rows, "size": size, "footer_crc": crc,
                         "duplicates": 0, "twice": None, "unchecked": None})
    yield pa.RecordBatch.from_pylist(rows, schema=_WRITTEN)


# ---- driver: build, delta, compact, lookup ------------------------------------------------------

def _new_stamp() -> str:
    return f"base-{time.time_ns():020d}"


def _publish_manifest(storage: Storage, instant: str, name: str, shards: int, written: list[Row],
                      untrusted: str | None = None) -> Manifest:
    manifest = Manifest(instant, name, shards, {r.shard: IndexFile(r.path, r.entries, r.size, r.footer_crc)
                                                for r in written if r.entries}, untrusted)
    for r in written:  # a shard left empty holds no entry: its file is not needed
        if not r.entries:
            storage.delete(r.path)
    storage.publish(manifest.path, manifest.to_json().encode("utf-8"))
    if manifest.is_base:
        _drop_superseded(storage, manifest)
    return manifest


def _drop_superseded(storage: Storage, newest: Manifest) -> None:
    """Delete what no reader needs once `newest` is published: the bases before the previous one,
    and the deltas of instants no later than that previous base. The previous base and the deltas
    after it stay, for a writer that planned its lookup before `newest` existed."""
    by_instant: dict[str, list[tuple[str, str]]] = {}
    for instant, name, path in _manifest_names(storage):
        by_instant.setdefault(instant, []).append((name, path))
    bases = sorted((instant, name) for instant, names in by_instant.items() for name, _ in names
                   if name != "delta" and (instant, name) != (newest.instant, newest.name))
    if not bases:
        return
    keep_from = bases[-1]  # the previous base
    for instant, names in by_instant.items():
        for name, path in names:
            old_base = name != "delta" and (instant, name) < keep_from
            old_delta = name == "delta" and instant <= keep_from[0]
            if old_base or old_delta:
                _delete_manifest(storage, path)


def _delete_manifest(storage: Storage, manifest_path: str) -> None:
    """A manifest first (then no reader takes its files), then its files."""
    try:
        manifest = Manifest.from_json(storage.read_text(manifest_path), verify=False)  # only its files' names
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        storage.delete(manifest_path)
        return
    storage.delete(manifest_path)
    own = manifest_path[:-len("json")]  # a damaged manifest must not name another file to delete
    for f in manifest.files.values():
        if f.path.startswith(own):
            storage.delete(f.path)


def _write(spark: SparkSession, storage: Storage, entries: DataFrame, shards: int, prefix: str,
           before: dict[int, list[IndexFile]] | None = None) -> list[Row]:
    """Entries (ENTRY's columns) sharded, sorted and written by Spark tasks; their `_WRITTEN` rows."""
    base_uri = storage.base_uri
    sharded = entries.withColumn("shard", shard_column(F.col("key"), shards))
    sharded = sharded.repartition(max(1, min(shards, 2 * default_parallelism(spark))), "shard")
    return map_in_arrow(sharded, lambda batches: _write_shards(batches, base_uri, prefix, before), _WRITTEN_DDL).collect()


def _key_rows(spark: SparkSession, storage: Storage, files: list[tuple[str | None, str, bool, str]]) -> DataFrame:
    """(path, file id, is_new, log paths as JSON) rows: their keys, read by Spark tasks (`_keys_of_files`)."""
    listed = spark.createDataFrame(files, "path string, file_id string, is_new boolean, logs string")
    listed = listed.repartition(max(1, min(len(files), 2 * default_parallelism(spark))))
    base_uri = storage.base_uri
    return map_in_arrow(listed, lambda batches: _keys_of_files(batches, base_uri), _KEYS_DDL)


def build(spark: SparkSession, storage: Storage, instant: str, slices: list[FileSlice], shards: int) -> IndexView:
    """A new base from the latest base files of the table as of the completed `instant` (Hudi's
    bootstrap of the record index, and `rebuild_metadata`'s). ConfigError when a key is stored in
    two file groups (a non-global index wrote it twice): the index maps a key to one."""
    name = _new_stamp()
    prefix = f"{INDEX_DIR}/{instant}.{name}"
    entries = (_key_rows(spark, storage, [(s.path, s.file_id, True, json.dumps(list(s.log_paths))) for s in slices])
               .select("key", "partition_path", "file_id", F.lit(False).alias("deleted")))
    written = _write(spark, storage, entries, shards, prefix) if slices else []
    duplicates = sum(r.duplicates for r in written)
    if duplicates:
        for r in written:
            storage.delete(r.path)
        example = next(r.twice for r in written if r.twice)
        raise ConfigError(f"the table stores {duplicates} record key(s) in more than one file group (e.g. {example!r}; "
                          "written by a non-global index after their partition value changed, or by a bulk insert); "
                          "a record index maps a key to one file group: upsert them once through GLOBAL_SIMPLE "
                          "(which keeps one copy) first")
    return IndexView(shards, _publish_manifest(storage, instant, name, shards, written), ())


def write_delta(spark: SparkSession, storage: Storage, instant: str, new_slices: list[tuple[str | None, str, list[str]]],
                old_slices: list[tuple[str | None, str, list[str]]], shards: int,
                before: IndexView | None = None) -> Manifest:
    """The changes of the commit `instant`, from the file slices it made and those they follow
    ((base path, file id, log paths) each; on copy-on-write, base files alone): a key the new slices
    hold is at that file group now; a key only the old ones held was deleted. Keys whose location
    did not change are left out (a log's updates change none).

    The manifest says the index is untrusted when the commit stored a key in a second file group:
    in two of the file groups it wrote, or, given `before` (the index as of the write's plan, for a
    commit that did not look up its inserted keys globally), where `before` holds it elsewhere. The
    write itself stands (a non-global index may store a key twice); the next RECORD_INDEX upsert
    rebuilds the index, whose check then refuses the table."""
    if not new_slices and not old_slices:
        return _publish_manifest(storage, instant, "delta", shards, [])
    keys = _key_rows(spark, storage, [(p, f, True, json.dumps(list(logs))) for p, f, logs in new_slices]
                     + [(p, f, False, json.dumps(list(logs))) for p, f, logs in old_slices])
    is_new = F.col("is_new")
    # Grouped in a count of its own (spark/partitioning.py): the keys of twice the cores' files at most.
    tasks = max(1, min(len(new_slices) + len(old_slices), 2 * default_parallelism(spark)))
    changes = partitioned_by(keys, ["key"], tasks).groupBy("key").agg(
        F.max(F.when(is_new, F.col("file_id"))).alias("new_file"),
        F.max(F.when(is_new, F.col("partition_path"))).alias("new_part"),
        F.max(F.when(~is_new, F.col("file_id"))).alias("old_file"),
        F.max(F.when(~is_new, F.col("partition_path"))).alias("old_part"),
        F.count_distinct(F.when(is_new, F.concat_ws("/", "partition_path", "file_id"))).alias("locations"))
    changed = changes.where(~F.col("new_file").eqNullSafe(F.col("old_file"))
                            | ~F.col("new_part").eqNullSafe(F.col("old_part")) | (F.col("locations") > 1))
    entries = changed.select("key", F.coalesce("new_part", "old_part").alias("partition_path"),
                             F.coalesce("new_file", "old_file").alias("file_id"),
                             F.col("new_file").isNull().alias("deleted"), "locations",
                             (F.col("old_file").isNull() & F.col("new_file").isNotNull()).alias("inserted"))
    checked = before.files() if before is not None and before.shards == shards else None
    written = _write(spark, storage, entries, shards, f"{INDEX_DIR}/{instant}.delta", checked)
    untrusted = None
    twice = sum(r.duplicates for r in written)
    if twice:
        example = next(r.twice for r in written if r.twice)
        untrusted = f"it stored {twice} record key(s) in a second file group (e.g. {example!r})"
    elif any(r.unchecked for r in written):
        untrusted = f"its inserted keys could not be checked ({next(r.unchecked for r in written if r.unchecked)})"
    return _publish_manifest(storage, instant, "delta", shards, written, untrusted)


def compact(spark: SparkSession, storage: Storage, view: IndexView, instant: str) -> IndexView:
    """A new base as of the completed `instant` (the newest the view covers): each shard's base and
    deltas merged in one task."""
    name = _new_stamp()
    prefix, files, base_uri = f"{INDEX_DIR}/{instant}.{name}", view.files(), storage.base_uri
    shards = spark.createDataFrame([(s,) for s in sorted(files)], "shard int")
    shards = shards.repartition(max(1, min(len(files), 2 * default_parallelism(spark))))
    written = map_in_arrow(shards, lambda batches: _merge_shards(batches, base_uri, files, prefix), _WRITTEN_DDL).collect()
    return IndexView(view.shards, _publish_manifest(storage, instant, name, view.shards, written), ())


def lookup(spark: SparkSession, keys: DataFrame, view: IndexView, base_uri: str) -> tuple[DataFrame, Observation]:
    """The location of each key of `keys` (a `key` column) that the index holds: (key, partition_path,
    file_id), one shard per task; the Observation's `index_entries_read` is filled once it has run."""
    files = view.files()
    observed = Observation("labformat_record_index_entries")
    sharded = keys.select("key").withColumn("shard", shard_column(F.col("key"), view.shards))
    tasks = max(1, min(view.shards, 2 * default_parallelism(spark)))
    found = apply_in_arrow(partitioned_by(sharded, ["shard"], tasks).groupBy("shard"),
                           lambda table: _lookup_shard(table, files, base_uri), FOUND_DDL)
    found = found.observe(observed, F.coalesce(F.sum("entries"), F.lit(0)).alias("index_entries_read"))
    return found.where(F.col("key").isNotNull()).drop("entries"), observed


def newest_completed(timeline: Timeline) -> str | None:
    """The completed write a new base describes: the last to complete."""
    order = timeline.completed_writes_by_completion()
    return order[-1].time if order else None
