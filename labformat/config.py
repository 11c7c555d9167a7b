"""The option registry: every labformat option declared once, with its Apache Hudi key as alias.

An option has a short labformat name (`max_file_size`) and the Hudi key it mirrors
(`hoodie.parquet.max.file.size`); callers may use either. Values are parsed and checked
here, so the rest of the code reads typed values and never sees a raw string.
`python scripts/gen_docs.py` writes the options table of docs/options.md from here.
"""

from __future__ import annotations

import difflib
import enum
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar, overload

from labformat.errors import ConfigError
from labformat.model.enums import (
    BloomFilterTypeCode,
    BucketEngine,
    CdcLoggingMode,
    CleanerPolicy,
    CompressionCodec,
    ConcurrencyMode,
    HolesPolicy,
    IncrementalFormat,
    IndexType,
    LayoutStrategy,
    ParallelismMode,
    QueryType,
    SortMode,
    TableType,
)


class Scope(str, enum.Enum):
    TABLE = "table"  # fixed when the table is created; stored in hoodie.properties
    WRITE = "write"  # per write operation
    READ = "read"  # per read / query


@dataclass(frozen=True)
class Option:
    name: str
    hudi_key: str | None
    default: Any
    doc: str
    scope: Scope
    parse: Callable[[Any], Any]
    check: Callable[[Any], str | None] = lambda value: None  # returns a problem, or None when fine
    # A table option a single write may override (None in a write's Config means "the table's").
    per_write: bool = False

    def coerce(self, raw: Any, given_as: str) -> Any:
        try:
            value = self.parse(raw)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"option {given_as!r}: cannot parse {raw!r} ({exc})") from None
        problem = self.check(value)
        if problem:
            raise ConfigError(f"option {given_as!r}: {raw!r} {problem}")
        return value


# ---- parsers -------------------------------------------------------------------------------

# A number and an optional unit: b, k, kb, kib, m, mb, mib, ... (never a bare `ib`).
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|[kmgt](?:i?b)?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(raw: Any) -> int:
    """Bytes from an int or a string such as `4MB`, `512k`, `1.5 GiB` (binary units, as Hudi's docs use)."""
    if isinstance(raw, bool):
        raise ValueError("a size, not a boolean")
    if isinstance(raw, int):
        return raw
    match = _SIZE_RE.match(str(raw))
    if not match:
        raise ValueError("expected bytes as an integer or with a unit (KB, MB, GB)")
    number, unit = match.group(1), (match.group(2) or "").lower()
    size = float(number) * _SIZE_UNITS[unit[:1]]
    if not size.is_integer():  # 1.5 GiB is a whole number of bytes; 1024.5 is not, and would be truncated
        raise ValueError(f"{size:g} bytes is not a whole number of bytes")
    return int(size)


def parse_int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError("an integer, not a boolean")
    if isinstance(raw, float) and not raw.is_integer():
        raise ValueError("an integer")
    return int(raw)


def parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError("expected true or false")


