"""Snapshot queries with data skipping: partition pruning, column stats, bloom filters, then Spark's scan."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any, Mapping

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.index.footers import bloom_filter, footer_column_stats, key_ranges
from labformat.metadata import MetadataReader
from labformat.model.column_stats import ColumnStats
from labformat.read.catalyst import to_predicate
from labformat.read.data_skipping import ROWS_CANNOT_MATCH, might_match
from labformat.read.predicates import key_equality_values
from labformat.schema import with_meta_columns

if TYPE_CHECKING:
    from labformat.table import Table


@dataclass(frozen=True)
class ScanReport:
    """What a query did: the skipping funnel (file counts), where stats came from, rows and time."""

    condition: str
    instant: str | None
    funnel: Mapping[str, int]
    stats_source: str
    bloom_source: str
    files_read: tuple[str, ...]
    rows_returned: int
    bytes_scanned: int
    planning_seconds: float
    execution_seconds: float
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame([{"stage": k, "files": v} for k, v in self.funnel.items()])

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("funnel", "files_read", "details")}
        out.update(self.funnel)
        return out


def _partition_value(table: "Table", partition_path: str, dtype: T.DataType):
    raw = partition_path.split("=", 1)[1] if table.hive_style_partitioning and "=" in partition_path else partition_path
    if raw == "default":
        return None
    if isinstance(dtype, (T.IntegerType, T.LongType, T.ShortType, T.ByteType)):
        return int(raw)
    if isinstance(dtype, T.DateType):
        return date.fromisoformat(raw)
    return raw


def run_query(table: "Table", condition: Column | str, as_of: str | None, skipping: bool) -> tuple[DataFrame, ScanReport]:
    started = time.perf_counter()
    view = table.file_system_view(as_of)
    instant = as_of or (view_latest := table.active_timeline.latest_completed_write()) and view_latest.time
    slices = view.latest_file_slices()
    schema = table.schema(as_of) or T.StructType([])
    predicate = to_predicate(table.spark, condition, schema)
    funnel = {"files_in_snapshot": len(slices)}
    stats_source = bloom_source = "off (data skipping disabled)"
    remaining = slices
    if skipping:
        # 1. partition pruning: a file's partition value is its min and max for the partition column
        if table.partition_field:
            dtype = {f.name: f.dataType for f in schema.fields}.get(table.partition_field, T.StringType())
            kept = []
            for s in remaining:
                value = _partition_value(table, s.partition_path, dtype)
                stats = {table.partition_field: ColumnStats(value, value, 0 if value is not None else 1, 1, 0)}
                if might_match(predicate, stats) is not ROWS_CANNOT_MATCH:
                    kept.append(s)
            remaining = kept
        funnel["after_partition_pruning"] = len(remaining)
        # 2. column stats: the metadata table's, or the footers' when it cannot be trusted
        stats, stats_source = (None, "no metadata table")
        if table.column_stats_enabled:
            stats, stats_source = MetadataReader(table.storage, table.active_timeline, as_of).column_stats(slices, schema)
        if stats is None:
            stats_source = f"footers ({stats_source})"
            stats = footer_column_stats(table.storage.base_uri, [s.path for s in remaining])
        remaining = [s for s in remaining if might_match(predicate, stats.get(s.path, {})) is not ROWS_CANNOT_MATCH]
        funnel["after_column_stats"] = len(remaining)
        # 3. bloom filters, for record-key equality and IN
        keys = key_equality_values(predicate, table.record_key)
        bloom_source = "not used (no record-key equality in the condition)"
        if keys is not None and remaining:
            probe = [str(k) for k in keys]
            blooms, bloom_source = (None, "not in the metadata table")
            if table.bloom_filters_in_metadata:
                blooms, bloom_source = MetadataReader(table.storage, table.active_timeline, as_of).bloom_filters(
                    [s.path for s in remaining])
            if blooms is None:
                bloom_source = f"footers ({bloom_source})"
                blooms = {s.path: bloom_filter(table.storage.base_uri, s.path) for s in remaining}
            # An empty key set means the condition is never true: no file can hold a match.
            remaining = [s for s in remaining if probe and blooms[s.path].might_contain(probe).any()]
        funnel["after_bloom"] = len(remaining)
    else:
        funnel.update(after_partition_pruning=len(slices), after_column_stats=len(slices), after_bloom=len(slices))
    funnel["files_read"] = len(remaining)
    planning = time.perf_counter() - started

    full_schema = with_meta_columns(schema)
    paths = [table.storage.uri(s.path) for s in remaining]
    source = (table.spark.read.schema(full_schema).parquet(*paths) if paths
              else table.spark.createDataFrame([], full_schema))
    df = source.filter(condition)
    # Run the scan once, every column, counting rows as they pass (no data reaches the driver).
    observation = Observation("labformat_scan")
    started = time.perf_counter()
    df.observe(observation, F.count(F.lit(1)).alias("rows")).write.format("noop").mode("overwrite").save()
    execution = time.perf_counter() - started
    report = ScanReport(
        condition=condition if isinstance(condition, str) else str(condition),
        instant=instant or None, funnel=funnel, stats_source=stats_source, bloom_source=bloom_source,
        files_read=tuple(s.path for s in remaining), rows_returned=int(observation.get["rows"]),
        bytes_scanned=sum(s.size_bytes for s in remaining), planning_seconds=planning,
        execution_seconds=execution,
        details={
            "predicate": str(predicate),
            # Spark's parquet reader skips row groups inside these files by their statistics, but
            # does not report per query how many it skipped; this is how many there were to read.
            "row_groups_in_files_read": sum(f.num_row_groups for f in
                                            key_ranges(table.storage.base_uri, [s.path for s in remaining]).values()),
        },
    )
    return df, report
