"""Snapshot queries with data skipping: a scan plan of named pruning stages, then Spark's scan of the files kept.

1. `plan_scan` lists the snapshot's file slices and turns the filter into a `Predicate`;
   then each stage of `PRUNING_STAGES` (partition pruning, bucket pruning, column stats, bloom filters) keeps
   the file slices that might hold a matching row and says where its answer came from. The
   result is a `ScanPlan`, built on the driver without running a Spark job.
2. `ScanPlan.to_dataframe` is the lazy DataFrame over the kept base files (the tasks reading
   them skip row groups by their statistics), filtered again by Spark. `ScanPlan.measure` runs that scan once, every
   column, and returns a `ScanReport` with the funnel, sources, rows and times.

`Table.scan` returns the plan; `Table.query` is plan then measure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import date
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.config import ReadOptions
from labformat.context import NULL_PARTITION
from labformat.errors import CleanedInstantError, ConfigError, LabformatError, from_task_failure
from labformat.fileformat.footers import FooterCache, bloom_filter
from labformat.fs_view import check_base_files
from labformat.metadata import MetadataReader
from labformat.model.column_stats import ColumnStats
from labformat.index import consistent_bucket as ch
from labformat.index.base import IndexOptions
from labformat.index.bucket import bucket_of_file_id, bucket_of_key, check_bucket_count, is_bucket_file_id
from labformat.model.enums import BucketEngine, BucketHash, IndexType, MergeMode, QueryType, StatsSource
from labformat.model.file_group import FileSlice
from labformat.model.instant import Instant
from labformat.model.report import NOT_ON_CONNECT, Record, ScanFunnel, Source
from labformat.read.catalyst import to_predicate
from labformat.expressions.data_skipping import ROWS_CANNOT_MATCH, might_match
from labformat.expressions.predicates import Predicate, key_equality_values
from labformat.io.files import ReadCounts
from labformat.read.merge_on_read import read_file_slices
from labformat.spark.compat import is_connect
from labformat.timeline import Timeline

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.accumulators import Accumulator

    from labformat.fileformat.bloom_filter import RecordKeyFilter
    from labformat.storage import Storage
    from labformat.context import TableContext

SKIPPING_OFF = Source(StatsSource.OFF, "data skipping disabled")


@dataclass(frozen=True)
class ScanDetails(Record):
    """What a scan read beside its base files, and how."""

    predicate: str
    # The files read hold `row_groups_in_files_read` row groups (their footers say); the tasks
    # reading them skip those whose statistics rule the filter out (`io.files`) and count the
    # ones they read (a Spark accumulator): `row_groups_read`, NOT_ON_CONNECT on a Spark Connect
    # session, which has no accumulators.
    row_groups_in_files_read: int
    row_groups_read: int | str
    log_files_read: int  # merge-on-read: log files read beside the base files
    file_slices_merged: int  # merge-on-read: slices merged in a task each
    query_type: QueryType
    # Planning's reads: metadata-table files and their entries (column stats: one per base file and
    # column; bloom filters: one per base file), whatever the stages read there.
    metadata_files_read: int = 0
    stats_entries_read: int = 0
    # The tasks' own counts (`io.files.ReadCounts`; NOT_ON_CONNECT on Spark Connect): tasks that
    # read base files, base files they opened (one footer each); with `ScanPlan.counting()`, also
    # their read requests (ranged GETs on S3) and bytes, else None. Slices merged with their log
    # files are not counted.
    scan_tasks: int | str = 0
    files_opened: int | str = 0
    read_requests: int | str | None = None
    bytes_read: int | str | None = None


@dataclass(frozen=True)
class ScanReport:
    """What a query did: the skipping funnel (file counts), where stats came from, rows and time."""

    condition: str
    instant: str | None
    funnel: ScanFunnel
    stats_source: Source
    bloom_source: Source
    bucket_source: Source
    files_read: tuple[str, ...]
    rows_returned: int
    bytes_scanned: int
    planning_seconds: float
    execution_seconds: float
    details: ScanDetails

    @property
    def seconds(self) -> float:
        """The whole query: planning, then the scan."""
        return self.planning_seconds + self.execution_seconds

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([{"stage": k, "files": v} for k, v in self.funnel.as_dict().items()])

    def summary(self) -> dict[str, Any]:
        out = {"condition": self.condition, "instant": self.instant, "stats_source": str(self.stats_source),
               "bloom_source": str(self.bloom_source),
               "bucket_source": str(self.bucket_source), "rows_returned": self.rows_returned,
               "bytes_scanned": self.bytes_scanned, "planning_seconds": self.planning_seconds,
               "execution_seconds": self.execution_seconds}
        out.update(self.funnel.as_dict())
        return out


# ---- pruning stages ------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanContext:
    """What every pruning stage may read: the table (its timeline pinned), the snapshot, the filter as a
    tree, and the plan's one reader of the metadata table (None when the table keeps none)."""

    ctx: TableContext
    at: Instant | None
    schema: T.StructType
    predicate: Predicate
    snapshot: tuple[FileSlice, ...]
    metadata: MetadataReader | None = None


