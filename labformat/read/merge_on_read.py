"""Reading file slices: base files alone, or (merge-on-read) base file + log files merged by record key in a Spark task per file slice.

A file slice without log files is its base file, read by Spark's parquet reader as on a
copy-on-write table. A file slice with log files is merged in one Spark task: its base file and
the records of its logs' data blocks are combined, and for each record key the record with the
highest precombine value is kept, ties going to the higher commit seqno (so to the later
instant); a key a delete block names is dropped when the delete came later than the record kept.
These are Hudi's event-time ordering rules as hudi-rs 0.5 applies them: an update whose
precombine value is lower than the stored record's loses to it on a merge-on-read table, where
a copy-on-write upsert would have replaced the record.

A read-optimized query reads the base files only: fast, and as of the last time each file
group's base file was written.
"""

from __future__ import annotations

import json
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from labformat.fileformat.log_file import BlockType, data_block_records, deleted_records, live_blocks, read_blocks
from labformat.model.file_group import FileSlice
from labformat.schema import COMMIT_SEQNO, COMMIT_TIME, RECORD_KEY, with_meta_columns
from labformat.storage import Storage

SNAPSHOT = "SNAPSHOT"
READ_OPTIMIZED = "READ_OPTIMIZED"
_SLICE_DDL = "base string, logs string"


def read_file_slices(spark: SparkSession, storage: Storage, slices: Iterable[FileSlice], data_schema: T.StructType,
                     precombine_field: str, read_optimized: bool = False) -> DataFrame:
    """The rows of `slices` (meta columns first) as a lazy DataFrame: base files through Spark's
    parquet reader, slices with log files merged in a Spark task each (none when `read_optimized`)."""
    schema = with_meta_columns(data_schema)
    slices = list(slices)
    plain = [s for s in slices if read_optimized or not s.has_logs]
    merged = [s for s in slices if not read_optimized and s.has_logs]
    parts = []
    if plain:
        parts.append(spark.read.schema(schema).parquet(*[storage.spark_path(s.path) for s in plain]))
    if merged:
        parts.append(merged_slices(spark, storage.base_uri, merged, schema, precombine_field))
    if not parts:
        return spark.createDataFrame([], schema)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def merged_slices(spark: SparkSession, base_uri: str, slices: list[FileSlice], schema: T.StructType,
                  precombine_field: str) -> DataFrame:
    """One Spark task per file slice with logs merges it; the driver ships only the paths."""
    rows = [(s.path, json.dumps(list(s.log_paths))) for s in slices]
    # One partition per file slice: each is merged by a task of its own.
    descriptors = spark.createDataFrame(spark.sparkContext.parallelize(rows, len(rows)), _SLICE_DDL)
    columns = [f.name for f in schema.fields]

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = Storage(base_uri)
        for batch in batches:
            for base, logs in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                table = merge_file_slice(storage, base, json.loads(logs), precombine_field).select(columns)
                yield from table.to_batches()

    return descriptors.mapInArrow(merge, schema)


def merge_file_slice(storage: Storage, base_path: str, log_paths: list[str], precombine_field: str) -> pa.Table:
    """Base file + log files of one file slice, merged by record key (see the module's rules)."""
    with storage.fs.open_input_file(storage.full_path(base_path)) as source:
        base = pq.read_table(source, use_threads=False)
    schema = pa.schema([f.with_nullable(True) for f in base.schema]).remove_metadata()
    tables = [base.cast(schema)]
    deletes: dict[str, str] = {}  # record key -> the latest instant that deleted it
    # A rollback block may sit in a later log file than the blocks it cancels: one pass over all of them.
    blocks = [b for log_path in log_paths for b in read_blocks(storage.read_bytes(log_path))]
    for block in live_blocks(blocks):
        if block.block_type == BlockType.AVRO_DATA:
            tables.append(data_block_records(block, schema))
        elif block.block_type == BlockType.DELETE:
            for key, _, _ in deleted_records(block):
                if key is not None and block.instant_time > deletes.get(key, ""):
                    deletes[key] = block.instant_time
    return latest_records(pa.concat_tables(tables), precombine_field, deletes)


def latest_records(records: pa.Table, precombine_field: str, deletes: dict[str, str]) -> pa.Table:
    """One record per key: the highest (precombine value, commit seqno); then without the keys
    whose latest delete is later than the record kept (a delete's ordering value is zero: it is
    ordered by its instant only)."""
    if records.num_rows == 0:
        return records
    order = pc.sort_indices(records, sort_keys=[(RECORD_KEY, "ascending"), (precombine_field, "descending"),
                                                (COMMIT_SEQNO, "descending")])
    ordered = records.take(order)
    keys = ordered.column(RECORD_KEY).combine_chunks()
    first = np.ones(len(keys), dtype=bool)
    if len(keys) > 1:
        first[1:] = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1)).to_numpy(zero_copy_only=False)
    kept = ordered.filter(pa.array(first))
    if not deletes:
        return kept
    delete_keys = pa.array(list(deletes), pa.string())
    delete_times = pa.array(list(deletes.values()), pa.string())
    position = pc.index_in(kept.column(RECORD_KEY).combine_chunks(), value_set=delete_keys)
    deleted_at = delete_times.take(position.fill_null(0))
    gone = pc.and_(position.is_valid(), pc.greater(deleted_at, kept.column(COMMIT_TIME).combine_chunks()))
    return kept.filter(pc.invert(gone.fill_null(False)))
