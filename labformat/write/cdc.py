"""Change data capture (`hoodie.table.cdc.enabled`): a commit's inserts, updates and deletes, read with `incremental_format=cdc`.

A commit's changes come from the file groups it wrote: their file slices before (as of the
write's plan) and after (its new base files, or the slices with its new log files), read as a
snapshot reads them (logs merged). A record of the slices after whose `_hoodie_commit_time` is
this commit's was written by it: an insert when no slice before held its key (in its partition),
else an update (with its image before); a key the slices before held and the slices after do not
was deleted. Records a commit only moved keep their commit times (clustering, compaction), so
they are no change. Images are the data columns as JSON, as Hudi's CDC query returns them; a
record that moved partition under a global index is a delete and an insert.

Where Hudi writes `.cdc` log files beside the data, labformat writes parquet files
`.hoodie/cdc/<instant>.<writeToken>.parquet` (one per task attempt) before the commit publishes; the
commit lists the files of the attempts that succeeded (`labformat.cdcFiles`) and the others (a
retried task's first attempt) are deleted before it, as a write's stray base files are. Readers trust
the listed files of completed instants only, and a rollback deletes a failed instant's with its other files.
"""

from __future__ import annotations

import io
import json
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.model.enums import MergeMode
from labformat.model.commit import CDC_FILES_KEY
from labformat.model.file_group import FileSlice
from labformat.model.instant import parse_instant_time
from labformat.read.merge_on_read import read_file_slices
from labformat.schema import COMMIT_TIME, PARTITION_PATH, RECORD_KEY
from labformat.storage import Storage
from labformat.timeline import CDC_DIR
from labformat.spark.compat import default_parallelism
from labformat.spark.partitioning import join_partitioned
from labformat.write.arrow_writer import this_task
from labformat.spark.tasks import map_in_arrow

_WRITTEN_DDL = "path string, rows long"


def instant_millis(instant: str) -> int:
    """An instant time (UTC, `yyyyMMddHHmmssSSS`) as epoch milliseconds: Hudi's `ts_ms`."""
    return int(parse_instant_time(instant).timestamp() * 1000)


def changes(spark: SparkSession, storage: Storage, instant: str, before: list[FileSlice], after: list[FileSlice],
            schema_before: T.StructType | None, schema_after: T.StructType, precombine_field: str,
            mode: MergeMode) -> DataFrame:
    """The change records of the commit `instant` (`read.incremental.CDC_SCHEMA`), lazily."""
    def images(slices: list[FileSlice], schema: T.StructType, name: str) -> DataFrame:
        rows = read_file_slices(spark, storage, slices, schema, precombine_field, mode)
        data = [F.col(f.name) for f in schema.fields]
        return rows.select(F.col(RECORD_KEY).alias("_k"), F.col(PARTITION_PATH).alias("_p"),
                           F.to_json(F.struct(*data)).alias(name),
                           (F.col(COMMIT_TIME) == F.lit(instant)).alias(f"_{name}_written"))

    new = images(after, schema_after, "after")
    if before and schema_before is not None:
        old = images(before, schema_before, "before").drop("_before_written")
        # Both images hash-partitioned by (key, partition) into a count of the write's own.
        tasks = max(1, min(len(before) + len(after), 2 * default_parallelism(spark)))
        joined = join_partitioned(old, new, ["_k", "_p"], how="full_outer", n=tasks)
    else:
        joined = new.withColumn("before", F.lit(None).cast("string"))
    op = (F.when(F.col("after").isNull(), F.lit("d"))
          .when(F.col("before").isNull(), F.lit("i")).otherwise(F.lit("u")))
    changed = F.col("after").isNull() | F.coalesce(F.col("_after_written"), F.lit(False))
    return joined.where(changed).select(
        op.alias("op"), F.lit(instant_millis(instant)).alias("ts_ms"),
        "before", "after",
        F.col("_k").alias(RECORD_KEY), F.col("_p").alias(PARTITION_PATH))


def _write_files(batches: Iterator[pa.RecordBatch], base_uri: str, instant: str) -> Iterator[pa.RecordBatch]:
    """Task: its change records as one parquet file `.hoodie/cdc/<instant>.<writeToken>.parquet`."""
    filled = [b for b in batches if b.num_rows]
    rows = []
    if filled:
        table = pa.Table.from_batches(filled)
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="zstd")
        # Named by the attempt, as base files are: a retried attempt never meets its predecessor's file.
        rel = f"{CDC_DIR}/{instant}.{this_task().token}.parquet"
        Storage(base_uri).publish(rel, sink.getvalue())
        rows.append({"path": rel, "rows": table.num_rows})
    yield pa.RecordBatch.from_pylist(rows, schema=pa.schema([("path", pa.string()), ("rows", pa.int64())]))


def write_changes(spark: SparkSession, storage: Storage, instant: str, records: DataFrame) -> list[str]:
    """Write the change records by Spark tasks (a couple of files per commit), then delete the files
    of this instant's failed task attempts; the files the commit lists (`CDC_FILES_KEY`)."""
    base_uri = storage.base_uri
    written = map_in_arrow(records.coalesce(max(1, default_parallelism(spark))),
                           lambda batches: _write_files(batches, base_uri, instant), _WRITTEN_DDL).collect()
    kept = sorted(r.path for r in written)
    reconcile(storage, instant, set(kept))
    return kept


def commit_entry(files: list[str]) -> dict[str, str]:
    """The commit's `extraMetadata` entry listing its change-record files."""
    return {CDC_FILES_KEY: json.dumps(files)}


def reconcile(storage: Storage, instant: str, kept: set[str]) -> list[str]:
    """Delete this instant's change-record files that no successful attempt returned (a retried task's
    earlier attempt, a temp file a killed attempt left); the paths deleted."""
    deleted = []
    for info in storage.list(CDC_DIR):
        leaf = info.path.rsplit("/", 1)[-1]
        if leaf.lstrip(".").split(".", 1)[0] == instant and info.path not in kept:
            storage.delete(info.path)
            deleted.append(info.path)
    return deleted