def parse_str(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError("expected a string")
    return raw


def parse_optional_str(raw: Any) -> str | None:
    if raw is None or raw == "":
        return None
    return parse_str(raw)


def one_of(choices: type[enum.Enum]) -> Callable[[Any], enum.Enum]:
    """A parser of one member of `choices`, taken by its value in any case (`global_sort`, `SNAPPY`)."""
    by_text = {str(member.value).upper(): member for member in choices}

    def parse(raw: Any) -> enum.Enum:
        member = by_text.get(str(raw).strip().upper())
        if member is None:
            raise ValueError(f"expected one of {', '.join(str(m.value) for m in choices)}")
        return member

    parse.choices = tuple(str(m.value) for m in choices)  # type: ignore[attr-defined]
    return parse


def at_least(low: float) -> Callable[[Any], str | None]:
    return lambda value: None if value >= low else f"must be >= {low}"


def open_unit_interval(value: float) -> str | None:
    return None if 0.0 < value < 1.0 else "must be between 0 and 1 (exclusive)"


# ---- the registry -----------------------------------------------------------------------------

OPTIONS: tuple[Option, ...] = (
    # table scope: written to hoodie.properties at create time
    Option("table_name", "hoodie.table.name", None, "Table name; defaults to the folder name.",
           Scope.TABLE, parse_optional_str),
    Option("table_type", "hoodie.table.type", TableType.COPY_ON_WRITE,
           "COPY_ON_WRITE rewrites a file group's base file on every update (a `commit`); MERGE_ON_READ "
           "appends updates and deletes to log files of the file slice (a `deltacommit`) and merges them "
           "when reading. Fixed when the table is created.",
           Scope.TABLE, one_of(TableType)),
    Option("hive_style_partitioning", "hoodie.datasource.write.hive_style_partitioning", False,
           "Partition folders named `field=value` instead of `value`.", Scope.TABLE, parse_bool),
    Option("partitionpath_urlencode", "hoodie.datasource.write.partitionpath.urlencode", False,
           "URL-encode partition values in folder names. labformat keeps values verbatim, as Hudi does "
           "by default, and refuses (InvalidInputError, table unchanged) a value whose folder would "
           "leave the table's folder or enter `.hoodie`: '', '.', '..', '../x', '.hoodie', empty "
           "segments. Only false is accepted.", Scope.TABLE, parse_bool,
           lambda value: "is not supported: labformat refuses unsafe partition values instead" if value else None),
    Option("index_type", "hoodie.index.type", IndexType.BLOOM,
           "How upserts and deletes find the file group of each record: SIMPLE (join with every key of "
           "the affected partitions), BLOOM (range pruning, bloom filters, exact check), BUCKET (hash "
           "of the key picks the file group), the global GLOBAL_SIMPLE and GLOBAL_BLOOM (the same "
           "lookups over every partition: a key is unique in the table, and a record whose partition "
           "value changes moves, see `*_update_partition_path`), or the global RECORD_INDEX (each key "
           "looked up in the metadata table's key-to-file-group map, see `record_index_enable`). "
           "The non-global ones look a key up "
           "in the partition its record names only, so a record whose partition value changes is "
           "stored twice. Stored with the table; a write may switch among all but BUCKET, never to "
           "or from BUCKET.", Scope.TABLE, one_of(IndexType), per_write=True),
    Option("metadata_enable", "hoodie.metadata.enable", True,
           "Keep the metadata table (.hoodie/metadata/): file listings per commit.", Scope.TABLE, parse_bool),
    Option("cdc_enabled", "hoodie.table.cdc.enabled", False,
           "Change data capture: every write records what it inserted, updated (before and after) and "
           "deleted, read back by an incremental query with `incremental_format=cdc`. labformat keeps "
           "the change records as parquet files under `.hoodie/cdc/` (one set per commit, written before "
           "it publishes), not in Hudi's `.cdc` log files beside the data: Hudi's readers do not see them.",
           Scope.TABLE, parse_bool),
    Option("cdc_supplemental_logging_mode", "hoodie.table.cdc.supplemental.logging.mode",
           CdcLoggingMode.DATA_BEFORE_AFTER,
           "What a change record keeps: labformat stores both images (data_before_after); op_key_only "
           "and data_before, which make Hudi's reader rebuild images from the file slices, are refused.",
           Scope.TABLE, one_of(CdcLoggingMode),
           lambda mode: None if mode is CdcLoggingMode.DATA_BEFORE_AFTER else
           "is not supported yet: labformat stores the before and after images (data_before_after)"),
    Option("column_stats_enable", "hoodie.metadata.index.column.stats.enable", True,
           "Keep per-file column stats (min, max, null count) in the metadata table, for data skipping "
           "(Hudi's own default is false; the lab wants skipping to work out of the box).",
           Scope.TABLE, parse_bool),
    Option("column_stats_columns", "hoodie.metadata.index.column.stats.column.list", "",
           "Comma-separated columns to keep stats for; empty means every column of a supported type.",
           Scope.TABLE, lambda raw: ",".join(c.strip() for c in str(raw).split(",") if c.strip())),
    Option("bloom_filter_enable", "hoodie.metadata.index.bloom.filter.enable", False,
           "Also keep each base file's record-key bloom filter in the metadata table.", Scope.TABLE, parse_bool),
    Option("bucket_num", "hoodie.bucket.index.num.buckets", 4,
           "File groups per partition of a BUCKET table; fixed when the table is created (the "
           "CONSISTENT_HASHING engine starts each partition with this many and splits them). Hudi's "
           "default is 256, for tables far bigger than the lab's; labformat's is 4.",
           Scope.TABLE, parse_int, at_least(1)),
    Option("bucket_hash_field", "hoodie.bucket.index.hash.field", "",
           "BUCKET: the record-key fields whose values pick a record's bucket (comma-separated, a subset "
           "of the record key fields); empty means all of them. Hudi's bucket id: Java's "
           "List<String>.hashCode of these values, & Integer.MAX_VALUE, modulo the bucket count. Fixed "
           "when the table is created.",
           Scope.TABLE, lambda raw: ",".join(c.strip() for c in str(raw).split(",") if c.strip())),
    Option("bucket_engine", "hoodie.index.bucket.engine", BucketEngine.SIMPLE,
           "BUCKET: SIMPLE keeps `hoodie.bucket.index.num.buckets` buckets for ever; CONSISTENT_HASHING "
           "(merge-on-read only, as in Hudi) starts with that many per partition on a hash ring (XXH32 of "
           "the hash fields' values, hashing metadata under .hoodie/.bucket_index/) and lets "
           "`Table.cluster()` split a bucket that grew past `bucket_split_threshold` times "
           "`max_file_size`. Fixed when the table is created.", Scope.TABLE, one_of(BucketEngine)),
    # Table options a write may override, as Hudi's writer takes them per write; a table stores
    # them in hoodie.properties only when created with values other than these defaults.
    Option("compact_inline", "hoodie.compact.inline", False,
           "Merge-on-read: after an upsert or a delete commits its deltacommit, the writer schedules and "
           "runs a compaction (as `Table.compact`) once `compact_inline_max_delta_commits` delta commits "
           "have completed since the last compaction; the write's report holds the compaction's "
           "(`report.compaction`). Refused on a COPY_ON_WRITE table, which has no log files.",
           Scope.TABLE, parse_bool, per_write=True),
    Option("compact_inline_max_delta_commits", "hoodie.compact.inline.max.delta.commits", 5,
           "Merge-on-read with `compact_inline`: compact once this many delta commits (bulk inserts, "
           "upserts, deletes) have completed since the last compaction, or since the table began.",
           Scope.TABLE, parse_int, at_least(1), per_write=True),
    # write scope
    Option("bulk_insert_sort_mode", "hoodie.bulkinsert.sort.mode", SortMode.NONE,
           "How bulk insert orders rows before writing: NONE (as they come), GLOBAL_SORT (by partition "
           "and record key across all tasks: non-overlapping key ranges), PARTITION_SORT (sorted within "
           "each task), PARTITION_PATH_REPARTITION (unsorted); on a partitioned table these two hash rows "
           "by partition path, so a task holds whole table partitions (Hudi's row writer since 0.13).",
           Scope.WRITE, one_of(SortMode)),
    Option("bulk_insert_parallelism", "hoodie.bulkinsert.shuffle.parallelism", 0,
           "Write tasks for bulk insert: GLOBAL_SORT, and on a partitioned table PARTITION_PATH_REPARTITION "
           "and PARTITION_SORT, shuffle into exactly this many; otherwise the input is coalesced into at "
           "most this many (never splitting a partition; Hudi's NONE ignores it). 0 keeps the input's "
           "partition count.",
           Scope.WRITE, parse_int, at_least(0)),
    Option("max_file_size", "hoodie.parquet.max.file.size", 120 * 1024**2,
           "Target maximum base file size in bytes: a bulk insert rolls over to a new file group past "
           "it, an upsert sizes the inserts each file group takes to it (a merge never splits a file group).",
           Scope.WRITE, parse_size, at_least(1024)),
    Option("small_file_limit", "hoodie.parquet.small.file.limit", 100 * 1024**2,
           "Base files below this size are small files: upserts route inserts into them first. "
           "0 turns the small-file handling off.", Scope.WRITE, parse_size, at_least(0)),
    Option("upsert_parallelism", "hoodie.upsert.shuffle.parallelism", 0,
           "Partitions of the deduplication shuffle. Hudi >= 0.13: min(input partitions, this) when "
           "above 0, else the input's partition count. See `upsert_parallelism_mode`.",
           Scope.WRITE, parse_int, at_least(0)),
    Option("upsert_parallelism_mode", None, ParallelismMode.HUDI_0_13,
           "HUDI_0_13 sizes the deduplication shuffle as above; LEGACY is Hudi < 0.13: exactly "
           "`upsert_parallelism` partitions, 200 when it is 0 (the lab compares both).",
           Scope.WRITE, one_of(ParallelismMode)),
    Option("combine_before_upsert", "hoodie.combine.before.upsert", True,
           "Upsert step 1: keep one record per key, the one with the highest precombine value (a "
           "shuffle of the batch by key). false skips that shuffle, for batches known to hold each key "
           "once: every input row is then written, so a key twice in the batch is stored twice (Hudi: "
           "\"otherwise it can lead to duplicate keys and violate the uniqueness guarantees\"). Rows "
           "with a null precombine value are refused either way.", Scope.WRITE, parse_bool),
    Option("reconcile_schema", "hoodie.datasource.write.reconcile.schema", False,
           "Schema evolution on write: columns the table has and the input lacks are kept and written as null "
           "(true), or the write is refused (false, Hudi's default). Whatever its value, a column the input adds "
           "is added to the table and a safe type promotion (int to long, float to double, a wider decimal) "
           "widens the table's column; any other change of type is refused.", Scope.WRITE, parse_bool),
    Option("bloom_prune_by_ranges", "hoodie.bloom.index.prune.by.ranges", True,
           "BLOOM index: skip files whose min/max record key cannot hold an incoming key before "
           "checking bloom filters.", Scope.WRITE, parse_bool),
    Option("bloom_update_partition_path", "hoodie.bloom.index.update.partition.path", True,
           "GLOBAL_BLOOM: a record whose partition value changed is deleted from its old partition and "
           "inserted in the new one; false keeps the update in the old partition (its partition path "
           "stays the old one).", Scope.WRITE, parse_bool),
    Option("simple_update_partition_path", "hoodie.simple.index.update.partition.path", True,
           "GLOBAL_SIMPLE: as `bloom_update_partition_path`, for the global SIMPLE index.",
           Scope.WRITE, parse_bool),
    Option("record_index_update_partition_path", "hoodie.record.index.update.partition.path", False,
           "RECORD_INDEX: as `bloom_update_partition_path`, for the record-level index (Hudi's default "
           "here is false: the update stays in the record's old partition).", Scope.WRITE, parse_bool),
    Option("record_index_enable", "hoodie.metadata.record.index.enable", False,
           "Keep the record-level index in the metadata table (.hoodie/metadata/record_index/): each "
           "record key's partition and file group, updated in the same commit as the data. Built from "
           "the base files by the first write that asks for it (or by a RECORD_INDEX upsert), kept up to "
           "date by every later write and table service once it exists. Tables with meta fields and the "
           "metadata table only, not BUCKET tables.", Scope.WRITE, parse_bool),
    Option("record_index_shards", "hoodie.metadata.record.index.min.filegroup.count", 10,
           "Record-level index: the shards (Hudi's metadata file groups) a key is hashed into, fixed when "
           "the index is built; a lookup reads each shard in one task.", Scope.WRITE, parse_int, at_least(1)),
    Option("metadata_compact_max_delta_commits", "hoodie.metadata.compact.max.delta.commits", 10,
           "Record-level index: once this many commits have each added their changes to it, a RECORD_INDEX "
           "lookup first merges them into a new base, so a lookup never reads more than this many deltas.",
           Scope.WRITE, parse_int, at_least(1)),
    Option("bloom_use_metadata", "hoodie.bloom.index.use.metadata", False,
           "BLOOM index: take key ranges (column stats) and bloom filters from the metadata table "
           "instead of base-file footers; falls back to footers, and says so, when they are missing.",
           Scope.WRITE, parse_bool),
    Option("record_size_estimate", "hoodie.copyonwrite.record.size.estimate", 1024,
           "Bytes per record assumed for insert bin packing until a commit gives a real average.",
           Scope.WRITE, parse_size, at_least(1)),
    Option("record_size_estimation_threshold", "hoodie.record.size.estimation.threshold", 1.0,
           "A commit's average record size is used once it wrote more than this times "
           "`small_file_limit` bytes.", Scope.WRITE, float, at_least(0)),
    # table services (write scope: each call of t.clean() or t.cluster() takes them)
    Option("bucket_max_num", "hoodie.bucket.index.max.num.buckets", 0,
           "CONSISTENT_HASHING: the most buckets a partition may be split into; 0 (Hudi's default) "
           "means `hoodie.bucket.index.num.buckets`, so no bucket is ever split.",
           Scope.WRITE, parse_int, at_least(0)),
    Option("bucket_split_threshold", "hoodie.bucket.index.split.threshold", 2.0,
           "CONSISTENT_HASHING: `Table.cluster()` splits a bucket whose file slice (base and log files) "
           "holds more than this times `max_file_size` bytes.", Scope.WRITE, float, at_least(1)),
    Option("cleaner_policy", "hoodie.cleaner.policy", CleanerPolicy.KEEP_LATEST_COMMITS,
           "What `clean` keeps: KEEP_LATEST_COMMITS keeps, as Hudi's cleaner, every file slice the last "
           "`cleaner_commits_retained` commits can read and each file group's last slice before them, so the "
           "snapshot of the write just before them stays readable too (a query that began on it may still "
           "run); KEEP_LATEST_FILE_VERSIONS keeps the newest `cleaner_fileversions_retained` slices of each "
           "file group.",
           Scope.WRITE, one_of(CleanerPolicy)),
    Option("cleaner_commits_retained", "hoodie.cleaner.commits.retained", 10,
           "KEEP_LATEST_COMMITS: completed commits (commits, delta commits, replacecommits) a clean "
           "retains, the oldest of them being Hudi's earliestCommitToRetain; their snapshots and that of "
           "the one write before them stay readable, time travel to an older one is CleanedInstantError. "
           "Retain as many commits as complete while the longest query runs.",
           Scope.WRITE, parse_int, at_least(1)),
    Option("cleaner_fileversions_retained", "hoodie.cleaner.fileversions.retained", 3,
           "KEEP_LATEST_FILE_VERSIONS: file slices a clean keeps per file group, the newest first.",
           Scope.WRITE, parse_int, at_least(1)),
    Option("clustering_small_file_limit", "hoodie.clustering.plan.strategy.small.file.limit", 300 * 1024**2,
           "Clustering rewrites base files below this size (Hudi's default: three times "
           "`small_file_limit`, as labformat keeps Hudi's file sizes).", Scope.WRITE, parse_size, at_least(1)),
    Option("clustering_target_file_max_bytes", "hoodie.clustering.plan.strategy.target.file.max.bytes",
           1024**3, "Size clustering aims its new base files at: a clustering group of B bytes is "
           "written as ceil(B / this) files.", Scope.WRITE, parse_size, at_least(1024)),
    Option("clustering_max_bytes_per_group", "hoodie.clustering.plan.strategy.max.bytes.per.group",
           2 * 1024**3, "Bytes of small files one clustering group (one Spark task) takes at most; a "
           "partition with more is split into several groups.", Scope.WRITE, parse_size, at_least(1024)),
    Option("clustering_sort_columns", "hoodie.clustering.plan.strategy.sort.columns", "",
           "Comma-separated columns clustering sorts each group's rows by; empty sorts by the record key "
           "(Hudi leaves the rows unsorted), which keeps the new files' key ranges apart.",
           Scope.WRITE, lambda raw: ",".join(c.strip() for c in str(raw).split(",") if c.strip())),
    Option("layout_optimize_strategy", "hoodie.layout.optimize.strategy", LayoutStrategy.LINEAR,
           "How clustering orders a group's rows over its sort columns: linear (sorted by the first "
           "column, then the next), z-order or hilbert (along a space-filling curve over every sort "
           "column's rank in the group, so a filter on any one of them prunes files; labformat ranks "
           "each column's values as Hudi's `hoodie.layout.optimize.curve.build.method=sample` does "
           "with sampled ranges).", Scope.WRITE, one_of(LayoutStrategy)),
    Option("clustering_partitions", "hoodie.clustering.plan.strategy.partition.selected", "",
           "Comma-separated partition paths clustering may rewrite; empty: every partition.",
           Scope.WRITE, lambda raw: ",".join(c.strip() for c in str(raw).split(",") if c.strip())),
    Option("clustering_skip_partitions_from_latest",
           "hoodie.clustering.plan.strategy.skip.partitions.from.latest", 0,
           "Leave the newest this many partitions (by path) alone: they are still being written to.",
           Scope.WRITE, parse_int, at_least(0)),
    # concurrency (write scope: each writer says how it takes part; see labformat/lock.py, heartbeat.py)
    Option("concurrency_mode", "hoodie.write.concurrency.mode", ConcurrencyMode.SINGLE_WRITER,
           "SINGLE_WRITER refuses to start while another live writer's instant is in flight "
           "(ConcurrentWriteError; Hudi does not check, and its default EAGER failed-writes policy would roll "
           "the other writer's pending write back, pending compactions and clusterings aside); "
           "OPTIMISTIC_CONCURRENCY_CONTROL lets writers overlap and checks, at "
           "commit, that no write completed since this one's snapshot rewrote one of its file groups "
           "(WriteConflictError, this write rolled back). The check runs in both modes.",
           Scope.WRITE, one_of(ConcurrencyMode)),
    Option("lock_wait_time_ms", "hoodie.write.lock.wait_time_ms", 60_000,
           "How long a writer waits for the table lock (`.hoodie/.aux/lock`) before LockTimeoutError, "
           "which names the holder. Writers hold it for seconds (starting an instant, committing one), "
           "so Hudi's default of 60 s is also longer than a lock of a killed writer lives (see "
           "`lock_expire_minutes`).", Scope.WRITE, parse_int, at_least(0)),
    Option("lock_expire_minutes", "hoodie.write.lock.filesystem.expire", 0.5,
           "Minutes after its holder's last refresh that the table lock counts as abandoned and may be "
           "broken. A live holder refreshes it every quarter of this, so only a killed writer's lock "
           "expires. Hudi's unit; fractions allowed; 0 never expires (Hudi's default: a killed writer's "
           "lock then stays until deleted by hand). The holder's own value, stored in the lock, decides.",
           Scope.WRITE, float, at_least(0)),
    # Hudi's heartbeat defaults (60 s, 2 misses) take three minutes to declare a killed writer dead;
    # on a laptop lab that is three minutes of refused writes after every interrupted kernel. A beat
    # is one file's modification time, so beating every 3 s costs nothing, and 9 s of silence still
    # means a dead process, not a slow one (the beat runs in its own thread, not in Spark).
    Option("heartbeat_interval_ms", "hoodie.client.heartbeat.interval_in_ms", 3_000,
           "A writer refreshes `.hoodie/.heartbeat/<instant>` this often from `start` until its commit, "
           "abort or abandon. Its instant counts as dead (the next writer rolls it back) once the "
           "heartbeat is older than interval x (tolerable misses + 1), 9 s by default; the writer's own "
           "values, stored in the heartbeat, decide.", Scope.WRITE, parse_int, at_least(10)),
    Option("heartbeat_tolerable_misses", "hoodie.client.heartbeat.tolerable.misses", 2,
           "Heartbeats a writer may miss before its instant counts as dead (see `heartbeat_interval_ms`).",
           Scope.WRITE, parse_int, at_least(0)),
    Option("query_type", "hoodie.datasource.query.type", QueryType.SNAPSHOT,
           "SNAPSHOT reads each file slice's base file merged with its log files (merge-on-read); "
           "READ_OPTIMIZED reads the base files only: faster, without the updates and deletes still in "
           "log files. The same on a copy-on-write table, which has no log files. INCREMENTAL reads the "
           "latest version of every record written by a commit after `begin_instant` up to `end_instant` "
           "(`Table.changes`), opening only the file groups those commits wrote.",
           Scope.READ, one_of(QueryType)),
    Option("begin_instant", "hoodie.datasource.read.begin.instanttime", None,
           "INCREMENTAL: the instant the range starts after (exclusive); '000' for the whole history.",
           Scope.READ, parse_optional_str),
    Option("end_instant", "hoodie.datasource.read.end.instanttime", None,
           "INCREMENTAL: the instant the range ends at (inclusive); the latest completed write when unset.",
           Scope.READ, parse_optional_str),
    Option("incremental_format", "hoodie.datasource.query.incremental.format", IncrementalFormat.LATEST_STATE,
           "INCREMENTAL: latest_state (the latest version of each record the range wrote) or cdc (every "
           "change: op i/u/d, ts_ms, before and after as JSON; the table needs `cdc_enabled`).",
           Scope.READ, one_of(IncrementalFormat)),
    Option("incr_fallback_full_scan", "hoodie.datasource.read.incr.fallback.fulltablescan.enable", False,
           "INCREMENTAL: when a commit of the range is older than what cleaning kept, scan the whole table as "
           "of the end instant (filtered by commit time) instead of failing with CleanedInstantError.",
           Scope.READ, parse_bool),
    Option("holes_policy", "hoodie.read.timeline.holes.resolution.policy", HolesPolicy.FAIL,
           "INCREMENTAL: what a read does when a write that started before its range's end is still in "
           "flight (a hole: that write completes later with an older instant time, behind the checkpoint "
           "`end` a consumer keeps, and `changes(end)` would never return its rows). FAIL refuses the read "
           "(TimelineHoleError naming the instant); BLOCK ends the range at the last completed write before "
           "the oldest instant in flight, so `end` never passes it; USE_TRANSITION_TIME compares `begin` and "
           "`end` with the commits' completion times (`labformat.completionTime`; a commit without one, "
           "its instant time) and returns the latest completion time as `end`. A dead writer's instant is "
           "a hole until the next writer rolls it back; clustering and compaction never are (their records "
           "keep their commit times).",
           Scope.READ, one_of(HolesPolicy)),
    Option("data_skipping", "hoodie.enable.data.skipping", True,
           "Queries skip base files using partition values, column stats and bloom filters.",
           Scope.READ, parse_bool),
    Option("compression_codec", "hoodie.parquet.compression.codec", CompressionCodec.SNAPPY,
           "Parquet compression of base files (Hudi's own default is gzip; snappy writes faster).",
           Scope.WRITE, one_of(CompressionCodec)),
    Option("bloom_fpp", "hoodie.index.bloom.fpp", 1e-9,
           "False-positive rate each base file's record-key bloom filter is sized for "
           "(at `bloom_num_entries` keys).",
           Scope.WRITE, float, open_unit_interval),
    Option("bloom_num_entries", "hoodie.index.bloom.num_entries", 60000,
           "Keys each base file's record-key bloom filter is sized for (with `bloom_fpp`), whatever "
           "the file holds: a file with more keys gets a filter too small for it and more false "
           "positives, so the exact check opens more files; a larger value costs bytes in every "
           "file's footer (60,000 at 1e-9: about 320 KB).",
           Scope.WRITE, parse_int, at_least(1)),
    # Hudi's default is DYNAMIC_V0. labformat's is SIMPLE: the lab's bloom lessons (sweeps of
    # num_entries, `BloomSpec.predicted_fpp`) are about a filter fixed at num_entries that
    # degrades when overfull; DYNAMIC_V0 hides that by adding rows. Up to num_entries keys both
    # hold the same bits, and Hudi reads either (the footer names DYNAMIC_V0's type).
    Option("bloom_filter_type", "hoodie.bloom.index.filter.type", BloomFilterTypeCode.SIMPLE,
           "Layout of each base file's record-key bloom filter, as Hudi writes it into the footer "
           "(`org.apache.hudi.bloomfilter`): SIMPLE (one Hadoop bloom filter sized for `bloom_num_entries`) "
           "or DYNAMIC_V0 (Hudi's default: another filter of that size for every further "
           "`bloom_num_entries` keys, up to `bloom_dynamic_max_entries`).",
           Scope.WRITE, one_of(BloomFilterTypeCode)),
    Option("bloom_dynamic_max_entries", "hoodie.bloom.index.filter.dynamic.max.entries", 100_000,
           "DYNAMIC_V0 only: keys up to which the filter grows rows of `bloom_num_entries` keys; past "
           "it, keys go to the rows in turn and the false-positive rate is no longer bounded.",
           Scope.WRITE, parse_int, at_least(1)),
)

_BY_NAME: dict[str, Option] = {}
for _opt in OPTIONS:
    for _key in (_opt.name, _opt.hudi_key):
        if _key is None:
            continue
        if _key in _BY_NAME:
            raise RuntimeError(f"option key declared twice: {_key}")
        _BY_NAME[_key] = _opt


def option(key: str) -> Option:
    """The option a name or Hudi key stands for; ConfigError with the nearest valid key otherwise."""
    if not isinstance(key, str):
        raise ConfigError(f"option names are strings (a labformat name or a Hudi key), got "
                          f"{type(key).__name__}: {key!r}"[:200])
    found = _BY_NAME.get(key)
    if found is None:
        near = difflib.get_close_matches(key, list(_BY_NAME), n=1, cutoff=0.5)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ConfigError(f"unknown option {key!r}{hint}")
    return found


class Config(Mapping[str, Any]):
    """Resolved, typed options of one scope: every option of the scope, by its labformat name."""

    def __init__(self, values: Mapping[str, Any], explicit: frozenset[str]):
        self._values = dict(values)
        self.explicit = explicit  # names the caller set, as opposed to defaults

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values!r})"