@dataclass(frozen=True)
class Pruned:
    """What one pruning stage kept, and where its answer came from; `row_groups` per base file path
    where the stage read footers that say (the scan report counts them without reading them again)."""

    kept: tuple[FileSlice, ...]
    source: Source
    row_groups: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PruningStage:
    """A named step of the funnel: `prune` keeps the file slices that might hold a row the filter is TRUE on."""

    name: str
    prune: Callable[[ScanContext, tuple[FileSlice, ...]], Pruned]


def _partition_stats(hive_style: bool, partition_path: str, dtype: T.DataType) -> ColumnStats:
    """The partition column's stats in a file of this partition: its one value, or nulls.

    The folder `NULL_PARTITION` ('default') holds the rows whose value is null, and, for a string
    column, also those whose value is the string 'default': the stats then say "this value, and
    maybe nulls", so that neither `p = 'default'` nor `p IS NULL` skips the folder.
    """
    raw = partition_path.split("=", 1)[1] if hive_style and "=" in partition_path else partition_path
    if raw == NULL_PARTITION:
        if isinstance(dtype, T.StringType):
            return ColumnStats(raw, raw, None, None)
        return ColumnStats(None, None, 1, 1, 0)
    value: int | date | str
    if isinstance(dtype, (T.IntegerType, T.LongType, T.ShortType, T.ByteType)):
        value = int(raw)
    elif isinstance(dtype, T.DateType):
        value = date.fromisoformat(raw)
    else:
        value = raw
    return ColumnStats(value, value, 0, 1, 0)


def prune_partitions(scan: ScanContext, slices: tuple[FileSlice, ...]) -> Pruned:
    """A file's partition value is its min and max for the partition column: no stats to read."""
    field_name = scan.ctx.config.partition_field
    if not field_name:
        return Pruned(slices, Source(StatsSource.NOT_USED, "the table is not partitioned"))
    if not scan.ctx.config.keygen.value_partitions:
        return Pruned(slices, Source(StatsSource.NOT_USED, "partition folders are not one field's values: "
                                     f"{scan.ctx.config.keygen.class_name.rsplit('.', 1)[-1]}"))
    dtype = {f.name: f.dataType for f in scan.schema.fields}.get(field_name, T.StringType())
    kept = []
    for s in slices:
        stats = {field_name: _partition_stats(scan.ctx.config.hive_style_partitioning, s.partition_path, dtype)}
        if might_match(scan.predicate, stats) is not ROWS_CANNOT_MATCH:
            kept.append(s)
    return Pruned(tuple(kept), Source(StatsSource.PARTITION_PATHS))


def prune_by_column_stats(scan: ScanContext, slices: tuple[FileSlice, ...]) -> Pruned:
    """Min/max/null counts per column: the metadata table's, or the footers' when it cannot be trusted."""
    ctx = scan.ctx
    stats, why, row_groups = None, "no metadata table", {}
    if ctx.config.column_stats_enable and scan.metadata is not None:
        # Checked against the whole snapshot: stats missing for any of its files mean they are stale.
        stats, why = scan.metadata.column_stats(list(scan.snapshot), scan.schema)
    if stats is None:
        paths = [s.path for s in slices]
        stats = ctx.footers.column_stats(paths)
        row_groups = {p: info.num_row_groups for p, info in ctx.footers.key_ranges(paths).items()}
        source = Source(StatsSource.FOOTERS, why)
    else:
        source = Source(StatsSource.METADATA_TABLE)
    key = ctx.config.record_key if ctx.config.keygen.single_field_key else None
    kept = tuple(s for s in slices
                 if might_match(scan.predicate, _slice_stats(s, stats.get(s.path, {}), key)) is not ROWS_CANNOT_MATCH)
    return Pruned(kept, _with_unpruned_logs(source, slices, key is not None), row_groups)


