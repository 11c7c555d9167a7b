"""Upsert and delete: Hudi's seven steps, one named function each, read top to bottom like the lesson.

1. deduplicate the batch by record key (highest precombine value wins; a shuffle)
2. latest file slices of every affected partition
3. tag each record as update (with its file group) or insert, through the index
4. small files: base files below hoodie.parquet.small.file.limit
5. average record size, from earlier commits
6. assign inserts to small files, then to new file groups (bin packing)
7. write: one Spark task per file group, copy-on-write merge into a new file slice (merge-on-read:
   updates and deletes of an existing file group appended as a log file of its latest slice); commit

`Upsert` runs them as an operation of the protocol (`write/operation.py`): steps 1 to 6 are its plan
(an `UpsertState` handed from step to step), step 7 its tasks; a BUCKET table's bulk insert is an
`Upsert` of kind BULK_INSERT (routed by bucket, not deduplicated).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import AbstractSet, Any, Iterable, NamedTuple, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.config import WriteOptions
from labformat.context import TableContext
from labformat.errors import ConfigError, CorruptIndexError, InvalidInputError, from_task_failure
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.fs_view import refuse_nested_partitions
from labformat.helper_columns import (
    BAD_KEYS, BUCKET, COUNT, DROP, FILE_ID, KEY, NEWEST, NULL_ORDERING, PART, TARGET, TASK_KEY
)
from labformat.index import bucket, consistent_bucket
from labformat.index.base import IndexOptions, Lookup, TagRequest, TagResult
from labformat.index.bucket import bucket_prefix
from labformat.index.registry import index_for
from labformat.metadata import MetadataReader
from labformat.model.base_file import new_file_id
from labformat.model.commit import LOG_KEYS_IN_BASE_KEY
from labformat.model.enums import BucketEngine, IndexType, Operation, ParallelismMode
from labformat.model.file_group import FileSlice
from labformat.model.instant import Instant
from labformat.model.report import TagFunnel, UpsertDetails, WriteReport
from labformat.spark.compat import default_parallelism, partitions_of
from labformat.spark.jobs import WRITE_BASE_FILES, describe
from labformat.spark.partitioning import grouped_counts
from labformat.write import sizing
from labformat.write.arrow_writer import WriteSpec
from labformat.write.merge import Target, merge_file_group
from labformat.write.compaction import inline_compaction
from labformat.write.operation import OperationRun, Plan, WriteOperation, key_column, write_spec
from labformat.write.transaction import record_index_asked
from labformat.spark.tasks import map_in_arrow

log = logging.getLogger(__name__)

class ProfileRow(NamedTuple):
    partition: str
    file_id: str | None  # None: inserts
    bucket: int | None  # BUCKET index only
    records: int


@dataclass(frozen=True)
class Profile:
    """The workload profile: records per (partition, file group or bucket), and the input's totals."""

    rows: list[ProfileRow]
    rows_in: int  # input rows, before deduplication
    records: int  # records after deduplication

    def inserts_per_partition(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            if r.file_id is None:
                out[r.partition] = out.get(r.partition, 0) + r.records
        return out

    def updates_per_file_group(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for r in self.rows:
            if r.file_id is not None:
                out[(r.partition, r.file_id)] = out.get((r.partition, r.file_id), 0) + r.records
        return dict(sorted(out.items()))  # in key order: the rows come in the order Spark collected them

    def updated_file_groups(self) -> list[tuple[str, str]]:
        return list(self.updates_per_file_group())


@dataclass(frozen=True)
class PartitionCount:
    """Step 1's count of one affected partition: records after deduplication, input rows before."""

    records: int
    rows_in: int
    null_ordering: int = 0  # input rows whose precombine value is null (an upsert refuses them)
    bad_keys: int = 0  # input rows whose record key is null or blank (every write refuses them)


# ---- step 1 -------------------------------------------------------------------------------------

def shuffle_parallelism(input_partitions: int, options: WriteOptions) -> int:
    """Hudi >= 0.13: min(input partitions, hoodie.upsert.shuffle.parallelism) when that is above 0,
    else the input's partition count. Hudi < 0.13 (LEGACY): the option itself, 200 by default."""
    configured = options.upsert_parallelism
    if options.upsert_parallelism_mode is ParallelismMode.LEGACY:
        return configured or 200
    return min(input_partitions, configured) if configured > 0 else input_partitions


@dataclass(frozen=True)
class Keyed:
    """The input with its record key (KEY) and partition path (PART) computed, and what step 1 groups by."""

    rows: DataFrame
    group: list[str]
    bad_key: Column  # 1 for a row whose key is null or blank

    @classmethod
    def of(cls, ctx: TableContext, df: DataFrame, by_key: bool = False) -> "Keyed":
        """`by_key` (a global index): a key is one record however many partitions name it."""
        conf = ctx.config
        keyed = df.withColumn(KEY, ctx.record_key_column(df.schema))
        if conf.partition_field:
            keyed = keyed.withColumn(PART, ctx.partition_path_column(df.schema))
        # Counted with the records, so that a null or blank key is refused before any instant starts,
        # whatever the index (BLOOM's range pruning would meet it only in the tag step's tasks).
        bad_key = (F.col(KEY).isNull() | (F.trim(F.col(KEY)) == "")).cast("long")
        # Group by the key alone when the table has no partition field: a constant partition column
        # would be folded away by the optimizer, the grouping would stop matching the explicit
        # repartition, and Spark would shuffle a second time (at spark.sql.shuffle.partitions).
        return cls(keyed, [PART, KEY] if conf.partition_field and not by_key else [KEY], bad_key)


def combine_records(ctx: TableContext, df: DataFrame, parallelism: int, by_key: bool = False) -> DataFrame:
    """Step 1 (hoodie.combine.before.upsert, the default): one record per (partition path, record key),
    the one with the highest precombine value.

    Ties on the precombine value are broken by the remaining columns, compared in order, so the
    winner never depends on the order rows arrive in. COUNT keeps how many input rows each
    record stood for (the report's deduplicated count), NULL_ORDERING how many of them had a null
    precombine value and BAD_KEYS how many a null or blank key (counted in the same aggregation;
    `partition_counts` sums them, and the upsert refuses the batch, as Hudi refuses a null
    ordering value)."""
    conf = ctx.config
    keyed = Keyed.of(ctx, df, by_key)
    shuffled = keyed.rows.repartition(parallelism, *keyed.group)
    data_columns = list(df.columns)
    # Grouped by the key alone, the winner's partition path travels with its columns.
    carried = [PART] if PART not in keyed.group and PART in keyed.rows.columns else []
    ordering = [conf.precombine_field] + [c for c in data_columns if c != conf.precombine_field]
    orderable = [c for c in ordering if _orderable(df.schema[c].dataType)]
    # Built as SQL text, parsed once: a Column per field costs a few Py4J calls each, and every
    # upsert pays them on the driver (about 500 calls for the drone table's 20 columns).
    if len(orderable) == len(ordering) and not carried:
        newest = F.expr(f"max({_struct_sql(ordering)})")
    else:  # maps cannot be compared: order by the other columns, carry the maps (and PART) along
        newest = F.expr(f"max_by({_struct_sql(ordering + carried)}, {_struct_sql(orderable)})")
    deduped = shuffled.groupBy(*keyed.group).agg(
        newest.alias(NEWEST), F.count(F.lit(1)).alias(COUNT),
        F.sum(F.col(conf.precombine_field).isNull().cast("long")).alias(NULL_ORDERING),
        F.sum(keyed.bad_key).alias(BAD_KEYS))
    # Back out of the struct in the input's column order (the struct's own starts with the precombine field).
    deduped = deduped.selectExpr(*keyed.group, COUNT, NULL_ORDERING, BAD_KEYS,
                                 *[f"{NEWEST}.{_quoted(c)} AS {_quoted(c)}" for c in carried + data_columns])
    return _with_partition(ctx, deduped)


def keys_to_delete(ctx: TableContext, df: DataFrame, parallelism: int, by_key: bool = False) -> DataFrame:
    """Step 1 of a delete: the distinct keys (and partition paths) of the input, each with the rows it
    stood for; a one-field key also under the key field's own name, which the write tasks read."""
    conf = ctx.config
    keyed = Keyed.of(ctx, df, by_key)
    # A global index deletes the key wherever it is: the partition the input names only counts it.
    carried = [F.max(PART).alias(PART)] if PART not in keyed.group and PART in keyed.rows.columns else []
    deduped = _with_partition(ctx, keyed.rows.repartition(parallelism, *keyed.group).groupBy(*keyed.group).agg(
        F.count(F.lit(1)).alias(COUNT), F.sum(keyed.bad_key).alias(BAD_KEYS), *carried))
    if conf.keygen.single_field_key:
        deduped = deduped.withColumn(conf.record_key, F.col(KEY))
    return deduped


def every_row(ctx: TableContext, df: DataFrame) -> DataFrame:
    """Step 1 with hoodie.combine.before.upsert=false: no shuffle; every input row is a record of its
    own, in the same columns and partitions (a key twice in the batch is then stored twice)."""
    conf = ctx.config
    keyed = Keyed.of(ctx, df)
    rows = keyed.rows.withColumn(COUNT, F.lit(1).cast("long")).withColumn(
        NULL_ORDERING, F.col(conf.precombine_field).isNull().cast("long")).withColumn(BAD_KEYS, keyed.bad_key)
    return _with_partition(ctx, rows.select(*keyed.group, COUNT, NULL_ORDERING, BAD_KEYS, *df.columns))


def rows_to_buckets(ctx: TableContext, df: DataFrame) -> DataFrame:
    """Step 1 of a BUCKET table's bulk insert: every row kept, keyed for routing to its bucket."""
    keyed = Keyed.of(ctx, df)
    return _with_partition(ctx, keyed.rows.withColumn(COUNT, F.lit(1).cast("long")).withColumn(BAD_KEYS, keyed.bad_key))


def deduplicate(ctx: TableContext, df: DataFrame, options: WriteOptions, operation: Operation,
                input_count: int, by_key: bool = False) -> tuple[DataFrame, int]:
    """Step 1 for `operation`: (the records, the partitions they are in). `input_count`: the
    partitions `df` is read in; a shuffle takes `shuffle_parallelism` of them (at least one: an
    empty input can have none). `by_key` (a global index): one record per key, whatever partition."""
    parallelism = max(1, shuffle_parallelism(input_count, options))
    if operation is Operation.BULK_INSERT:
        return rows_to_buckets(ctx, df), input_count
    if operation is Operation.DELETE:
        return keys_to_delete(ctx, df, parallelism, by_key), parallelism
    if not options.combine_before_upsert:
        return every_row(ctx, df), input_count
    return combine_records(ctx, df, parallelism, by_key), parallelism


def _quoted(name: str) -> str:
    """A column name as a SQL identifier: backticks around it, its own backticks doubled."""
    return "`" + name.replace("`", "``") + "`"


def _struct_sql(names: list[str]) -> str:
    """`struct(`a`, `b`)` for the named columns: field names are the columns' names."""
    return "struct(" + ", ".join(_quoted(n) for n in names) + ")"


def _orderable(dtype: T.DataType) -> bool:
    """Whether Spark can compare values of this type (a map, or anything holding one, cannot)."""
    if isinstance(dtype, T.MapType):
        return False
    if isinstance(dtype, T.ArrayType):
        return _orderable(dtype.elementType)
    if isinstance(dtype, T.StructType):
        return all(_orderable(f.dataType) for f in dtype.fields)
    return True


def _with_partition(ctx: TableContext, df: DataFrame) -> DataFrame:
    return df if ctx.config.partition_field else df.withColumn(PART, F.lit(""))


def partition_counts_query(deduped: DataFrame, tasks: int) -> DataFrame:
    """Records, input rows, null precombine values and null or blank keys per partition path (PART,
    records, rows_in, null_ordering, bad_keys), counted in `tasks` tasks; not run here."""
    sums = {"records": None, "rows_in": COUNT, "null_ordering": NULL_ORDERING, "bad_keys": BAD_KEYS}
    counted = grouped_counts(deduped, [PART], {k: c for k, c in sums.items() if c is None or c in deduped.columns},
                             tasks)
    for name in ("null_ordering", "bad_keys"):  # columns a delete's or a bucket load's records lack
        if sums[name] not in deduped.columns:
            counted = counted.withColumn(name, F.lit(0).cast("long"))
    return counted


def partition_counts(deduped: DataFrame, tasks: int) -> dict[str, PartitionCount]:
    """The affected partitions with their counts; the one pass that also fills the persisted records."""
    return counts_by_partition((r[PART], r.records, r.rows_in, r.null_ordering, r.bad_keys)
                               for r in partition_counts_query(deduped, tasks).collect())


def counts_by_partition(rows: Iterable[tuple[str, int, int | None, int | None, int | None]]
                        ) -> dict[str, PartitionCount]:
    return {part: PartitionCount(records, rows_in or 0, nulls or 0, bad or 0)
            for part, records, rows_in, nulls, bad in rows}


def fuses_count_into_tag(ctx: TableContext, index_type: IndexType, operation: Operation) -> bool:
    """Whether step 1's count runs inside the tag step's Spark job, saving a job per upsert.

    Only without a partition field: the one affected partition is then the table's root, known
    before any count, so step 2 and the BLOOM lookup need nothing from step 1 but its lazy
    records. With a partition field, step 2 lists only the partitions step 1 found, so the
    count runs first, in a job of its own (as Hudi counts records per partition first).
    """
    conf = ctx.config
    return (index_type is IndexType.BLOOM and conf.populate_meta_fields and not conf.partition_field
            and operation in (Operation.UPSERT, Operation.DELETE))


def refuse_bad_rows(counts: dict[str, PartitionCount], precombine_field: str, record_key: str) -> None:
    """InvalidInputError when step 1 counted input rows with a null or blank record key, or with a null
    precombine value: Hudi refuses a null ordering value, which would otherwise replace the stored
    record whatever its own value."""
    bad = sum(c.bad_keys for c in counts.values())
    if bad:
        raise InvalidInputError(f"null or empty record keys: {bad} input row(s) (record key {record_key!r}); "
                                "table unchanged")
    nulls = sum(c.null_ordering for c in counts.values())
    if nulls:
        raise InvalidInputError(f"{nulls} input row(s) have a null precombine value (column {precombine_field!r}); "
                                "an upsert needs one to order records, table unchanged")


# ---- step 2 -------------------------------------------------------------------------------------

def latest_file_slices(ctx: TableContext, partitions: set[str], writes_rows: bool = True,
                       every_partition: bool = False) -> tuple[list[FileSlice], int]:
    """Step 2: the latest file slice of each file group in the affected partitions, or in every
    partition for a global index (and the table's file count). InvalidInputError, before any
    instant, for a partition path that would nest in another; CorruptTableError for a BUCKET table
    whose file groups contradict its bucket count (`bucket.check_layout`)."""
    view = ctx.file_system_view()
    groups = view.file_groups()
    conf = ctx.config
    if conf.index_type is IndexType.BUCKET and conf.bucket_engine is BucketEngine.SIMPLE:
        # Every partition's, not only the affected ones': a count that contradicts any file group is no
        # count the table was written with.
        bucket.check_layout([(g.partition_path, g.file_id) for g in groups], conf.bucket_num, str(ctx.storage.base_uri))
    if writes_rows:  # a delete writes no partition: one that matches nothing deletes nothing
        refuse_nested_partitions(partitions, {g.partition_path for g in groups})
    return view.latest_file_slices(None if every_partition else partitions), len(groups)


# ---- step 3 -------------------------------------------------------------------------------------

def tag_records(lookup: Lookup, request: TagRequest, index_damaged: str | None = None) -> TagResult:
    """Step 3: tag each record with the file group holding its key (FILE_ID), or none: an insert,
    by the write's index (`registry.index_for`). `index_damaged` (RECORD_INDEX): why its index is to
    be built anew first."""
    result = index_for(lookup, index_damaged).tag(request)
    if result.updates is None:  # the profile will count the tagged records, and the write reads them again
        result.tagged = result.tagged.persist()
        result.cleanup.append(result.tagged)
    return result


def workload_profile(tag: TagResult, counts: dict[str, PartitionCount], index_type: IndexType,
                     tasks: int) -> Profile:
    """Records per file group (updates) and per partition (inserts).

    BLOOM counted its matches per file group while checking keys, so inserts are step 1's
    count less those; the other indexes count their tagged records in one more pass.
    """
    rows_in = sum(c.rows_in for c in counts.values())
    records = sum(c.records for c in counts.values())
    if tag.updates is not None:
        matched: dict[str, int] = {}
        rows = []
        for part, file_id, n in tag.updates:
            rows.append(ProfileRow(part, file_id, None, n))
            matched[part] = matched.get(part, 0) + n
        rows += [ProfileRow(part, None, None, c.records - matched.get(part, 0))
                 for part, c in sorted(counts.items()) if c.records > matched.get(part, 0)]
        return Profile(rows, rows_in, records)
    by_bucket = index_type is IndexType.BUCKET
    columns = [PART, FILE_ID] + ([BUCKET] if by_bucket else [])
    grouped = grouped_counts(tag.tagged, columns, {"records": None}, tasks).collect()
    rows = [ProfileRow(r[PART], r[FILE_ID], r[BUCKET] if by_bucket else None, r.records) for r in grouped]
    if tag.keys_observed is not None:  # the count above computed the (persisted) tagged records: the join ran
        observed: dict[str, Any] = {name: int(n) for name, n in tag.keys_observed.get.items()}  # TagFunnel's int fields
        tag.funnel = replace(tag.funnel, **observed)
    return Profile(rows, rows_in, records)


# ---- steps 4-6 ----------------------------------------------------------------------------------

def find_small_files(slices: list[FileSlice], options: WriteOptions) -> dict[str, list[FileSlice]]:
    """Step 4: small files per partition, the first place inserts go."""
    out: dict[str, list[FileSlice]] = {}
    for s in sizing.small_files(slices, options.small_file_limit):
        out.setdefault(s.partition_path, []).append(s)
    return out


def estimate_record_size(ctx: TableContext, options: WriteOptions) -> tuple[int, str]:
    """Step 5: average bytes per record from the commit history."""
    timeline = ctx.timeline
    commits = [timeline.commit_metadata(i) for i in timeline.completed_writes()]
    return sizing.average_record_size(commits, options.record_size_estimation_threshold, options.small_file_limit,
                                      options.record_size_estimate)


@dataclass
class WritePlan:
    """The targets of the write (one Spark task each) and how records are routed to them."""

    targets: list[Target]
    update_routes: list[tuple[str, str, int]]  # (partition, file id, target)
    insert_routes: list[tuple[str, float, float, int]]  # (partition, lo, hi, target): hash share of inserts
    bucket_routes: list[tuple[str, int, int]]  # BUCKET: (partition, bucket, target)
    insert_buckets: list[sizing.InsertBucket]


# An incoming row costs a write task about five times a row carried over from the old base file:
# it crosses from the JVM, is sorted and hashed into a new bloom filter. Measured at `medium`:
# ~6.6 us per inserted row against ~1.2 us per carried-over row (2-core machine).
INCOMING_ROW_COST = 5


def task_cost(old: FileSlice | None, incoming_records: int, record_size: int) -> int:
    """A write task's expected work, in bytes of carried-over rows: its old base file, plus its
    incoming records weighted by INCOMING_ROW_COST."""
    return (old.size_bytes if old else 0) + INCOMING_ROW_COST * incoming_records * record_size


def assign_inserts(profile: Profile, slices: list[FileSlice], small: dict[str, list[FileSlice]],
                   record_size: int, options: WriteOptions, index_type: IndexType, operation: Operation,
                   merge_on_read: bool = False) -> WritePlan:
    """Step 6: every update's file group is a target; inserts fill small files, then new file groups.
    On a merge-on-read table, update-only and delete targets append log files (`with_log_appends`)."""
    latest = {(s.partition_path, s.file_id): s for s in slices}
    targets: list[Target] = []
    index_of: dict[tuple[str, str], int] = {}

    def target_for(part: str, file_id: str | None, prefix: str | None = None) -> int:
        if file_id is None:
            file_id = new_file_id(prefix)
        key = (part, file_id)
        if key not in index_of:
            old = latest.get(key)
            index_of[key] = len(targets)
            targets.append(Target(part, file_id, old.path if old else None,
                                  old.base_instant_time if old else "null", prefix))
        return index_of[key]

    if index_type is IndexType.BUCKET:
        routes: list[tuple[str, int, int]] = []
        for r in profile.rows:
            assert r.bucket is not None  # a BUCKET index's profile counts per bucket
            # A consistent-hashing bucket's file id comes from its ring, whether its file group exists yet or not.
            exists = r.file_id is not None and (r.partition, r.file_id) in latest
            if operation is Operation.DELETE and not exists:
                continue  # no file group in that bucket: nothing to delete
            prefix = bucket_prefix(r.bucket) if r.file_id is None or exists else r.file_id
            routes.append((r.partition, r.bucket, target_for(r.partition, r.file_id, prefix)))
        plan = WritePlan(targets, [], [], sorted(set(routes)), [])
        # Merge-on-read: a bucket's file group is fixed, so its inserts go to its log with its updates
        # (Hudi's bucket index can index log files); only a bucket's first records make a base file.
        return with_log_appends(plan, latest, bucket=True) if merge_on_read else plan

    updated = profile.updated_file_groups()
    if operation is Operation.DELETE:
        by_size = sorted(updated, key=lambda pf: -(latest[pf].size_bytes if pf in latest else 0))
        plan = WritePlan(targets, [(p, f, target_for(p, f)) for p, f in by_size], [], [], [])
        return with_log_appends(plan, latest) if merge_on_read else plan
    buckets = sizing.assign_inserts(profile.inserts_per_partition(), small, record_size, options.max_file_size)
    # New file groups are named now, so that each can be ranked with the others before it has a task.
    bucket_keys = [(b.partition_path, b.file_id or new_file_id()) for b in buckets]
    incoming = profile.updates_per_file_group()
    for key, b in zip(bucket_keys, buckets):
        incoming[key] = incoming.get(key, 0) + b.records
    # Spark starts a stage's tasks in partition order, and a file group's task is its target's
    # index: the costliest first (longest processing time first), so that no long task starts
    # last while the other cores idle. Ties keep the order above (file groups sorted, then insert
    # buckets): never the random new file ids, since the task index is written into every
    # row's commit seqno, and with it the file's size.
    for key in sorted(incoming, key=lambda k: -task_cost(latest.get(k), incoming[k], record_size)):
        target_for(*key)
    update_routes = [(p, f, index_of[(p, f)]) for p, f in updated]
    insert_routes = []
    cumulative: dict[str, float] = {}
    last_of_partition = {b.partition_path: i for i, b in enumerate(buckets)}
    for i, (key, b) in enumerate(zip(bucket_keys, buckets)):
        lo = cumulative.get(b.partition_path, 0.0)
        hi = 2.0 if last_of_partition[b.partition_path] == i else lo + b.weight  # the last share takes the rest
        cumulative[b.partition_path] = hi
        insert_routes.append((b.partition_path, lo, hi, index_of[key]))
    plan = WritePlan(targets, update_routes, insert_routes, [], buckets)
    return with_log_appends(plan, latest, insert_targets={t for *_, t in insert_routes}) if merge_on_read else plan


def with_log_appends(plan: WritePlan, latest: dict[tuple[str, str], FileSlice],
                     insert_targets: AbstractSet[int] = frozenset(), bucket: bool = False) -> WritePlan:
    """Merge-on-read: each existing file group that takes updates or deletes only appends a log file
    to its latest slice; one that also takes inserts (a small file, which has no logs) is merged
    into a new base file, as on copy-on-write."""
    targets = []
    for i, t in enumerate(plan.targets):
        old = latest.get((t.partition_path, t.file_id))
        if old is not None and i not in insert_targets:
            t = replace(t, log_version=max((f.version for f in old.log_files), default=0) + 1,
                        slice_logs=old.log_paths if bucket else None)
        targets.append(t)
    return replace(plan, targets=targets)


# ---- step 7 -------------------------------------------------------------------------------------

_MASK32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark's `hash()` of a LongType value (Murmur3_x86_32.hashLong, seed 42), as a signed int.

    The hash partitioner of `repartition(n, col)` uses it, so the driver can pick routing keys
    without a Spark job (one job saved whenever a new number of write targets comes up).
    """
    h = seed & _MASK32
    for word in (value & _MASK32, (value >> 32) & _MASK32):  # the low half first, as hashLong
        k = (word * 0xCC9E2D51) & _MASK32
        k = (_rotl32(k, 15) * 0x1B873593) & _MASK32
        h = (_rotl32(h ^ k, 13) * 5 + 0xE6546B64) & _MASK32
    h ^= 8  # the input's length in bytes
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & _MASK32
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=64)  # Spark's hash is fixed, so the answer for n never changes
def task_keys(n: int) -> tuple[int, ...]:
    """One value per task index such that Spark's hash partitioner sends it exactly there.

    `repartition(n, col)` places a row in partition pmod(hash(col), n); routing each target's
    rows by its own such value gives every file group a Spark task of its own, with no two
    file groups sharing one (Hudi does this with a custom partitioner).
    """
    found: dict[int, int] = {}
    for value in range(64 * n + 64):
        found.setdefault(spark_hash_long(value) % n, value)  # Python's % is pmod for n > 0
        if len(found) == n:
            break
    missing = [p for p in range(n) if p not in found]
    if missing:
        raise RuntimeError(f"no hash key found for task partitions {missing[:5]}")
    return tuple(found[p] for p in range(n))


def _lookup(pairs: list[tuple[str, int]], key: Column) -> Column:
    """A literal map lookup: no join and no Spark job, where a broadcast join of a route table needs one."""
    if not pairs:
        return F.lit(None).cast("int")
    entries = [F.lit(v) for pair in pairs for v in pair]
    return F.element_at(F.create_map(*entries), key)


def route_records(tag: TagResult, plan: WritePlan, keys: tuple[int, ...]) -> DataFrame:
    """Add TARGET and TASK_KEY to every record that goes to a file group; drop the rest.

    One pass over the tagged records: an update goes to its file group's target, a BUCKET
    record to its bucket's, and an insert to the insert bucket its key's hash share falls in.
    """
    tagged = tag.tagged
    sep = F.lit("\u0000")  # partition paths and file ids never contain it
    if plan.bucket_routes:
        target = _lookup([(f"{p}\u0000{b}", t) for p, b, t in plan.bucket_routes],
                         F.concat(F.col(PART), sep, F.col(BUCKET).cast("string")))
    else:
        target = _lookup([(f"{p}\u0000{f}", t) for p, f, t in plan.update_routes],
                         F.concat(F.col(PART), sep, F.col(FILE_ID)))
        if plan.insert_routes:
            # A uniform share in [0, 1) from the key's hash: inserts spread over the buckets by weight.
            share = F.xxhash64(F.col(KEY)).bitwiseAND(F.lit(0x7FFFFFFFFFFFFFFF)) / F.lit(float(2**63))
            insert_target = None
            for p, _, hi, t in plan.insert_routes:  # in order of share within each partition
                hit = (F.col(PART) == F.lit(p)) & (share < F.lit(hi))
                insert_target = F.when(hit, F.lit(t)) if insert_target is None else insert_target.when(hit, F.lit(t))
            target = F.when(F.col(FILE_ID).isNotNull(), target).otherwise(insert_target)
    task_key = F.element_at(F.array(*[F.lit(k) for k in keys]), F.col(TARGET) + 1)
    return (tagged.withColumn(TARGET, target.cast("int")).filter(F.col(TARGET).isNotNull())
            .withColumn(TASK_KEY, task_key.cast("long")))


def write_file_groups(routed: DataFrame, plan: WritePlan, spec: WriteSpec, operation: Operation
                      ) -> list[BaseFileStat]:
    """Step 7: one task per target file group merges and writes; returns the tasks' write stats."""
    n = len(plan.targets)
    targets = dict(enumerate(plan.targets))
    key = spec.record_key
    columns = list(spec.data_columns) if operation is not Operation.DELETE else [key]
    if key not in columns:
        columns.append(key)
    if DROP in routed.columns and operation is not Operation.DELETE:
        columns.append(DROP)  # a global index's rows that remove a moved record's old copy
    with describe(routed.sparkSession, "route records to file groups", WRITE_BASE_FILES, before="move matched keys"):
        rows = map_in_arrow(routed.repartition(n, TASK_KEY).select(*columns, TARGET),
                            lambda batches: merge_file_group(batches, spec, targets, operation),
                            BaseFileStat.spark_ddl()).collect()
    return [BaseFileStat.from_row(r) for r in rows]


# ---- the whole operation --------------------------------------------------------------------------

@dataclass
class UpsertState(Plan):
    """What each step of an upsert hands the next: the plan of steps 1 to 6."""

    index_type: IndexType = IndexType.BLOOM
    data_schema: T.StructType | None = None
    schema_changes: tuple[str, ...] = ()
    input: DataFrame | None = None  # the batch, in the table's (evolved) schema
    input_partitions: int = 0
    lookup: Lookup | None = None
    deduped: DataFrame | None = None  # step 1's records, persisted
    parallelism: int = 0  # step 1's shuffle partitions
    shuffles: int = 1  # tasks of the counting shuffles: step 1's parallelism, at least the cores
    counts: dict[str, PartitionCount] = field(default_factory=dict)
    slices: list[FileSlice] = field(default_factory=list)  # step 2
    files_in_snapshot: int = 0
    tag: TagResult | None = None  # step 3
    profile: Profile | None = None
    small: dict[str, list[FileSlice]] = field(default_factory=dict)  # step 4
    record_size: int = 0  # step 5
    record_size_source: str | None = None
    write_plan: WritePlan | None = None  # step 6


class Upsert(WriteOperation[UpsertState, BaseFileStat]):
    """Upsert (or delete) `df` into the table through the seven steps; a BUCKET table's bulk insert when
    `kind` is BULK_INSERT. On a merge-on-read table with `hoodie.compact.inline`, the compaction due
    after the delta commit is a post-commit step of its transaction (`report.compaction`)."""

    def __init__(self, df: DataFrame, kind: Operation) -> None:
        self.df = df
        self.kind = kind

    def index_type(self, ctx: TableContext, options: WriteOptions) -> IndexType:
        """The write's index (a write may switch among all but BUCKET, never to or from BUCKET)."""
        table_index = ctx.config.index_type
        index_type = options.index_type or table_index
        if (index_type is IndexType.BUCKET) != (table_index is IndexType.BUCKET):
            raise ConfigError(f"hoodie.index.type={index_type.value}: this table was created with {table_index.value}; "
                              "a BUCKET table's layout is fixed, so neither switch to nor from BUCKET")
        record_index_asked(ctx, options)
        return index_type

    def plan(self, run: OperationRun) -> UpsertState:
        ctx, options, kind = run.ctx, run.options, self.kind
        state = UpsertState(index_type=self.index_type(ctx, options))
        with run.step("validate"):
            ctx.validate_input(self.df, need_precombine=kind is Operation.UPSERT, writes_rows=kind.writes_rows
                               or kind is Operation.BULK_INSERT)
            if kind is Operation.DELETE:
                state.data_schema, state.input = ctx.schema(), self.df
            else:
                state.data_schema, state.schema_changes = ctx.schema_for_write(self.df, options.reconcile_schema)
                state.input = ctx.conform_input(self.df, state.data_schema)
        if state.data_schema is None:  # a delete on a table never written to
            state.nothing_to_do = True
            return state
        state.input_partitions = partitions_of(state.input)
        # Every shuffle's task count is set in the plan (spark/partitioning.py), never in the session.
        state.shuffles = max(shuffle_parallelism(state.input_partitions, options), default_parallelism(ctx.spark), 1)
        index_options = IndexOptions.of_table(ctx.config, state.index_type, options.bloom_prune_by_ranges,
                                              options.bloom_use_metadata, update_partition_path(state.index_type, options),
                                              options.record_index_shards, options.metadata_compact_max_delta_commits)
        state.lookup = Lookup(ctx, index_options, state.data_schema,
                              MetadataReader(ctx.storage, ctx.timeline) if options.bloom_use_metadata else None)
        self._steps_1_to_6(run, state)
        assert state.write_plan is not None  # step 6's
        state.nothing_to_do = not state.write_plan.targets  # an empty write never starts an instant
        return state

    def _steps_1_to_6(self, run: OperationRun, state: UpsertState) -> None:
        ctx, options, kind = run.ctx, run.options, self.kind
        fused = fuses_count_into_tag(ctx, state.index_type, kind)
        assert state.input is not None and state.lookup is not None  # set by `plan` before the steps
        with run.step("deduplicate"):
            deduped, state.parallelism = deduplicate(ctx, state.input, options, kind, state.input_partitions,
                                                     by_key=state.index_type.is_global)
            deduped = deduped.persist()
            run.cleanup.append(deduped)
            combined = kind is not Operation.BULK_INSERT and (options.combine_before_upsert or kind is not Operation.UPSERT)
            count_stages = ("read input",) + (("keep newest per key",) if combined else ())
            counted = partition_counts_query(deduped, state.shuffles)
            if fused:
                partitions = {""}  # counted in the tag step's job, which also runs this step's shuffle
            else:
                # Materialize here, so the shuffle's time and tasks belong to this step.
                with describe(ctx.spark, *count_stages, "count per partition path"):
                    state.counts = partition_counts(deduped, state.shuffles)
                refuse_bad_rows(state.counts, ctx.config.precombine_field, ctx.config.record_key)
                partitions = set(state.counts)
            helpers = [c for c in (NULL_ORDERING, BAD_KEYS) if c in deduped.columns]
            state.deduped = records = deduped.drop(*helpers) if helpers else deduped  # still read from the persisted records
        with run.step("latest_file_slices"):
            state.slices, state.files_in_snapshot = latest_file_slices(ctx, partitions, writes_rows=kind.writes_rows,
                                                                       every_partition=state.index_type.is_global)
        lookup = state.lookup
        with run.step("tag"):
            def tag(index_damaged: str | None = None) -> None:
                request = TagRequest(records, state.slices, state.files_in_snapshot, deleting=kind is Operation.DELETE,
                                     counted=counted if fused else None, count_stages=count_stages,
                                     count_shuffles=state.parallelism > 1)
                state.tag = tag_records(lookup, request, index_damaged)
                run.cleanup.extend(state.tag.cleanup)
                if fused:
                    assert state.tag.partition_counts is not None  # BLOOM counted them, `counted` given
                    state.counts = counts_by_partition(state.tag.partition_counts)
                    refuse_bad_rows(state.counts, ctx.config.precombine_field, ctx.config.record_key)
                state.profile = workload_profile(state.tag, state.counts, state.index_type, state.shuffles)

            try:
                tag()
            except Exception as exc:  # noqa: BLE001 - only a damaged record index is handled here
                damaged = from_task_failure(exc) if state.index_type is IndexType.RECORD_INDEX else None
                if not isinstance(damaged, CorruptIndexError):
                    raise
                # The lookup ran in the profile's job, before any instant: the index, derived from
                # the base files, is built from them again (its build refuses a key stored twice).
                log.warning("%s: the record index is damaged (%s); rebuilding it from the base files", ctx.storage.base_uri,
                            damaged)
                tag(str(damaged))
        if fused:
            run.steps.ran_in("deduplicate", "tag")
        with run.step("small_files"):
            takes_inserts = kind is not Operation.DELETE and state.index_type is not IndexType.BUCKET
            state.small = find_small_files(state.slices, options) if takes_inserts else {}
        with run.step("record_size"):
            state.record_size, state.record_size_source = estimate_record_size(ctx, options)
        assert state.profile is not None  # step 3's
        with run.step("assign_inserts"):
            state.write_plan = assign_inserts(state.profile, state.slices, state.small, state.record_size, options,
                                              state.index_type, kind, merge_on_read=ctx.config.merge_on_read)

    def write(self, run: OperationRun, state: UpsertState, instant: Instant | None) -> list[BaseFileStat]:
        # A plan with targets: every step ran, and `execute` started the instant.
        assert instant is not None and state.data_schema is not None
        assert state.tag is not None and state.write_plan is not None
        ctx = run.ctx
        spec = write_spec(ctx, run.options, instant.time, state.data_schema, key_column(ctx, state.data_schema),
                          log_blocks=ctx.config.merge_on_read)
        if ctx.config.bucket_engine is BucketEngine.CONSISTENT_HASHING:
            # The rings the tag used for partitions without one yet: before any file group they name.
            consistent_bucket.save_initial_rings(ctx.storage, sorted({t.partition_path for t in state.write_plan.targets}),
                                                 ctx.config.bucket_num)
        routed = route_records(state.tag, state.write_plan, task_keys(len(state.write_plan.targets)))
        return write_file_groups(routed, state.write_plan, spec, self.kind)

    def commit(self, run: OperationRun, state: UpsertState, written: list[BaseFileStat]) -> None:
        assert state.data_schema is not None  # a plan with targets
        # BLOOM and SIMPLE cannot index logs, so inserts went to base files: the logs this delta
        # commit wrote hold keys of their base files only (BUCKET puts inserts in a bucket's logs).
        keyed = run.ctx.config.merge_on_read and state.index_type is not IndexType.BUCKET
        run.tx.commit(written, state.data_schema, extra={LOG_KEYS_IN_BASE_KEY: "true"} if keyed else None)
        if self.kind is not Operation.BULK_INSERT:
            run.tx.after_commit.append(inline_compaction(run.ctx, run.options))

    def report(self, run: OperationRun, state: UpsertState, written: list[BaseFileStat] | None,
               instant: str | None) -> WriteReport:
        profile = state.profile
        rows_in = profile.rows_in if profile else 0
        deduplicated = profile.rows_in - profile.records if profile else 0
        if written is None:  # nothing to write: no instant was started
            details = UpsertDetails(state.index_type, state.parallelism, schema_changes=state.schema_changes)
            return run.report(None, rows_in=rows_in, rows_deduplicated=deduplicated,
                              funnel=_funnel(state, ()) if state.tag else None, details=details)
        assert state.tag is not None and state.write_plan is not None  # written: every step ran
        files = sorted(written, key=lambda s: s.path)
        incoming = sum(s.incoming_bytes for s in files)
        size = sum(s.file_size for s in files)
        details = UpsertDetails(
            state.index_type, state.parallelism, lookup_source=state.tag.lookup_source, record_size=state.record_size,
            record_size_source=state.record_size_source, small_files=sum(len(v) for v in state.small.values()),
            small_file_inserts_planned=sum(b.records for b in state.write_plan.insert_buckets if b.small_file),
            write_targets=len(state.write_plan.targets), bytes_read=sum(s.prev_size for s in files),
            incoming_bytes=incoming, write_amplification=round(size / incoming, 2) if incoming else None,
            schema_changes=state.schema_changes)
        return run.report(
            instant, files, rows_in=rows_in, rows_written=sum(s.num_writes for s in files),
            rows_inserted=sum(s.num_inserts for s in files), rows_updated=sum(s.num_update_writes for s in files),
            rows_deleted=sum(s.num_deletes for s in files), rows_deduplicated=deduplicated,
            funnel=_funnel(state, files), details=details)


def update_partition_path(index_type: IndexType, options: WriteOptions) -> bool:
    """Whether a global index moves a record whose partition changed (Hudi's option of that index)."""
    if index_type is IndexType.GLOBAL_BLOOM:
        return options.bloom_update_partition_path
    if index_type is IndexType.RECORD_INDEX:
        return options.record_index_update_partition_path
    return options.simple_update_partition_path


def _funnel(state: UpsertState, written: Sequence[BaseFileStat]) -> TagFunnel:
    """The tag funnel as the index observed it; `matched` from what really held a key where the index
    could not count it (SIMPLE's join, BUCKET's hash)."""
    assert state.tag is not None and state.profile is not None  # step 3 ran
    funnel = state.tag.funnel
    if state.index_type.lookup is IndexType.SIMPLE or state.index_type is IndexType.RECORD_INDEX:
        return replace(funnel, matched=len(state.profile.updated_file_groups()))
    if state.index_type is IndexType.BUCKET:
        return replace(funnel, matched=sum(1 for s in written if not s.created and (s.num_update_writes or s.num_deletes)))
    return funnel
