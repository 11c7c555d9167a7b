"""The record-level index: each record key's partition path and file group, kept in the metadata table under `.hoodie/metadata/record_index/` (Hudi 0.14's RECORD_INDEX, in labformat's own layout).

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
"""

from __future__ import annotations

import bisect
import io
import json
import time
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from labformat.errors import ConfigError, CorruptTableError
from labformat.fileformat.java_hash import record_index_shards
from labformat.fileformat.log_file import (BlockType, LogFormatError, data_block_keys, deleted_records, live_blocks,
                                           read_blocks)
from labformat.fileformat.parquet_io import unreadable
from labformat.model.file_group import FileSlice
from labformat.storage import Storage
from labformat.timeline import METADATA_DIR, Timeline
from labformat.spark.compat import default_parallelism

RECORD_INDEX = "record_index"
INDEX_DIR = f"{METADATA_DIR}/{RECORD_INDEX}"
ROW_GROUP_ROWS = 4096

ENTRY = pa.schema([("key", pa.string()), ("partition_path", pa.string()), ("file_id", pa.string()),
                   ("deleted", pa.bool_())])
ENTRY_DDL = "key string, partition_path string, file_id string, deleted boolean"
_KEYS_DDL = "key string, partition_path string, file_id string, is_new boolean"
_WRITTEN_DDL = "shard int, path string, entries long, duplicates long"
# A lookup's matches; one row per shard with a null key carries the entries it read.
FOUND_DDL = "key string, partition_path string, file_id string, entries long"