def _slice_stats(s: FileSlice, base_stats: dict[str, ColumnStats], record_key: str | None) -> dict[str, ColumnStats]:
    """The stats that hold for a whole file slice: its base file's when it has no logs. An update in a
    log may match where the base file's stats say nothing can, and logs have no stats of their own;
    but a log of updates and deletes only holds no key the base file lacks, so the base file's
    record-key stats still bound the slice's keys."""
    if not s.has_logs:
        return base_stats
    if s.keyed_by_base_file and record_key is not None and record_key in base_stats:
        return {record_key: base_stats[record_key]}
    return {}


def _with_unpruned_logs(source: Source, slices: tuple[FileSlice, ...], by_key: bool) -> Source:
    """`source`, with what the stage says about the file slices with log files: judged on their base
    file's record-key stats or filter only (logs of updates and deletes), or kept without pruning."""
    keyed = sum(1 for s in slices if s.has_logs and s.keyed_by_base_file) if by_key else 0
    unpruned = sum(1 for s in slices if s.has_logs) - keyed
    notes = [source.why] if source.why else []
    if keyed:
        notes.append(f"{keyed} file slice(s) with log files of updates only judged on their base file's record keys")
    if unpruned:
        notes.append(f"{unpruned} file slice(s) with log files kept without pruning (log files have no stats)")
    return replace(source, why="; ".join(notes) or None)


def prune_by_bloom_filters(scan: ScanContext, slices: tuple[FileSlice, ...]) -> Pruned:
    """Record-key point lookups (`key = v`, `key IN (...)`) against each base file's bloom filter."""
    ctx = scan.ctx
    probe, why = _point_lookup_keys(scan)
    if probe is None:
        return Pruned(slices, Source(StatsSource.NOT_USED, why))
    if not slices:
        return Pruned(slices, Source(StatsSource.NOT_USED, "no file slice left to probe"))
    # A value None: a base file without a filter (footers only).
    blooms: Mapping[str, RecordKeyFilter | None] | None
    blooms, why = None, "not in the metadata table"
    if ctx.config.bloom_filter_enable and scan.metadata is not None:
        blooms, why = scan.metadata.bloom_filters([s.path for s in slices])
    if blooms is None:
        source = Source(StatsSource.FOOTERS, why)
        blooms = {s.path: bloom_filter(ctx.storage.base_uri, s.path) for s in slices if s.keyed_by_base_file}
    else:
        source = Source(StatsSource.METADATA_TABLE)
    # An empty key set means the condition is never TRUE: no file can hold a match. A slice whose
    # logs may hold inserts is kept: its base file's filter knows nothing of their keys. A file
    # without a filter (Hudi writes none without meta fields) cannot be ruled out either.
    kept = tuple(s for s in slices if probe and (not s.keyed_by_base_file or (bloom := blooms[s.path]) is None
                                                 or bloom.might_contain(probe).any()))
    return Pruned(kept, _with_unpruned_logs(source, slices, True))


def _point_lookup_keys(scan: ScanContext) -> tuple[list[str] | None, str | None]:
    """The record keys a condition fixes (`key = v`, `key IN (...)`) as stored strings, or None and why not."""
    config = scan.ctx.config
    if not config.keygen.single_field_key or not config.populate_meta_fields:
        return None, "record keys are not one column's values"
    key_type = scan.schema[config.record_key].dataType if config.record_key in scan.schema.names else None
    if not isinstance(key_type, (T.StringType, T.IntegerType, T.LongType, T.ShortType, T.ByteType)):
        # A literal's Python text is the stored key only for strings and integers (a timestamp or a
        # double key is stored as Spark renders it, which str() does not reproduce).
        return None, "record keys are no string or integer column"
    keys = key_equality_values(scan.predicate, config.record_key)
    if keys is None:
        return None, "no record-key equality in the condition"
    return [str(k) for k in keys], None