# One typed view per scope: the annotations name every option of it (tests/test_config.py checks them
# against the registry), so code reads `options.max_file_size` with its type, never a string key.

class TableOptions(Config):
    """A new table's options (`Table.create`), as stored in `hoodie.properties`."""

    table_name: str | None
    table_type: TableType
    hive_style_partitioning: bool
    partitionpath_urlencode: bool
    index_type: IndexType
    metadata_enable: bool
    column_stats_enable: bool
    column_stats_columns: str
    bloom_filter_enable: bool
    cdc_enabled: bool
    cdc_supplemental_logging_mode: CdcLoggingMode
    bucket_num: int
    bucket_hash_field: str
    bucket_engine: BucketEngine
    compact_inline: bool
    compact_inline_max_delta_commits: int


class WriteOptions(Config):
    """One write's or table service's options; the table options a write may override are None when
    it leaves them to the table."""

    index_type: IndexType | None
    compact_inline: bool | None
    compact_inline_max_delta_commits: int | None
    bulk_insert_sort_mode: SortMode
    bulk_insert_parallelism: int
    max_file_size: int
    small_file_limit: int
    upsert_parallelism: int
    upsert_parallelism_mode: ParallelismMode
    combine_before_upsert: bool
    reconcile_schema: bool
    bloom_prune_by_ranges: bool
    bloom_update_partition_path: bool
    simple_update_partition_path: bool
    record_index_update_partition_path: bool
    record_index_enable: bool
    record_index_shards: int
    metadata_compact_max_delta_commits: int
    bloom_use_metadata: bool
    record_size_estimate: int
    record_size_estimation_threshold: float
    cleaner_policy: CleanerPolicy
    cleaner_commits_retained: int
    cleaner_fileversions_retained: int
    bucket_max_num: int
    bucket_split_threshold: float
    clustering_small_file_limit: int
    clustering_target_file_max_bytes: int
    clustering_max_bytes_per_group: int
    clustering_sort_columns: str
    layout_optimize_strategy: LayoutStrategy
    clustering_partitions: str
    clustering_skip_partitions_from_latest: int
    concurrency_mode: ConcurrencyMode
    lock_wait_time_ms: int
    lock_expire_minutes: float
    heartbeat_interval_ms: int
    heartbeat_tolerable_misses: int
    compression_codec: CompressionCodec
    bloom_fpp: float
    bloom_num_entries: int
    bloom_filter_type: BloomFilterTypeCode
    bloom_dynamic_max_entries: int


