"""The Table: create/open a copy-on-write table, write to it through the commit protocol, read snapshots."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat import config as C
from labformat import properties as P
from labformat.errors import (
    CorruptTableError,
    InvalidInputError,
    TableExistsError,
    TableNotFoundError,
)
from labformat.fs_view import FileSystemView
from labformat.model.commit import SPARK_SCHEMA_KEY, CommitMetadata
from labformat.model.enums import IndexType, Operation
from labformat.model.file_group import FileSlice
from labformat.model.instant import Instant
from labformat.model.report import WriteReport
from labformat.schema import check_compatible, data_schema_of, with_meta_columns
from labformat.storage import Storage
from labformat.timeline import TIMELINE_DIR, Timeline
from labformat.write import bulk_insert as _bulk_insert
from labformat.write import upsert as _upsert


class Table:
    """A labformat (Apache Hudi v6 copy-on-write) table at `path`.

    Writes follow the commit protocol: requested -> inflight -> base files written ->
    completed commit published atomically. A writer that dies leaves the table readable at
    its last completed commit; the next writer rolls the unfinished instant back.
    """

    def __init__(self, spark: SparkSession, storage: Storage, props: dict[str, str]):
        self.spark = spark
        self.storage = storage
        self.properties = props
        self._timeline = Timeline(storage)

    # ---- create / open ------------------------------------------------------------------

    @classmethod
    def create(cls, spark: SparkSession, path: str | os.PathLike, record_key: str = "record_key",
               precombine_field: str = "updated_at", partition_field: str | None = None,
               options: Mapping[str, Any] | None = None) -> "Table":
        """Create an empty table: writes `.hoodie/hoodie.properties`. Fails if one exists."""
        storage = Storage(path)
        for label, name in (("record_key", record_key), ("precombine_field", precombine_field)):
            if not isinstance(name, str) or not name.strip():
                raise InvalidInputError(f"{label} must be a column name, got {name!r}")
        if partition_field is not None and (not isinstance(partition_field, str) or not partition_field.strip()):
            raise InvalidInputError(f"partition_field must be a column name or None, got {partition_field!r}")
        if storage.exists(P.PROPERTIES_PATH):
            raise TableExistsError(f"{storage.base_uri} already holds a table; use Table.open")
        cfg = C.resolve(options, [C.Scope.TABLE])
        name = cfg.table_name or os.path.basename(storage.root.rstrip("/")) or "labformat_table"
        props = {
            P.TABLE_NAME: name,
            P.TABLE_TYPE: "COPY_ON_WRITE",
            P.TABLE_VERSION: "6",
            P.TIMELINE_LAYOUT_VERSION: "1",
            P.RECORD_KEY_FIELDS: record_key,
            P.PRECOMBINE_FIELD: precombine_field,
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.populate.meta.fields": "true",
            "hoodie.archivelog.folder": "archived",
            P.HIVE_STYLE: str(cfg.hive_style_partitioning).lower(),
            "hoodie.table.keygenerator.class": (
                "org.apache.hudi.keygen.SimpleKeyGenerator" if partition_field
                else "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
            ),
        }
        if partition_field:
            props[P.PARTITION_FIELDS] = partition_field
        props["hoodie.index.type"] = cfg.index_type
        props["hoodie.metadata.enable"] = str(cfg.metadata_enable).lower()
        props["hoodie.metadata.index.column.stats.enable"] = str(cfg.metadata_enable and cfg.column_stats_enable).lower()
        props["hoodie.metadata.index.bloom.filter.enable"] = str(cfg.metadata_enable and cfg.bloom_filter_enable).lower()
        if cfg.column_stats_columns:
            props["hoodie.metadata.index.column.stats.column.list"] = cfg.column_stats_columns
        if cfg.index_type == IndexType.BUCKET:
            props["hoodie.bucket.index.num.buckets"] = str(cfg.bucket_num)
        storage.makedirs(TIMELINE_DIR)
        storage.publish(P.PROPERTIES_PATH, P.format_properties(props).encode("utf-8"))
        return cls(spark, storage, props)

    @classmethod
    def open(cls, spark: SparkSession, path: str | os.PathLike) -> "Table":
        storage = Storage(path)
        if not storage.exists(P.PROPERTIES_PATH):
            raise TableNotFoundError(f"{storage.base_uri} is not a table: no {P.PROPERTIES_PATH}")
        try:
            text = storage.read_text(P.PROPERTIES_PATH)
        except UnicodeDecodeError as exc:
            raise CorruptTableError(f"{P.PROPERTIES_PATH} is not text: {exc}") from None
        return cls(spark, storage, P.parse_properties(text))

    # ---- identity -----------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self.storage.base_uri

    @property
    def name(self) -> str:
        return self.properties[P.TABLE_NAME]

    @property
    def record_key(self) -> str:
        return self.properties[P.RECORD_KEY_FIELDS]

    @property
    def precombine_field(self) -> str:
        return self.properties[P.PRECOMBINE_FIELD]

    @property
    def partition_field(self) -> str | None:
        return self.properties.get(P.PARTITION_FIELDS) or None

    @property
    def index_type(self) -> str:
        return self.properties.get("hoodie.index.type", IndexType.BLOOM.value)

    @property
    def bucket_num(self) -> int:
        return int(self.properties.get("hoodie.bucket.index.num.buckets", "4"))

    def _flag(self, key: str) -> bool:
        return self.properties.get(key, "false") == "true"

    @property
    def metadata_enabled(self) -> bool:
        return self._flag("hoodie.metadata.enable")

    @property
    def column_stats_enabled(self) -> bool:
        return self._flag("hoodie.metadata.index.column.stats.enable")

    @property
    def column_stats_columns(self) -> tuple[str, ...] | None:
        raw = self.properties.get("hoodie.metadata.index.column.stats.column.list", "")
        return tuple(c for c in raw.split(",") if c) or None

    @property
    def bloom_filters_in_metadata(self) -> bool:
        return self._flag("hoodie.metadata.index.bloom.filter.enable")

    @property
    def hive_style_partitioning(self) -> bool:
        return self.properties.get(P.HIVE_STYLE, "false") == "true"

    def __repr__(self) -> str:
        return f"Table({self.path!r}, record_key={self.record_key!r}, partition_field={self.partition_field!r})"

    # ---- timeline and views ---------------------------------------------------------------

    @property
    def active_timeline(self) -> Timeline:
        """The timeline as last loaded (Hudi's active timeline); write and index code reads it here."""
        return self._timeline

    def reload_active_timeline(self) -> Timeline:
        """Re-read `.hoodie/` and return the timeline (Hudi's `reloadActiveTimeline`)."""
        return self._timeline.reload()

    def timeline(self) -> list[Instant]:
        """Completed instants (commits, replacecommits, rollbacks), oldest first."""
        return [i for i in self._timeline.reload().instants if i.is_completed]

    def file_system_view(self, as_of: str | None = None) -> FileSystemView:
        timeline = self._timeline.reload()
        if as_of is not None:
            timeline.resolve_as_of(as_of)
        return FileSystemView(timeline, as_of)

    def file_slices(self, as_of: str | None = None) -> list[FileSlice]:
        """The latest file slice of every file group (the files a snapshot reads)."""
        return self.file_system_view(as_of).latest_file_slices()

    def commit_metadata(self, instant: Instant | str) -> CommitMetadata:
        timeline = self._timeline.reload()
        if isinstance(instant, str):
            matches = [i for i in timeline.completed_writes() if i.time == instant]
            if not matches:
                timeline.resolve_as_of(instant)  # raises with the reason
            instant = matches[0]
        return timeline.commit_metadata(instant)

    def schema(self, as_of: str | None = None) -> T.StructType | None:
        """The data columns' Spark schema as of a commit (latest by default); None before any write."""
        writes = self._timeline.reload().completed_writes(as_of)
        for instant in reversed(writes):
            raw = self._timeline.commit_metadata(instant).extra_metadata.get(SPARK_SCHEMA_KEY)
            if raw:
                try:
                    return T.StructType.fromJson(json.loads(raw))
                except (ValueError, KeyError, TypeError) as exc:
                    raise CorruptTableError(f"commit {instant.time}: unreadable schema ({exc})") from None
        return None

    # ---- reads ----------------------------------------------------------------------------

    def read(self, as_of: str | None = None) -> DataFrame:
        """The snapshot as of the latest completed commit (or `as_of`), as a Spark DataFrame.

        Only the latest file slice of each file group is read; files of failed or
        unfinished instants are never in the list.
        """
        view = self.file_system_view(as_of)
        data_schema = self.schema(as_of) or T.StructType([])
        schema = with_meta_columns(data_schema)
        paths = [self.storage.uri(s.path) for s in view.latest_file_slices()]
        if not paths:
            return self.spark.createDataFrame([], schema)
        return self.spark.read.schema(schema).parquet(*paths)

    # ---- writes ---------------------------------------------------------------------------

    def partition_path_column(self) -> Column:
        """Each row's partition path, computed in Spark ('' for a non-partitioned table)."""
        field = self.partition_field
        if not field:
            return F.lit("")
        value = F.coalesce(F.col(field).cast("string"), F.lit("default"))
        return F.concat(F.lit(f"{field}="), value) if self.hive_style_partitioning else value

    def schema_for_write(self, df: DataFrame) -> T.StructType:
        """The data schema a write of `df` will have: the table's, if it has one (checked), else df's."""
        incoming = data_schema_of(df.schema)
        current = self.schema()
        if current is None:
            return incoming
        check_compatible(current, incoming)
        return current

    def validate_input(self, df: DataFrame, need_precombine: bool, keys_only: bool = False) -> None:
        """A write's input checks that need no pass over the data (columns, schema); InvalidInputError
        says what is wrong. Record keys are checked by the write tasks."""
        columns = set(df.columns)
        needed = [self.record_key] + ([self.precombine_field] if need_precombine else []) + (
            [self.partition_field] if self.partition_field else [])
        missing = [c for c in needed if c not in columns]
        if missing:
            raise InvalidInputError(f"input lacks column(s) {missing}; the table needs {needed}")
        if not keys_only:
            self.schema_for_write(df)

    def bulk_insert(self, df: DataFrame, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Write `df` as new file groups, without index lookups or deduplication (Hudi's bulk_insert).

        Options: `bulk_insert_sort_mode`, `bulk_insert_parallelism`, `max_file_size`,
        `compression_codec`, `bloom_fpp` (or their `hoodie.*` keys); see docs/options.md.
        An empty input commits nothing (the report's instant is None).
        """
        return _bulk_insert.run(self, df, C.resolve(options, [C.Scope.WRITE]))

    def upsert(self, df: DataFrame, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Insert new records and update existing ones, Hudi's seven steps (see labformat.write.upsert).

        The batch is deduplicated by record key first: the row with the highest precombine
        value wins. An empty batch commits nothing (the report's instant is None).
        """
        return _upsert.run(self, df, C.resolve(options, [C.Scope.WRITE]), Operation.UPSERT.value)

    def delete(self, keys_df: DataFrame, options: Mapping[str, Any] | None = None) -> WriteReport:
        """Delete the records whose keys (and partition field, if any) `keys_df` holds.

        Keys the table does not hold are ignored (reported as zero deletes); a delete that
        matches nothing commits nothing.
        """
        return _upsert.run(self, keys_df, C.resolve(options, [C.Scope.WRITE]), Operation.DELETE.value)

    def query(self, condition, as_of: str | None = None, options: Mapping[str, Any] | None = None):
        """Rows matching `condition` (a Spark Column or SQL string) and a ScanReport of how they were found.

        With data skipping on (`hoodie.enable.data.skipping`, default true) whole base files are
        skipped by partition value, column stats and, for record-key lookups, bloom filters;
        the condition still goes to Spark's parquet reader, which skips row groups inside files.
        """
        from labformat.read.query import run_query

        cfg = C.resolve(options, [C.Scope.READ])
        return run_query(self, condition, as_of, cfg.data_skipping)

    def scan(self, condition, as_of: str | None = None, options: Mapping[str, Any] | None = None):
        """The scan plan of `query(condition, as_of, options)`, without running it (a `ScanPlan`).

        `plan.to_dataframe()` gives the rows lazily, with no scan to measure first; `plan.funnel`
        and `plan.stages` say which file slices each pruning stage kept and from which source;
        `plan.measure()` runs the scan once and returns the ScanReport that `query` returns.
        """
        from labformat.read.query import plan_scan

        cfg = C.resolve(options, [C.Scope.READ])
        return plan_scan(self, condition, as_of, cfg.data_skipping)

    def rebuild_metadata(self):
        """Recompute the metadata table for the latest commit from the base files (see labformat.metadata)."""
        from labformat.metadata import rebuild_metadata

        return rebuild_metadata(self)