def prune_by_buckets(scan: ScanContext, slices: tuple[FileSlice, ...]) -> Pruned:
    """BUCKET tables: a condition that fixes the record key keeps, in each partition, only the file
    groups of those keys' buckets (Hudi's bucket pruning): the hash is computed, nothing is read."""
    config = scan.ctx.config
    if config.index_type is not IndexType.BUCKET:
        return Pruned(slices, Source(StatsSource.NOT_USED, f"a {config.index_type.value} table has no buckets"))
    if config.bucket_hash is not BucketHash.JAVA_HASHCODE:
        return Pruned(slices, Source(StatsSource.NOT_USED, "the table's buckets come from Spark's murmur3 hash "
                                     "(labformat's before it hashed as Hudi), which planning does not compute"))
    keys, why = _point_lookup_keys(scan)
    if keys is None:
        return Pruned(slices, Source(StatsSource.NOT_USED, why))
    if config.bucket_engine is BucketEngine.CONSISTENT_HASHING:
        # Each partition's ring as of the snapshot names the file group each key's hash lands in.
        rings = ch.load_rings(scan.ctx.storage, scan.ctx.timeline, config.bucket_num,
                              scan.at.time if scan.at is not None else None)
        hashes = np.array([ch.key_hash(k, config.bucket_hash_fields) for k in keys], np.int64)
        wanted: dict[str, set[str]] = {}
        for partition in {s.partition_path for s in slices}:
            ring = ch.ring_of(rings, partition, config.bucket_num)
            wanted[partition] = {ring.nodes[i].file_id for i in ring.buckets_of(hashes)}
        kept = tuple(s for s in slices if s.file_id in wanted[s.partition_path])
        return Pruned(kept, Source(StatsSource.HASH, "each partition's hash ring"))
    # Pruning by a count the file groups contradict would drop the files holding the keys.
    check_bucket_count([(s.partition_path, s.file_id) for s in slices if is_bucket_file_id(s.file_id)],
                       config.bucket_num, str(scan.ctx.storage.base_uri))
    options = IndexOptions.of_table(config, IndexType.BUCKET)
    buckets = {bucket_of_key(k, options) for k in keys}
    kept = tuple(s for s in slices if not is_bucket_file_id(s.file_id) or bucket_of_file_id(s.file_id) in buckets)
    return Pruned(kept, Source(StatsSource.HASH))


PARTITION_PRUNING = PruningStage("partition_pruning", prune_partitions)
BUCKET_PRUNING = PruningStage("bucket_pruning", prune_by_buckets)
COLUMN_STATS = PruningStage("column_stats", prune_by_column_stats)
BLOOM = PruningStage("bloom", prune_by_bloom_filters)
# Cheapest first: each stage reads stats only for the file slices the stage before it kept.
PRUNING_STAGES: tuple[PruningStage, ...] = (PARTITION_PRUNING, BUCKET_PRUNING, COLUMN_STATS, BLOOM)