class ReadOptions(Config):
    """A read's or a query's options."""

    query_type: QueryType
    begin_instant: str | None
    end_instant: str | None
    incremental_format: IncrementalFormat
    incr_fallback_full_scan: bool
    holes_policy: HolesPolicy
    data_skipping: bool


_Scoped = TypeVar("_Scoped", bound=Config)


def table_options(options: Mapping[str, Any] | None = None) -> TableOptions:
    return resolve(options, [Scope.TABLE], kind=TableOptions)


def write_options(options: Mapping[str, Any] | None = None) -> WriteOptions:
    return resolve(options, [Scope.WRITE], kind=WriteOptions)


def read_options(options: Mapping[str, Any] | None = None) -> ReadOptions:
    return resolve(options, [Scope.READ], kind=ReadOptions)


def default(name: str) -> Any:
    """An option's default value (what Hudi's is, unless the registry says otherwise)."""
    return option(name).default


@overload
def resolve(options: Mapping[str, Any] | None, scopes: Iterable[Scope],
            base: Mapping[str, Any] | None = None) -> Config: ...


@overload
def resolve(options: Mapping[str, Any] | None, scopes: Iterable[Scope], base: Mapping[str, Any] | None = None, *,
            kind: type[_Scoped]) -> _Scoped: ...


