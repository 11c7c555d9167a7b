"""Reading file slices: base files alone, or (merge-on-read) base file + log files merged by record key, one Spark task per slice.

A file slice without log files is its base file, read as on a copy-on-write table (by Spark
tasks through `Storage`: `io.files`). A file slice with log files is merged in one Spark task: its base file's
records, then each log block's, in the order of their instants (the order the writes committed).
How a later record meets an earlier one is the table's record merge mode (`MergeMode`):

- COMMIT_TIME_ORDERING (every table labformat creates, Hudi's OverwriteWithLatestAvroPayload): the
  later instant wins, whatever the precombine values; a delete removes the key, and a record a
  later instant writes brings it back. Inside one instant the highest precombine value wins (ties
  to the higher commit seqno), as step 1 of an upsert decides. Exactly what copy-on-write's
  merge gives for the same writes.
- EVENT_TIME_ORDERING (a table whose hoodie.properties names no payload class or merge mode, as
  labformat's tables before it wrote one, or DefaultHoodieRecordPayload): the log blocks are
  folded first (a delete replaces what came before it, records after it compete by precombine
  value, ties to the later), then the logs' record meets the base file's: the base record stays
  only when its precombine value is higher. This is what hudi-rs 0.5 does for such tables; a key
  deleted and re-inserted with a lower precombine value than its base record comes back as the
  base record (the reason new tables are written with commit-time ordering).

A read-optimized query reads the base files only: fast, and as of the last time each file
group's base file was written.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import Accumulator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from labformat.errors import CorruptTableError
from labformat.fileformat.arrow_columns import conform_to_spark, constant
from labformat.fileformat.log_file import (
    BlockType,
    LogBlock,
    LogFormatError,
    data_block_records,
    deleted_records,
    live_blocks,
    read_blocks,
)
from labformat.fileformat.parquet_io import read_base_file, unreadable
from labformat.model.base_file import BaseFile
from labformat.io.files import counting, read_files
from labformat.expressions.predicates import Predicate
from labformat.model.enums import MergeMode
from labformat.model.file_group import FileSlice
from labformat.schema import COMMIT_SEQNO, RECORD_KEY, with_meta_columns
from labformat.storage import Storage
from labformat.spark.compat import distribute
from labformat.spark.tasks import map_in_arrow

_SLICE_DDL = "base string, logs string"


def read_file_slices(spark: SparkSession, storage: Storage, slices: Iterable[FileSlice], data_schema: T.StructType,
                     precombine_field: str, mode: MergeMode, predicate: Predicate | None = None,
                     row_groups_read: Accumulator[int] | None = None,
                     read_counts: Accumulator[tuple[int, ...]] | None = None,
                     count_requests: bool = False) -> DataFrame:
    """The rows of `slices` (meta columns first) as a lazy DataFrame: base files read by Spark tasks
    (`io.files`), slices with log files merged in a Spark task each (a read-optimized read passes
    slices without their logs: `FileSlice.base_only`). `predicate`, the filter the caller applies
    next, lets the tasks reading base files skip row groups; `row_groups_read` counts the base files'
    row groups the tasks read (a merged slice's base file is read whole); `read_counts` what the tasks
    reading plain base files did (`io.files.ReadCounts`, requests with `count_requests`; the merging
    tasks are not counted)."""
    schema = with_meta_columns(data_schema)
    slices = list(slices)
    plain = [s for s in slices if not s.has_logs]
    merged = [s for s in slices if s.has_logs]
    parts = []
    if plain:
        parts.append(read_files(spark, storage.base_uri, [s.path for s in plain], schema, [s.size_bytes for s in plain],
                                predicate=predicate, row_groups_read=row_groups_read, read_counts=read_counts,
                                count_requests=count_requests))
    if merged:
        parts.append(merged_slices(spark, storage.base_uri, merged, schema, precombine_field, mode, row_groups_read))
    if not parts:
        return spark.createDataFrame([], schema)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def merged_slices(spark: SparkSession, base_uri: str, slices: list[FileSlice], schema: T.StructType,
                  precombine_field: str, mode: MergeMode, row_groups_read: Accumulator[int] | None = None) -> DataFrame:
    """One Spark task per file slice with logs merges it; the driver ships only the paths."""
    rows = [(s.path, json.dumps(list(s.log_paths))) for s in slices]
    # One partition per file slice: each is merged by a task of its own.
    descriptors = distribute(spark, rows, _SLICE_DDL)
    columns = [f.name for f in schema.fields]

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = Storage(base_uri)
        for batch in batches:
            for base, logs in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                table = merge_file_slice(storage, base, json.loads(logs), precombine_field, mode, schema,
                                         counting(None, row_groups_read)).select(columns)
                yield from table.to_batches()

    return map_in_arrow(descriptors, merge, schema)


def merge_file_slice(storage: Storage, base_path: str, log_paths: list[str], precombine_field: str,
                     mode: MergeMode, schema: T.StructType | None = None,
                     keep: Callable[[Any, int], bool] | None = None) -> pa.Table:
    """Base file + log files of one file slice, merged by record key (see the module's rules); the
    records sorted by key, in `schema` (the table's, meta columns first: a column the base file
    predates reads as null, a widened one as its new type), else in the base file's own schema.
    CorruptTableError naming the file when a log file cannot be decoded."""
    base = read_base_file(storage, base_path, keep=keep)
    if schema is not None:
        base = conform_to_spark(base, schema)
    schema = pa.schema([f.with_nullable(True) for f in base.schema]).remove_metadata()
    base_instant = BaseFile.parse(base_path).instant_time
    # A rollback block may sit in a later log file than the blocks it cancels: one pass over all of them.
    blocks: list[tuple[str, LogBlock]] = []
    for log_path in log_paths:
        try:
            blocks.extend((log_path, b) for b in read_blocks(storage.read_bytes(log_path)))
        except (LogFormatError, OSError, ValueError) as exc:
            raise unreadable(log_path, exc, "log file") from None
    live = {id(b) for b in live_blocks([b for _, b in blocks])}
    tables, positions = [base.cast(schema)], [constant(_position(base_instant, 0), base.num_rows)]
    deleted_keys: list[str] = []
    deleted_at: list[str] = []
    # Stable: blocks of one instant keep their order in the logs.
    ordered = sorted((b for b in blocks if id(b[1]) in live), key=lambda pb: pb[1].instant_time)
    for n, (log_path, block) in enumerate(ordered, start=1):
        at = _position(block.instant_time, n)
        try:
            if block.block_type == BlockType.AVRO_DATA:
                records = data_block_records(block, schema)
                tables.append(records)
                positions.append(constant(at, records.num_rows))
            elif block.block_type == BlockType.DELETE:
                keys = [key for key, _, _ in deleted_records(block) if key is not None]
                deleted_keys += keys
                deleted_at += [at] * len(keys)
        except (LogFormatError, ValueError, TypeError, KeyError, EOFError) as exc:
            raise CorruptTableError(f"log file {log_path}: block of instant {block.instant_time} cannot be decoded "
                                    f"({type(exc).__name__}: {exc}); the table cannot be read") from None
    records = pa.concat_tables(tables)
    position = pa.chunked_array(positions, pa.string()).combine_chunks()
    return latest_records(records, position, pa.array(deleted_keys, pa.string()), pa.array(deleted_at, pa.string()),
                          precombine_field, mode, base_rows=base.num_rows)


def _position(instant: str, block: int) -> str:
    """Where a record version stands in a slice's history: its instant, then its block's place (the
    base file's records are block 0). Compared as strings: both parts have fixed widths."""
    return f"{instant}{block:06d}"


_KEY, _AT, _ORDER, _SEQ, _ROW, _DELETE = "k", "at", "order", "seq", "row", "delete"


def _first_per_key(events: pa.Table, sort_keys: list[tuple[str, str]]) -> pa.Table:
    """The first event of each key once `events` is sorted by key, then `sort_keys`."""
    ordered = events.take(pc.sort_indices(events, sort_keys=[(_KEY, "ascending"), *sort_keys]))
    keys = ordered.column(_KEY).combine_chunks()
    first = np.ones(len(keys), dtype=bool)
    if len(keys) > 1:
        first[1:] = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1)).to_numpy(zero_copy_only=False)
    return ordered.filter(pa.array(first))


def latest_records(records: pa.Table, position: pa.Array, deleted_keys: pa.Array, deleted_at: pa.Array,
                   precombine_field: str, mode: MergeMode, base_rows: int = 0) -> pa.Table:
    """One record per key by the merge mode's rules (module docstring), sorted by key: `records` are
    every record version of a slice (the first `base_rows` from its base file) with `position` each;
    `deleted_keys` the keys its delete blocks name, deleted at `deleted_at`."""
    n = records.num_rows
    if n == 0:
        return records
    data = pa.table({_KEY: records.column(RECORD_KEY).combine_chunks(), _AT: position,
                     _ORDER: records.column(precombine_field).combine_chunks(),
                     _SEQ: records.column(COMMIT_SEQNO).combine_chunks(),
                     _ROW: pa.array(np.arange(n, dtype=np.int64)), _DELETE: pa.repeat(pa.scalar(False), n)})
    deletes = pa.table({_KEY: deleted_keys, _AT: deleted_at, _ORDER: pa.nulls(len(deleted_keys), data.schema.field(_ORDER).type),
                        _SEQ: pa.nulls(len(deleted_keys), pa.string()), _ROW: pa.nulls(len(deleted_keys), pa.int64()),
                        _DELETE: pa.repeat(pa.scalar(True), len(deleted_keys))})
    if mode is MergeMode.COMMIT_TIME_ORDERING:
        # The latest event of each key decides; inside one block (one instant) the highest precombine value.
        last = _first_per_key(pa.concat_tables([data, deletes]),
                              [(_AT, "descending"), (_ORDER, "descending"), (_SEQ, "descending")])
        rows = last.filter(pc.invert(last.column(_DELETE))).column(_ROW)
        return records.take(rows)
    # EVENT_TIME_ORDERING: fold the logs (a delete resets the key; later records compete by value), then
    # meet the base record.
    logs = pa.concat_tables([data.slice(base_rows), deletes])
    last_delete = _first_per_key(deletes, [(_AT, "descending")]) if len(deletes) else deletes
    if len(last_delete):
        where = pc.index_in(logs.column(_KEY), value_set=last_delete.column(_KEY))
        reset_at = last_delete.column(_AT).take(where.fill_null(0))
        after_reset = pc.or_kleene(where.is_null(), pc.greater(logs.column(_AT), reset_at)).fill_null(True)
        # The last delete itself stays (the fold's state when nothing follows it); earlier events go.
        is_last_delete = pc.and_(logs.column(_DELETE), pc.equal(logs.column(_AT), reset_at).fill_null(False))
        logs = logs.filter(pc.or_(after_reset, is_last_delete))
    log_state = _first_per_key(logs, [(_DELETE, "ascending"), (_ORDER, "descending"), (_AT, "descending"),
                                      (_SEQ, "descending")]) if len(logs) else logs
    base = data.slice(0, base_rows)
    if len(log_state):
        where = pc.index_in(base.column(_KEY), value_set=log_state.column(_KEY))
        has_log = where.is_valid()
        log_order = log_state.column(_ORDER).take(where.fill_null(0))
        log_deleted = log_state.column(_DELETE).take(where.fill_null(0))
        # The base record stays where no log names its key, or where its precombine value is higher
        # than the logs' record (never against a delete).
        base_wins = pc.and_(pc.invert(log_deleted), pc.greater(base.column(_ORDER), log_order))
        base = base.filter(pc.or_(pc.invert(has_log), base_wins.fill_null(False)))
        beaten = pc.is_in(log_state.column(_KEY), value_set=base.column(_KEY))
        log_state = log_state.filter(pc.and_(pc.invert(log_state.column(_DELETE)), pc.invert(beaten)))
    winners = pa.concat_tables([base, log_state.cast(base.schema)])
    winners = winners.take(pc.sort_indices(winners, sort_keys=[(_KEY, "ascending")]))
    return records.take(winners.column(_ROW))