# ---- the plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StageResult:
    """One stage as it ran in a plan: the file slices it kept, its source, and its share of planning time."""

    name: str
    kept: tuple[FileSlice, ...]
    source: Source
    seconds: float
    row_groups: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class ScanPlan:
    """A planned snapshot query: the snapshot's file slices, each pruning stage's result, and the files to read.

    Building it runs no Spark job. `to_dataframe()` gives the rows lazily; `measure()` scans
    them once and reports.
    """

    condition: Column | str
    instant: str | None
    predicate: Predicate
    schema: T.StructType
    snapshot: tuple[FileSlice, ...]
    stages: tuple[StageResult, ...]
    planning_seconds: float
    spark: SparkSession = field(repr=False, compare=False)
    storage: Storage = field(repr=False, compare=False)
    precombine_field: str  # merge-on-read: orders the records of a file slice's base file and logs
    query_type: QueryType  # READ_OPTIMIZED: base files only (the snapshot's slices carry no logs)
    merge_mode: MergeMode  # merge-on-read: how a slice's record versions meet
    metadata_files_read: int = 0  # planning's reads of the metadata table: files, and their entries
    stats_entries_read: int = 0
    count_requests: bool = False  # the scan's tasks count their read requests (`counting()`)
    footers: FooterCache | None = field(default=None, repr=False, compare=False)  # the table's (planning read them)

    @property
    def file_slices(self) -> tuple[FileSlice, ...]:
        """The file slices left after the last stage: the base files the scan reads."""
        return self.stages[-1].kept if self.stages else self.snapshot

    @property
    def funnel(self) -> ScanFunnel:
        """File counts: in the snapshot, after each stage, read."""
        kept = {s.name: len(s.kept) for s in self.stages}
        return ScanFunnel(files_in_snapshot=len(self.snapshot), after_partition_pruning=kept[PARTITION_PRUNING.name],
                          after_bucket_pruning=kept[BUCKET_PRUNING.name], after_column_stats=kept[COLUMN_STATS.name],
                          after_bloom=kept[BLOOM.name], files_read=len(self.file_slices))

    def stage(self, name: str) -> StageResult:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no pruning stage {name!r} in this plan; it has {[s.name for s in self.stages]}")

    def to_dataframe(self) -> DataFrame:
        """The matching rows, meta columns first, as a lazy DataFrame; the same one on every call, so that
        `measure()` scans exactly what the caller gets."""
        return self._dataframe

    def counting(self) -> "ScanPlan":
        """This plan, its tasks counting their read requests and bytes too (each read then passes
        through Python: a little slower, so count in a run you do not time)."""
        return replace(self, count_requests=True)

    @cached_property
    def _row_groups_read(self) -> Accumulator[int] | None:
        return None if is_connect(self.spark) else self.spark.sparkContext.accumulator(0)

    @cached_property
    def _read_counts(self) -> Accumulator[tuple[int, ...]] | None:
        return None if is_connect(self.spark) else self.spark.sparkContext.accumulator(
            ReadCounts().zero(()), ReadCounts())  # zero() ignores its argument

    @cached_property
    def _dataframe(self) -> DataFrame:
        source = read_file_slices(self.spark, self.storage, self.file_slices, self.schema, self.precombine_field,
                                  self.merge_mode, self.predicate, self._row_groups_read, self._read_counts,
                                  self.count_requests)
        return source.filter(self.condition)

    def failure(self, exc: BaseException) -> LabformatError | None:
        """The LabformatError a failed scan of this plan stands for, or None: a file a clean deleted
        while the scan ran (CleanedInstantError), else what the failed task raised (a damaged or
        missing file: CorruptTableError naming it; a storage refusal: StorageError)."""
        read = {s.path for s in self.file_slices} | {p for s in self.file_slices for p in s.log_paths}
        cleaned = read & Timeline(self.storage).cleaned_paths()
        if cleaned:
            return CleanedInstantError(
                f"a clean deleted {len(cleaned)} file(s) this query read (e.g. {sorted(cleaned)[0]}) while it ran: "
                f"the snapshot {self.instant} is older than the commits the cleaner retains now. Query again, or "
                "retain more commits (hoodie.cleaner.commits.retained) for readers that take this long")
        return from_task_failure(exc)

    def measure(self) -> ScanReport:
        """Run the scan once, every column, counting rows as they pass (no data reaches the driver), and report."""
        observation = Observation("labformat_scan")
        started = time.perf_counter()
        try:
            df = self.to_dataframe()
            counter, reads = self._row_groups_read, self._read_counts
            groups_before = counter.value if counter is not None else 0  # the caller's own actions on df counted too
            reads_before = reads.value if reads is not None else None
            df.observe(observation, F.count(F.lit(1)).alias("rows")).write.format("noop").mode("overwrite").save()
        except Exception as exc:
            translated = self.failure(exc)
            if translated is None:
                raise
            raise translated from None
        execution = time.perf_counter() - started
        row_groups_read = counter.value - groups_before if counter is not None else NOT_ON_CONNECT
        if reads is not None:
            assert reads_before is not None  # read whenever `reads` is
            # Counts; None where not counted, NOT_ON_CONNECT (below) where not measurable.
            did: dict[str, Any] = ReadCounts.of(tuple(a - b for a, b in zip(reads.value, reads_before)))
            if not self.count_requests:
                did.update(read_requests=None, bytes_read=None)
        else:
            did = dict.fromkeys(ReadCounts.FIELDS, NOT_ON_CONNECT)
        paths = [s.path for s in self.file_slices]
        # Row groups from the footers planning read; the rest (stats from the metadata table) read now.
        known = {p: n for stage in self.stages for p, n in stage.row_groups.items()}
        unread = [p for p in paths if p not in known]
        footers = self.footers if self.footers is not None else FooterCache(self.storage)
        known.update({p: f.num_row_groups for p, f in footers.key_ranges(unread).items()})
        return ScanReport(
            condition=self.condition if isinstance(self.condition, str) else str(self.condition),
            instant=self.instant, funnel=self.funnel,
            stats_source=self.stage(COLUMN_STATS.name).source, bloom_source=self.stage(BLOOM.name).source,
            bucket_source=self.stage(BUCKET_PRUNING.name).source,
            files_read=tuple(paths), rows_returned=int(observation.get["rows"]),
            bytes_scanned=sum(s.size_bytes + s.log_bytes for s in self.file_slices),
            planning_seconds=self.planning_seconds,
            execution_seconds=execution,
            details=ScanDetails(str(self.predicate), sum(known[p] for p in paths), row_groups_read,
                                log_files_read=sum(len(s.log_paths) for s in self.file_slices),
                                file_slices_merged=sum(1 for s in self.file_slices if s.has_logs),
                                query_type=self.query_type, metadata_files_read=self.metadata_files_read,
                                stats_entries_read=self.stats_entries_read, scan_tasks=did["tasks"],
                                files_opened=did["files_opened"], read_requests=did["read_requests"],
                                bytes_read=did["bytes_read"]),
        )