def resolve(options: Mapping[str, Any] | None, scopes: Iterable[Scope], base: Mapping[str, Any] | None = None,
            kind: type[Config] = Config) -> Config:
    """Parse `options` (names or Hudi keys) over `base` over the defaults, for the given scopes.

    An option of another scope is an error too: silently ignoring a table option passed to a
    write would hide a mistake.
    """
    scopes = tuple(scopes)
    values: dict[str, Any] = {o.name: o.default for o in OPTIONS if o.scope in scopes}
    if Scope.WRITE in scopes:
        values.update({o.name: None for o in OPTIONS if o.per_write and o.scope not in scopes})
    explicit: set[str] = set()
    for source in ({} if base is None else base), ({} if options is None else options):
        if not isinstance(source, Mapping):
            raise ConfigError(f"options must be a mapping of option name to value (a dict), "
                              f"got {type(source).__name__}: {source!r}"[:200])
        seen: dict[str, str] = {}
        for key, raw in source.items():
            opt = option(key)
            if opt.scope not in scopes and not (opt.per_write and Scope.WRITE in scopes):
                raise ConfigError(
                    f"option {key!r} is a {opt.scope.value} option; it cannot be set here "
                    f"(this call takes {', '.join(s.value for s in scopes)} options)"
                )
            if opt.name in seen and seen[opt.name] != key:
                raise ConfigError(f"option {opt.name!r} given twice, as {seen[opt.name]!r} and {key!r}")
            seen[opt.name] = key
            values[opt.name] = opt.coerce(raw, key)
            explicit.add(opt.name)
    return kind(values, frozenset(explicit))


def options_markdown() -> str:
    """The options table of docs/options.md, generated from the registry."""
    lines = [
        "# labformat options",
        "",
        "Generated by `python scripts/gen_docs.py` from `labformat/config.py`; do not edit by hand.",
        "Pass options by labformat name or by Apache Hudi key.",
        "",
        "| name | Hudi key | scope | default | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for o in OPTIONS:
        choices = getattr(o.parse, "choices", None)
        doc = o.doc + (f" One of: {', '.join(choices)}." if choices and "One of" not in o.doc else "")
        default = "(none)" if o.default is None else f"`{o.default}`"
        scope = o.scope.value + (", write" if o.per_write else "")
        hudi = f"`{o.hudi_key}`" if o.hudi_key else "(labformat only)"
        lines.append(f"| `{o.name}` | {hudi} | {scope} | {default} | {doc} |")
    return "\n".join(lines) + "\n"