@dataclass(frozen=True)
class Manifest:
    """One base or delta: per shard, its file and entries."""

    instant: str
    name: str  # "delta", or "base-<stamp>"
    shards: int
    files: dict[int, tuple[str, int]] = field(default_factory=dict)

    @property
    def is_base(self) -> bool:
        return self.name != "delta"

    @property
    def path(self) -> str:
        return f"{INDEX_DIR}/{self.instant}.{self.name}.json"

    @property
    def entries(self) -> int:
        return sum(n for _, n in self.files.values())

    def to_json(self) -> str:
        return json.dumps({"instant": self.instant, "name": self.name, "shards": self.shards,
                           "files": {str(s): [p, n] for s, (p, n) in sorted(self.files.items())}}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        raw = json.loads(text)
        return cls(raw["instant"], raw["name"], int(raw["shards"]),
                   {int(s): (p, int(n)) for s, (p, n) in raw["files"].items()})


@dataclass(frozen=True)
class IndexView:
    """The record index as of a timeline: a base and the deltas after it, oldest first."""

    shards: int
    base: Manifest | None
    deltas: tuple[Manifest, ...]
    stale: str | None = None  # why the index does not cover the table (None: it does)

    def files(self) -> dict[int, list[str]]:
        """Per shard, its files oldest first: what a lookup merges (a later entry wins)."""
        out: dict[int, list[str]] = {}
        for manifest in ([self.base] if self.base else []) + list(self.deltas):
            for shard, (path, _) in manifest.files.items():
                out.setdefault(shard, []).append(path)
        return out

    @property
    def entries(self) -> int:
        """Entries stored in the base and deltas (a key updated twice counts twice)."""
        return sum(m.entries for m in ([self.base] if self.base else []) + list(self.deltas))


def _manifest_names(storage: Storage) -> list[tuple[str, str, str]]:
    """(instant, name, path) of every manifest present."""
    out = []
    for info in storage.list(INDEX_DIR):
        leaf = info.path.rsplit("/", 1)[-1]
        if leaf.endswith(".json") and not leaf.startswith("."):
            instant, _, name = leaf[:-5].partition(".")
            out.append((instant, name, info.path))
    return out


def exists(storage: Storage) -> bool:
    """Whether the table keeps a record index (any manifest, complete or not): writes then keep it."""
    return bool(_manifest_names(storage))


def current(storage: Storage, timeline: Timeline) -> tuple[IndexView | None, str]:
    """The index as of `timeline`, or None and why when there is none to use."""
    order = [i.time for i in timeline.completed_writes_by_completion()]
    rank = {t: n for n, t in enumerate(order)}
    present = [(instant, name, path) for instant, name, path in _manifest_names(storage) if instant in rank]
    if not present:
        return None, "the table has no record index"
    try:
        bases = sorted((m for m in present if m[1] != "delta"), key=lambda m: (rank[m[0]], m[1]))
        base = Manifest.from_json(storage.read_text(bases[-1][2])) if bases else None
        after = rank[base.instant] if base else -1
        deltas = [Manifest.from_json(storage.read_text(path)) for instant, name, path
                  in sorted((m for m in present if m[1] == "delta" and rank[m[0]] > after), key=lambda m: rank[m[0]])]
    except (OSError, ValueError, KeyError) as exc:
        return None, f"record index manifest unreadable ({type(exc).__name__}: {exc})"
    shards = (base or deltas[0]).shards if (base or deltas) else 0
    covered = {d.instant for d in deltas}
    missing = [t for t in order[after + 1:] if t not in covered]
    view = IndexView(shards, base, tuple(deltas))
    if missing:
        return None, (f"the record index is stale: {len(missing)} commit(s) after "
                      f"{base.instant if base else 'its start'} did not keep it (first {missing[0]})")
    if any(m.shards != shards for m in deltas):
        return None, "the record index's base and deltas disagree on the shard count"
    return view, "metadata table"


def shards_of(storage: Storage) -> int | None:
    """The shard count of the index the table keeps, from its newest manifest (stale or not)."""
    names = sorted(_manifest_names(storage))
    for _, _, path in reversed(names):
        try:
            return Manifest.from_json(storage.read_text(path)).shards
        except (OSError, ValueError, KeyError):
            continue
    return None


# ---- Spark tasks --------------------------------------------------------------------------------

def shard_column(key_column, shards: int):
    """Each key's shard, as a Spark column computed in Arrow batches."""

    @F.arrow_udf("int")
    def shard(keys: pa.Array) -> pa.Array:
        return pa.array(record_index_shards(keys, shards), pa.int32())

    return shard(key_column)


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
            keys, parts = [], []
            if path:
                try:
                    table = pq.read_table(storage.full_path(path), filesystem=storage.fs,
                                          columns=["_hoodie_record_key", "_hoodie_partition_path"])
                except (OSError, ValueError) as exc:
                    raise unreadable(path, exc) from None
                keys = table.column(0).to_pylist()
                parts = table.column(1).to_pylist()
            logs = json.loads(logs) if logs else []
            if logs:
                keys, parts = _after_logs(storage, logs, keys, parts)
            n = len(keys)
            yield pa.RecordBatch.from_arrays(
                [pa.array(keys, pa.string()), pa.array(parts, pa.string()), pa.array([file_id] * n, pa.string()),
                 pa.array([is_new] * n, pa.bool_())], schema=schema)


def _after_logs(storage: Storage, logs: list[str], keys: list, parts: list) -> tuple[list, list]:
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
            for key in data_block_keys(block):
                alive[key] = True
                where.setdefault(key, home)
        elif block.block_type == BlockType.DELETE:
            for key, part, _ in deleted_records(block):
                if key is not None:
                    alive[key] = False
                    where.setdefault(key, part)
    chosen = [k for k, a in alive.items() if a]
    return chosen, [where.get(k) for k in chosen]


def _publish_parquet(storage: Storage, rel: str, table: pa.Table) -> None:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    # A retried or speculative task writes the same entries: replacing is safe, refusing would fail it.
    storage.replace(rel, sink.getvalue())


def _write_shards(batches: Iterator[pa.RecordBatch], base_uri: str, prefix: str) -> Iterator[pa.RecordBatch]:
    """Task: write each shard it holds as `<prefix>.<shard>.parquet`, sorted by key; report entries
    and keys found twice (a base must map a key to one file group)."""
    storage = Storage(base_uri)
    batches = list(batches)
    rows = []
    table = pa.Table.from_batches(batches) if batches else None
    if table is not None and table.num_rows:
        table = table.sort_by([("shard", "ascending"), ("key", "ascending")])
        for shard in pc.unique(table.column("shard")).to_pylist():
            part = table.filter(pc.equal(table.column("shard"), shard)).select(ENTRY.names).cast(ENTRY)
            keys = part.column("key")
            duplicates = (pc.sum(pc.equal(keys.slice(1), keys.slice(0, len(keys) - 1))).as_py() or 0
                          if len(keys) > 1 else 0)
            rel = f"{prefix}.{shard:04d}.parquet"
            _publish_parquet(storage, rel, part)
            rows.append({"shard": shard, "path": rel, "entries": part.num_rows, "duplicates": duplicates})
    yield pa.RecordBatch.from_pylist(rows, schema=pa.schema([("shard", pa.int32()), ("path", pa.string()),
                                                             ("entries", pa.int64()), ("duplicates", pa.int64())]))


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


def _read_entries(storage: Storage, path: str, keys: list[str] | None) -> tuple[pa.Table, int]:
    """A shard file's entries whose key is in sorted `keys` (all when None), reading only the row
    groups whose key range holds one of them; and the entries read."""
    try:
        parquet = pq.ParquetFile(storage.full_path(path), filesystem=storage.fs)
        if keys is None:
            table = parquet.read()
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
        table = parquet.read_row_groups(groups)
    except (OSError, ValueError) as exc:
        raise CorruptTableError(f"record index file {path} is unreadable ({type(exc).__name__}: {exc}); "
                                "rebuild it with rebuild_metadata") from None
    read = table.num_rows
    return table.filter(pc.is_in(table.column("key"), value_set=pa.array(keys, pa.string()))), read


def _lookup_shard(keys: pa.Table, files: dict[int, list[str]], base_uri: str) -> pa.Table:
    """applyInArrow task: the current location of each key of one shard that the index holds, and one
    row (null key) carrying the entries read."""
    storage = Storage(base_uri)
    out_schema = pa.schema([("key", pa.string()), ("partition_path", pa.string()), ("file_id", pa.string()),
                            ("entries", pa.int64())])
    shard = keys.column("shard")[0].as_py() if keys.num_rows else None
    wanted = sorted(set(keys.column("key").to_pylist()))
    parts, read = [], 0
    for path in files.get(shard, []):
        found, n = _read_entries(storage, path, wanted)
        parts.append(found)
        read += n
    latest = _latest_per_key(parts)
    counted = pa.table({"key": pa.array([None], pa.string()), "partition_path": pa.array([None], pa.string()),
                        "file_id": pa.array([None], pa.string()), "entries": pa.array([read], pa.int64())})
    matches = latest.select(["key", "partition_path", "file_id"]).append_column(
        "entries", pa.array([0] * latest.num_rows, pa.int64()))
    return pa.concat_tables([matches.cast(out_schema), counted.cast(out_schema)])


def _merge_shards(batches: Iterator[pa.RecordBatch], base_uri: str, files: dict[int, list[str]],
                  prefix: str) -> Iterator[pa.RecordBatch]:
    """Task: each listed shard's base and deltas merged into a new base file."""
    storage = Storage(base_uri)
    rows = []
    for batch in batches:
        for shard in batch.column("shard").to_pylist():
            merged = _latest_per_key([_read_entries(storage, p, None)[0] for p in files.get(shard, [])])
            rel = f"{prefix}.{shard:04d}.parquet"
            _publish_parquet(storage, rel, merged)
            rows.append({"shard": shard, "path": rel, "entries": merged.num_rows, "duplicates": 0})
    yield pa.RecordBatch.from_pylist(rows, schema=pa.schema([("shard", pa.int32()), ("path", pa.string()),
                                                             ("entries", pa.int64()), ("duplicates", pa.int64())]))


# ---- driver: build, delta, compact, lookup ------------------------------------------------------

def _new_stamp() -> str:
    return f"base-{time.time_ns():020d}"


def _publish_manifest(storage: Storage, instant: str, name: str, shards: int, written: list) -> Manifest:
    manifest = Manifest(instant, name, shards, {r.shard: (r.path, r.entries) for r in written if r.entries})
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
        manifest = Manifest.from_json(storage.read_text(manifest_path))
    except (OSError, ValueError, KeyError):
        storage.delete(manifest_path)
        return
    storage.delete(manifest_path)
    for path, _ in manifest.files.values():
        storage.delete(path)


def _write(spark: SparkSession, storage: Storage, entries: DataFrame, shards: int, prefix: str) -> list:
    """Entries (ENTRY's columns) sharded, sorted and written by Spark tasks; their rows (shard, path, entries)."""
    base_uri = storage.base_uri
    sharded = entries.withColumn("shard", shard_column(F.col("key"), shards))
    sharded = sharded.repartition(max(1, min(shards, 2 * default_parallelism(spark))), "shard")
    return sharded.mapInArrow(lambda batches: _write_shards(batches, base_uri, prefix), _WRITTEN_DDL).collect()


def _key_rows(spark: SparkSession, storage: Storage, files: list[tuple[str | None, str, bool, str]]) -> DataFrame:
    """(path, file id, is_new, log paths as JSON) rows: their keys, read by Spark tasks (`_keys_of_files`)."""
    listed = spark.createDataFrame(files, "path string, file_id string, is_new boolean, logs string")
    listed = listed.repartition(max(1, min(len(files), 2 * default_parallelism(spark))))
    base_uri = storage.base_uri
    return listed.mapInArrow(lambda batches: _keys_of_files(batches, base_uri), _KEYS_DDL)


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
        raise ConfigError(f"the table stores {duplicates} record key(s) in more than one file group (written by a "
                          "non-global index after their partition value changed); a record index maps a key to one "
                          "file group: upsert them once through GLOBAL_SIMPLE (which keeps one copy) first")
    return IndexView(shards, _publish_manifest(storage, instant, name, shards, written), ())


def write_delta(spark: SparkSession, storage: Storage, instant: str, new_slices: list[tuple[str | None, str, list]],
                old_slices: list[tuple[str | None, str, list]], shards: int) -> Manifest:
    """The changes of the commit `instant`, from the file slices it made and those they follow
    ((base path, file id, log paths) each; on copy-on-write, base files alone): a key the new slices
    hold is at that file group now; a key only the old ones held was deleted. Keys whose location
    did not change are left out (a log's updates change none)."""
    if not new_slices and not old_slices:
        return _publish_manifest(storage, instant, "delta", shards, [])
    keys = _key_rows(spark, storage, [(p, f, True, json.dumps(list(logs))) for p, f, logs in new_slices]
                     + [(p, f, False, json.dumps(list(logs))) for p, f, logs in old_slices])
    is_new = F.col("is_new")
    changes = keys.groupBy("key").agg(
        F.max(F.when(is_new, F.col("file_id"))).alias("new_file"),
        F.max(F.when(is_new, F.col("partition_path"))).alias("new_part"),
        F.max(F.when(~is_new, F.col("file_id"))).alias("old_file"),
        F.max(F.when(~is_new, F.col("partition_path"))).alias("old_part"))
    changed = changes.where(~F.col("new_file").eqNullSafe(F.col("old_file"))
                            | ~F.col("new_part").eqNullSafe(F.col("old_part")))
    entries = changed.select("key", F.coalesce("new_part", "old_part").alias("partition_path"),
                             F.coalesce("new_file", "old_file").alias("file_id"),
                             F.col("new_file").isNull().alias("deleted"))
    written = _write(spark, storage, entries, shards, f"{INDEX_DIR}/{instant}.delta")
    return _publish_manifest(storage, instant, "delta", shards, written)


def compact(spark: SparkSession, storage: Storage, view: IndexView, instant: str) -> IndexView:
    """A new base as of the completed `instant` (the newest the view covers): each shard's base and
    deltas merged in one task."""
    name = _new_stamp()
    prefix, files, base_uri = f"{INDEX_DIR}/{instant}.{name}", view.files(), storage.base_uri
    shards = spark.createDataFrame([(s,) for s in sorted(files)], "shard int")
    shards = shards.repartition(max(1, min(len(files), 2 * default_parallelism(spark))))
    written = shards.mapInArrow(lambda batches: _merge_shards(batches, base_uri, files, prefix), _WRITTEN_DDL).collect()
    return IndexView(view.shards, _publish_manifest(storage, instant, name, view.shards, written), ())


def lookup(spark: SparkSession, keys: DataFrame, view: IndexView, base_uri: str) -> tuple[DataFrame, Observation]:
    """The location of each key of `keys` (a `key` column) that the index holds: (key, partition_path,
    file_id), one shard per task; the Observation's `index_entries_read` is filled once it has run."""
    files = view.files()
    observed = Observation("labformat_record_index_entries")
    sharded = keys.select("key").withColumn("shard", shard_column(F.col("key"), view.shards))
    found = sharded.groupBy("shard").applyInArrow(lambda table: _lookup_shard(table, files, base_uri), FOUND_DDL)
    found = found.observe(observed, F.coalesce(F.sum("entries"), F.lit(0)).alias("index_entries_read"))
    return found.where(F.col("key").isNotNull()).drop("entries"), observed


def newest_completed(timeline: Timeline) -> str | None:
    """The completed write a new base describes: the last to complete."""
    order = timeline.completed_writes_by_completion()
    return order[-1].time if order else None
