"""The Table: create/open a copy-on-write or merge-on-read table, write to it through the commit protocol, read snapshots."""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import types as T

from labformat import config as C
from labformat import properties as P
from labformat.context import TableConfig, TableContext, read_table_properties
from labformat.errors import (
    ConfigError,
    InvalidInputError,
    LabformatError,
    TableExistsError,
    storage_error,
)
from labformat.fs_view import FileSystemView, check_base_files
from labformat.model.commit import CommitMetadata
from labformat.model.enums import IndexType, Operation, QueryType, TableType
from labformat.model.file_group import FileSlice
from labformat.model.instant import Instant
from labformat.model.report import WriteReport
from labformat.read.bucket_join import bucket_join
from labformat.read.incremental import IncrementalPlan, plan_incremental
from labformat.read.merge_on_read import read_file_slices
from labformat.read.query import ScanPlan, ScanReport, plan_scan
from labformat.storage import Storage
from labformat.timeline import TIMELINE_DIR, Timeline
from labformat.write.bulk_insert import BulkInsert
from labformat.write.clean import clean
from labformat.write.clustering import Clustering
from labformat.write.compaction import Compaction, inline_settings
from labformat.write.metadata_rebuild import MetadataRebuild
from labformat.write.operation import execute
from labformat.write.upsert import Upsert
from labformat.fileformat.footers import FooterCache