def plan_scan(ctx: TableContext, condition: Column | str, at: Instant | None, options: ReadOptions) -> ScanPlan:
    """The scan plan of a query as of `at` (the latest commit when None): the stages of `PRUNING_STAGES`
    in turn, or, with data skipping off, none of them (each reported as off). READ_OPTIMIZED
    (merge-on-read): each file slice is its base file alone, its log files left unread, as Hudi's
    read-optimized query reads it."""
    if options.query_type is QueryType.INCREMENTAL:
        raise ConfigError("query() and scan() plan snapshot queries; an incremental query is Table.changes(since, "
                          "until) (or read() with hoodie.datasource.query.type=incremental), filtered afterwards")
    started = time.perf_counter()
    view = ctx.file_system_view(at)  # every stage reads the context's one timeline: the same snapshot
    latest = ctx.timeline.latest_completed_write()
    instant = at.time if at is not None else (latest.time if latest else None)
    snapshot = tuple(view.latest_file_slices())
    if options.query_type is QueryType.READ_OPTIMIZED:
        snapshot = tuple(s.base_only() for s in snapshot)
    check_base_files(ctx.storage, snapshot)  # a missing or truncated file: CorruptTableError naming it
    schema = ctx.schema(at) or T.StructType([])
    predicate = to_predicate(ctx.spark, condition, schema)
    metadata = (MetadataReader(ctx.storage, ctx.timeline, at.time if at is not None else None)
                if ctx.config.metadata_enable else None)
    scan = ScanContext(ctx, at, schema, predicate, snapshot, metadata)
    results = []
    remaining = snapshot
    for stage in PRUNING_STAGES:
        stage_started = time.perf_counter()
        pruned = stage.prune(scan, remaining) if options.data_skipping else Pruned(remaining, SKIPPING_OFF)
        results.append(StageResult(stage.name, pruned.kept, pruned.source, time.perf_counter() - stage_started,
                                   pruned.row_groups))
        remaining = pruned.kept
    return ScanPlan(condition, instant, predicate, schema, snapshot, tuple(results),
                    time.perf_counter() - started, ctx.spark, ctx.storage, ctx.config.precombine_field,
                    options.query_type, ctx.config.merge_mode,
                    metadata.files_read if metadata is not None else 0,
                    metadata.entries_read if metadata is not None else 0, footers=ctx.footers)
