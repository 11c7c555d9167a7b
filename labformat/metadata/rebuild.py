"""Rebuild the metadata table from the base files, when it is missing, stale or corrupt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from labformat import config as C
from labformat.errors import ConcurrentWriteError
from labformat.fileformat.column_stats import ColumnStatsCollector
from labformat.fileformat.footers import KeyFooter
from labformat.fileformat.parquet_io import unreadable
from labformat.lock import TableLock
from labformat.metadata.table import BLOOM_FILTERS, COLUMN_STATS, FILES, write_metadata
from labformat.storage import Storage
from labformat.timeline import METADATA_DIR

if TYPE_CHECKING:
    from labformat.context import TableContext

_STATS_DDL = "path string, column_stats string, bloom string, bloom_type string"


def _stats_of_files(batches: Iterator[pa.RecordBatch], base_uri: str, columns: tuple[str, ...]):
    """Task: read each listed base file and compute its column stats; take its bloom filter from the footer."""
    storage = Storage(base_uri)
    for batch in batches:
        rows = []
        for path in batch.column("path").to_pylist():
            full = storage.full_path(path)
            try:
                parquet = pq.ParquetFile(full, filesystem=storage.fs, page_checksum_verification=True)
                # A file written before a column was added has none: its stats stay unknown.
                present = [c for c in columns if c in parquet.schema_arrow.names]
                collector = ColumnStatsCollector(tuple(present))
                for group in range(parquet.num_row_groups):
                    collector.add(parquet.read_row_group(group, columns=present))
            except (OSError, ValueError) as exc:
                raise unreadable(path, exc) from None
            footer = KeyFooter.parse(parquet.metadata.metadata)
            rows.append({"path": path, "column_stats": collector.to_json(), "bloom": footer.bloom,
                         "bloom_type": footer.bloom_type})
        yield pa.RecordBatch.from_pylist(rows, schema=pa.schema(
            [("path", pa.string()), ("column_stats", pa.string()), ("bloom", pa.string()),
             ("bloom_type", pa.string())]))


@dataclass(frozen=True)
class RebuildReport:
    instant: str | None
    files: int
    seconds: float


def rebuild_metadata(ctx: "TableContext") -> RebuildReport:
    """Recompute the metadata table's entries for the latest commit from the base files themselves.

    The files are read by Spark tasks (the driver only lists them); the previous entries of
    that instant are replaced. Readers in the meantime fall back to footers, as they do for
    any metadata they cannot trust.
    """
    import time

    started = time.perf_counter()
    timeline, conf, spark = ctx.timeline, ctx.config, ctx.spark
    # The snapshot readers take is the last completed instant's (see MetadataReader), not the latest time's.
    completed = timeline.completed_writes_by_completion()
    latest = completed[-1] if completed else None
    if latest is None or not conf.metadata_enable:
        return RebuildReport(None, 0, 0.0)
    slices = ctx.file_system_view().latest_file_slices()
    schema = ctx.schema()
    columns = tuple(f.name for f in schema.fields)
    base_uri = ctx.storage.base_uri
    paths = spark.createDataFrame([(s.path,) for s in slices], "path string")
    paths = paths.repartition(max(1, min(len(slices), 2 * spark.sparkContext.defaultParallelism)))
    # Spark Rows: their fields read as attributes, as write_metadata reads a write task's BaseFileStat.
    stats = paths.mapInArrow(lambda batches: _stats_of_files(batches, base_uri, columns), _STATS_DDL).collect()
    # Replaced under the table lock: a commit meanwhile would carry stats over from a half-replaced snapshot.
    with TableLock(ctx.storage, wait_s=C.option("lock_wait_time_ms").default / 1000,
                   expire_s=C.option("lock_expire_minutes").default * 60):
        now = timeline.fresh().completed_writes_by_completion()
        if now[-1] != latest:
            raise ConcurrentWriteError(f"commit {now[-1].time} completed while the metadata table was being "
                                       f"rebuilt for {latest.time}; nothing was replaced, run the rebuild again")
        for partition in (FILES, COLUMN_STATS, BLOOM_FILTERS):
            ctx.storage.delete(f"{METADATA_DIR}/{partition}/{latest.time}.parquet")
        write_metadata(ctx.storage, timeline, latest.time, slices, stats, conf.column_stats_enable,
                       conf.bloom_filter_enable, carry_over=False, columns=conf.column_stats_columns)
    return RebuildReport(latest.time, len(slices), time.perf_counter() - started)