class Table:
    """A labformat (Apache Hudi v6 copy-on-write or merge-on-read) table at `path`.

    Writes follow the commit protocol: requested -> inflight -> base files written ->
    completed commit published atomically. A writer that dies leaves the table readable at
    its last completed commit; the next writer rolls the unfinished instant back once the dead
    writer's heartbeat has expired. Writers in other processes are safe too: a lock around each
    instant's start and commit, and a conflict check by file group at commit
    (`hoodie.write.concurrency.mode`; see docs/architecture.md, "Concurrent writers").

    A thin facade: each call takes a fresh `TableContext` (the timeline as of that call) and
    hands it to `labformat.write` or `labformat.read`.
    """

    def __init__(self, spark: SparkSession, storage: Storage, props: dict[str, str]):
        self.spark = spark
        self.storage = storage
        self.properties = props  # as stored, including keys labformat does not interpret
        self.config = TableConfig.from_properties(props)
        self._metadata_cache: dict[str, Any] = {}  # shared by every timeline this table loads
        self._footers = FooterCache.of_table(storage)  # shared by every context: a base file's footer is read once

    # ---- create / open ------------------------------------------------------------------

    @classmethod
    def create(cls, spark: SparkSession, path: str | os.PathLike[str], record_key: str = "record_key",
               precombine_field: str = "updated_at", partition_field: str | None = None,
               options: Mapping[str, Any] | None = None, table_type: TableType | str | None = None,
               storage_options: Mapping[str, str] | None = None) -> "Table":
        """Create an empty table: writes `.hoodie/hoodie.properties`. Fails if one exists.

        `table_type`: "COPY_ON_WRITE" (the default) or "MERGE_ON_READ"; the same as the
        `table_type` option (`hoodie.table.type`). `path` is a local folder or `s3://bucket/prefix`;
        `storage_options` hold an S3 table's credentials and endpoint (`labformat.storage`).
        """
        storage = Storage(path, storage_options)
        if table_type is not None:
            given = C.table_options(options)  # ConfigError naming what `options` is, when no mapping
            typed = C.option("table_type").coerce(table_type, "table_type")
            if "table_type" in given.explicit and given.table_type is not typed:
                raise ConfigError(f"table_type={table_type!r} and the option table_type / hoodie.table.type="
                                  f"{given.table_type.value!r} disagree; give the table type once")
            options = {k: v for k, v in (options or {}).items()
                       if C.option(k).name != "table_type"} | {"table_type": typed}
        for label, name in (("record_key", record_key), ("precombine_field", precombine_field)):
            if not isinstance(name, str) or not name.strip():
                raise InvalidInputError(f"{label} must be a column name, got {name!r}")
        if partition_field is not None and (not isinstance(partition_field, str) or not partition_field.strip()):
            raise InvalidInputError(f"partition_field must be a column name or None, got {partition_field!r}")
        cfg = C.table_options(options)
        name = cfg.table_name or os.path.basename(storage.root.rstrip("/")) or "labformat_table"
        props = TableConfig.new(cfg, name, record_key, precombine_field, partition_field).to_properties()
        text = P.format_properties(props).encode("utf-8")
        exists = TableExistsError(f"{storage.base_uri} already holds a table, or another writer is creating one "
                                  "there; use Table.open")
        try:
            if storage.exists(P.PROPERTIES_PATH) or storage.exists(P.BACKUP_PATH):
                raise exists
            _check_new_table_folder(storage, exists)
            storage.makedirs(TIMELINE_DIR)
            # The backup first: a table always has one good copy of its properties from here on. Its
            # exclusive create (a hard link, or If-None-Match: * on S3) is what makes one of two
            # creators at once the winner; the loser builds no Table.
            if not storage.create_exclusive(P.BACKUP_PATH, text):
                raise exists
            if not storage.create_exclusive(P.PROPERTIES_PATH, text):
                # A writer that creates hoodie.properties without the backup first (not labformat)
                # won after all: our backup would hold another config than the table's.
                storage.delete(P.BACKUP_PATH)
                raise exists
        except LabformatError:
            raise
        except OSError as exc:  # a dead endpoint or refused credentials, as much as a full disk
            raise storage_error(exc, f"creating the table at {storage.base_uri}") from None
        return cls(spark, storage, P.parse_properties(text.decode("utf-8")))

    @classmethod
    def open(cls, spark: SparkSession, path: str | os.PathLike[str],
             storage_options: Mapping[str, str] | None = None) -> "Table":
        storage = Storage(path, storage_options)
        return cls(spark, storage, read_table_properties(storage))

    def context(self) -> TableContext:
        """This table as of now: its config and a timeline loaded from `.hoodie/` for this call. The
        storage refusing (credentials that expired since the table was opened, an endpoint gone) is a
        StorageError naming the table, raised before any operation starts."""
        try:
            ctx = TableContext(self.spark, self.storage, self.config, Timeline(self.storage, self._metadata_cache),
                               tuple(self.properties.items()), self._footers)
            ctx.check_same_table()
        except LabformatError:
            raise
        except OSError as exc:
            raise storage_error(exc, f"reading the timeline of {self.storage.base_uri}") from None
        return ctx

    # ---- identity -----------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self.storage.base_uri

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def record_key(self) -> str:
        return self.config.record_key

    @property
    def precombine_field(self) -> str:
        return self.config.precombine_field

    @property
    def partition_field(self) -> str | None:
        return self.config.partition_field

    @property
    def index_type(self) -> IndexType:
        return self.config.index_type

    @property
    def table_type(self) -> TableType:
        """COPY_ON_WRITE or MERGE_ON_READ (`hoodie.table.type`)."""
        return self.config.table_type

    def __repr__(self) -> str:
        return f"Table({self.path!r}, record_key={self.record_key!r}, partition_field={self.partition_field!r})"

    # ---- timeline and views ---------------------------------------------------------------

    @property
    def active_timeline(self) -> Timeline:
        """The timeline as of now (Hudi's active timeline), loaded from `.hoodie/` on each access."""
        return self.context().timeline

    @property
    def footers(self) -> FooterCache:
        """This table's footer cache: key ranges, row counts and column stats of its base files, each read once."""
        return self._footers

    def timeline(self) -> list[Instant]:
        """Completed instants (commits, replacecommits, rollbacks), oldest first."""
        return [i for i in self.active_timeline.instants if i.is_completed]

    def file_system_view(self, as_of: str | None = None) -> FileSystemView:
        ctx = self.context()
        return ctx.file_system_view(ctx.at(as_of))

    def file_slices(self, as_of: str | None = None) -> list[FileSlice]:
        """The latest file slice of every file group (the files a snapshot reads)."""
        return self.file_system_view(as_of).latest_file_slices()

    def commit_metadata(self, instant: Instant | str) -> CommitMetadata:
        timeline = self.active_timeline
        if isinstance(instant, str):
            matches = [i for i in timeline.completed_writes() if i.time == instant]
            if not matches:
                timeline.resolve_as_of(instant)  # raises with the reason
            instant = matches[0]
        return timeline.commit_metadata(instant)

    def schema(self, as_of: str | None = None) -> T.StructType | None:
        """The data columns' Spark schema as of a commit (latest by default); None before any write."""
        ctx = self.context()
        return ctx.schema(ctx.at(as_of))

    # ---- reads ----------------------------------------------------------------------------

    def read(self, as_of: str | None = None, options: Mapping[str, Any] | None = None) -> DataFrame:
        """The snapshot as of the latest completed commit (or `as_of`), as a Spark DataFrame.

        Only the latest file slice of each file group is read; files of failed or
        unfinished instants are never in the list. On a merge-on-read table each slice's base
        file is merged with its log files in Spark tasks (`labformat.read.merge_on_read`);
        `options={"query_type": "READ_OPTIMIZED"}` reads the base files only.

        Lazy: the tasks run in the caller's action, whose failure is Spark's exception (a damaged file's
        CorruptTableError only in its text); run the action inside `with labformat.task_errors():` to
        get the LabformatError.
        """
        read_options = C.read_options(options)
        if read_options.query_type is QueryType.INCREMENTAL:
            return self.incremental_plan(read_options.begin_instant, read_options.end_instant, options).to_dataframe(
                read_options.incremental_format)
        ctx = self.context()
        at = ctx.at(as_of)
        slices = ctx.file_system_view(at).latest_file_slices()
        read_optimized = read_options.query_type is QueryType.READ_OPTIMIZED
        if read_optimized:
            slices = [s.base_only() for s in slices]
        check_base_files(self.storage, slices)  # a missing or truncated file: CorruptTableError naming it
        return read_file_slices(self.spark, self.storage, slices, ctx.schema(at) or T.StructType([]),
                                self.precombine_field, ctx.config.merge_mode)

    def query(self, condition: Column | str, as_of: str | None = None,
              options: Mapping[str, Any] | None = None) -> tuple[DataFrame, ScanReport]:
        """Rows matching `condition` (a Spark Column or SQL string) and a ScanReport of how they were found.

        With data skipping on (`hoodie.enable.data.skipping`, default true) whole base files are
        skipped by partition value, column stats and, for record-key lookups, bloom filters;
        the tasks reading the files kept skip row groups by their statistics, and Spark filters the rows.
        """
        plan = self.scan(condition, as_of, options)
        return plan.to_dataframe(), plan.measure()

    def changes(self, since: str, until: str | None = None, options: Mapping[str, Any] | None = None) -> DataFrame:
        """The latest version of every record written by a commit after instant `since` up to `until`
        (inclusive; the latest completed write by default): Hudi's incremental query, meta columns
        first. A downstream job keeps the last instant it consumed (`incremental_plan(...).end`) and
        passes it as `since` next time; while a write that started before that end is still in flight
        the read fails (TimelineHoleError) unless `holes_policy` says BLOCK or USE_TRANSITION_TIME
        (`hoodie.read.timeline.holes.resolution.policy`). Deletes are not in it; with `options={"incremental_format": "cdc"}`
        on a table created with `cdc_enabled`, every change instead: op (i, u, d), ts_ms, before and after
        (JSON), record key and partition path (change data capture). Lazy, as `read` is: act on it
        inside `labformat.task_errors()` to get a task's error as a LabformatError."""
        return self.incremental_plan(since, until, options).to_dataframe(C.read_options(options).incremental_format)

    def incremental_plan(self, since: str | None, until: str | None = None,
                         options: Mapping[str, Any] | None = None) -> IncrementalPlan:
        """The plan of `changes(since, until)` without reading: its commits, the file slices it opens
        (`files_read`, against `files_in_snapshot`), its `end`, and `fallback` when it scans the whole table."""
        read_options = C.read_options(options)
        return plan_incremental(self.context(), since, until, read_options.incr_fallback_full_scan,
                                read_options.holes_policy)

    def join_by_bucket(self, other: "Table", how: str = "inner", as_of: str | None = None,
                       other_as_of: str | None = None) -> DataFrame:
        """This BUCKET table joined with `other` (same bucket count and hash fields) on the hash fields,
        one bucket pair per Spark task: no shuffle (seed 003's bucket join; `read/bucket_join.py`).
        Data columns only; `other`'s clashing columns end in `_right`. ConfigError when the two
        tables are not bucketed alike."""
        mine, theirs = self.context(), other.context()
        return bucket_join(mine, theirs, how, mine.at(as_of), theirs.at(other_as_of))

    def scan(self, condition: Column | str, as_of: str | None = None, options: Mapping[str, Any] | None = None) -> ScanPlan:
        """The scan plan of `query(condition, as_of, options)`, without running it.

        `plan.to_dataframe()` gives the rows lazily, with no scan to measure first; `plan.funnel`
        and `plan.stages` say which file slices each pruning stage kept and from which source;
        `plan.measure()` runs the scan once and returns the ScanReport that `query` returns.
        """
        ctx = self.context()
        return plan_scan(ctx, condition, ctx.at(as_of), C.read_options(options))

    # ---- writes ---------------------------------------------------------------------------

    def bulk_insert(self, df: DataFrame, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Write `df` as new file groups, without index lookups or deduplication (Hudi's bulk_insert).

        Options: `bulk_insert_sort_mode`, `bulk_insert_parallelism`, `max_file_size`,
        `compression_codec`, `bloom_fpp` (or their `hoodie.*` keys); see docs/options.md.
        An empty input commits nothing (the report's instant is None).
        """
        _require_spark_dataframe(df, "bulk_insert")
        write_options, ctx = C.write_options(options), self.context()
        inline_settings(ctx.config, write_options)  # refuses hoodie.compact.inline on copy-on-write
        # A BUCKET table's rows are routed to their buckets' file groups, as an upsert routes them.
        operation = (Upsert(df, Operation.BULK_INSERT) if ctx.config.index_type is IndexType.BUCKET
                     else BulkInsert(df))
        return execute(operation, ctx, write_options)

    def upsert(self, df: DataFrame, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Insert new records and update existing ones, Hudi's seven steps (see labformat.write.upsert).

        The batch is deduplicated by record key first: the row with the highest precombine
        value wins. An empty batch commits nothing (the report's instant is None). On a
        merge-on-read table with `hoodie.compact.inline`, the compaction that may follow the commit
        is in `report.compaction`.
        """
        _require_spark_dataframe(df, "upsert")
        return self._upsert_or_delete(df, options, Operation.UPSERT)

    def delete(self, keys_df: DataFrame, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Delete the records whose keys (and partition field, if any) `keys_df` holds.

        Keys the table does not hold are ignored (reported as zero deletes); a delete that
        matches nothing commits nothing.
        """
        _require_spark_dataframe(keys_df, "delete")
        return self._upsert_or_delete(keys_df, options, Operation.DELETE)

    def _upsert_or_delete(self, df: DataFrame, options: Mapping[str, Any] | None, operation: Operation) -> WriteReport:
        """An upsert or a delete; its transaction runs the inline compaction that may be due after it."""
        write_options, ctx = C.write_options(options), self.context()
        inline_settings(ctx.config, write_options)  # a refusal comes before anything is written
        return execute(Upsert(df, operation), ctx, write_options)

    def compact(self, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Merge-on-read: merge every file slice that has log files into a new base file (Hudi's
        compaction: `<instant>.compaction.requested` holds the plan, `<instant>.commit` completes it).

        The report's details give the strategy, the plan (file slices, their log files and bytes) and
        the bytes read; its files are the new base files. No slice with logs: instant None.
        """
        return execute(Compaction(), self.context(), C.write_options(options))

    def cluster(self, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Rewrite small base files into fewer, bigger ones sorted by chosen columns (Hudi's clustering:
        `<instant>.replacecommit.requested` holds the plan, `<instant>.replacecommit` names the file
        groups it replaced). Options: `clustering_small_file_limit`, `clustering_target_file_max_bytes`,
        `clustering_sort_columns`, `clustering_partitions`, ... (docs/options.md). The report's details
        give files and bytes in and out; its files are the new base files. Nothing to cluster: instant None.
        On a CONSISTENT_HASHING bucket table it resizes instead: each bucket past `bucket_split_threshold`
        times `max_file_size` is split in two, up to `bucket_max_num` per partition (`write/clustering.py`).
        """
        return execute(Clustering(), self.context(), C.write_options(options))

    def clean(self, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Delete the file slices no retained instant needs (Hudi's clean: `cleaner_policy`,
        `cleaner_commits_retained`, `cleaner_fileversions_retained`). The report's details give files
        deleted and bytes freed; time travel to a write older than the one just before the retained
        commits then raises CleanedInstantError.
        Nothing to delete: instant None.
        """
        return clean(self.context(), C.write_options(options))

    def rebuild_metadata(self, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Recompute the metadata table for the latest commit from the base files (Hudi's INDEX operation;
        see labformat/write/metadata_rebuild.py); the report's details say how many files and of which
        instant."""
        return execute(MetadataRebuild(), self.context(), C.write_options(options))


# What another writer creating a table in the same folder may have written so far: the properties,
# their backup, and the temp files their exclusive create links from (`Storage._temp_beside`).
_CREATING = re.compile(r"\.hoodie/(hoodie\.properties(\.backup)?|\.hoodie\.properties(\.backup)?\.[0-9a-f]{32}\.tmp)")


def _check_new_table_folder(storage: Storage, exists: TableExistsError) -> None:
    """InvalidInputError unless `storage`'s root can become a new table's folder: absent or an empty
    folder, and not inside another table. Hudi's readers take every `.parquet` under a table for a
    base file, and a table inside another's folder would sit in one of its partitions. `exists` when
    the folder holds only what a table's creation writes: another creator got there first."""
    if storage.is_file(""):
        raise InvalidInputError(f"{storage.base_uri} is a file, not a folder; a table needs a folder")
    found = storage.list("", recursive=True)
    if found and all(_CREATING.fullmatch(f.path) for f in found):
        if any(f.path in (P.PROPERTIES_PATH, P.BACKUP_PATH) for f in found):
            raise exists
        # Temp files only: a creator is linking them into place now, or was killed before it could.
        leftovers = ", ".join(sorted(f.path for f in found))
        raise TableExistsError(f"{exists}. If no creator is running there, one was killed before publishing "
                               f"the table's properties: delete {leftovers} and create again")
    if found and (storage.exists(P.PROPERTIES_PATH) or storage.exists(P.BACKUP_PATH)):
        raise exists  # a creator that won meanwhile has begun writing its table's first files
    if found:
        example = ", ".join(sorted(f.path for f in found)[:3])
        raise InvalidInputError(f"{storage.base_uri} already holds {len(found)} file(s) ({example}"
                                f"{', ...' if len(found) > 3 else ''}); a new table needs an empty or absent folder")
    # A table whose creator was killed between its two files holds only the backup; Table.open reads it.
    outer = storage.enclosing(P.PROPERTIES_PATH) or storage.enclosing(P.BACKUP_PATH)
    if outer is not None:
        raise InvalidInputError(f"{storage.base_uri} is inside the table at {outer}; a table cannot be created "
                                "inside another table's folder")


def _require_spark_dataframe(df: Any, operation: str) -> None:
    """InvalidInputError unless `df` is a Spark DataFrame (the write tasks run in Spark)."""
    if not isinstance(df, DataFrame):
        hint = " (convert it with spark.createDataFrame(pdf))" if type(df).__module__.startswith("pandas") else ""
        raise InvalidInputError(f"{operation} needs a Spark DataFrame, got {type(df).__name__}{hint}")
