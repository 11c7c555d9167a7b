"""The merge-on-read append, a Spark task per file group: its updates or deletes -> one new log file of the latest file slice.

Where copy-on-write reads the old base file and writes all of it again, the append writes only
the incoming records: an Avro data block (upsert) or a delete block (delete) in a log file of
its own. Readers merge base file and logs by record key (`read/merge_on_read.py`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from labformat import markers
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.fileformat.column_stats import ColumnStatsCollector
from labformat.fileformat.log_file import (
    LogBlock,
    LogFormatError,
    avro_data_block,
    delete_block,
    key_states,
    live_blocks,
    read_blocks,
)
from labformat.fileformat.parquet_io import read_base_file, unreadable
from labformat.model.base_file import BaseFile
from labformat.model.enums import Operation
from labformat.model.log_file import LogFile
from labformat.schema import META_COLUMNS, RECORD_KEY
from labformat.storage import Storage
from labformat.write.arrow_writer import TaskIdentity, WriteSpec, add_meta_columns

if TYPE_CHECKING:
    from labformat.write.merge import Target

# A delete block's ordering value. Zero is Hudi's "natural" ordering: the delete wins over every
# record its instant is later than, whatever their precombine values (what Hudi's Spark writer
# puts there, and what hudi-rs reads as such). hudi-rs 0.5 cannot decode a timestamp branch.
DELETE_ORDERING = 0


def append_log_file(incoming: pa.Table, incoming_keys: pa.Array, spec: WriteSpec, target: Target, operation: Operation,
                    task: TaskIdentity, incoming_bytes: int, moved_keys: pa.Array | None = None) -> BaseFileStat:
    """Write one log file holding `incoming` (updates, as an Avro data block) or its keys (deletes,
    as a delete block) for `target`'s latest slice; its write stat. `moved_keys` (a global index's
    records that left this file group for another partition) go in a delete block after the data
    block, as Hudi's append handle writes an upsert's deletes beside its updates.

    The log version starts at the one the driver planned and moves up while a file of that name
    exists (a dead writer's file not yet rolled back). The write marker goes first, so that a
    rollback finds the file whatever happens next; the file itself is published whole (a temp
    file, then a hard link), so no reader ever sees half a block.
    """
    # An appending target (`appends_log`): an existing file group's latest slice, the log version planned.
    assert target.old_path is not None and target.log_version is not None
    started = time.monotonic()
    storage = Storage(spec.base_uri)
    base_name = BaseFile.parse(target.old_path).name
    order = pc.sort_indices(incoming_keys)
    keys = incoming_keys.take(order)
    moved = pc.sort_indices(moved_keys) if moved_keys is not None and len(moved_keys) else None
    version = target.log_version
    while True:
        log = LogFile(target.file_id, target.prev_commit, version, task.token)
        path = f"{target.partition_path}/{log.name}" if target.partition_path else log.name
        blocks = [_block(incoming.take(order), keys, spec, target.partition_path, log.name, task.partition, operation)
                  ] if incoming.num_rows or moved is None else []
        if moved is not None:
            assert moved_keys is not None  # `moved` orders them
            blocks.append(_block(incoming.slice(0, 0), moved_keys.take(moved), spec, target.partition_path, log.name,
                                 task.partition, Operation.DELETE))
        data = b"".join(block.to_bytes() for block in blocks)
        markers.create(storage, spec.instant_time, path)
        if storage.create_exclusive(path, data):
            break
        markers.delete_one(storage, spec.instant_time, path)  # not ours: never let a rollback delete it
        version += 1
    stats = ColumnStatsCollector(spec.data_columns)
    if operation is not Operation.DELETE:
        stats.add(incoming.select(list(spec.data_columns)))
    n = incoming.num_rows
    deletes = n if operation is Operation.DELETE else 0
    writes = n - deletes
    inserts = 0
    if target.slice_logs is not None:  # BUCKET: the index did not look the keys up
        held = int(pc.sum(pc.is_in(keys, value_set=_slice_keys(storage, target.old_path, target.slice_logs, spec)))
                   .as_py() or 0)
        if operation is Operation.DELETE:
            deletes = held  # a key the slice does not hold is named in the delete block, but deletes nothing
        else:
            inserts = n - held
    named, moved_n = keys, 0
    if moved is not None:
        assert moved_keys is not None  # `moved` orders them
        named = pa.concat_arrays([keys.cast(pa.string()), moved_keys.cast(pa.string())])
        moved_n = len(moved_keys)
    return BaseFileStat(
        partition_path=target.partition_path, file_id=target.file_id, path=path, prev_commit=target.prev_commit,
        num_writes=writes, num_inserts=inserts, num_update_writes=writes - inserts, num_deletes=deletes + moved_n,
        file_size=len(data), min_key=pc.min(named).as_py() if len(named) else None,
        max_key=pc.max(named).as_py() if len(named) else None,
        write_ms=int((time.monotonic() - started) * 1000), bloom_ms=0, task_partition=task.partition,
        task_attempt=task.attempt, prev_min_key=None, prev_max_key=None, prev_size=0, incoming_bytes=incoming_bytes,
        column_stats=stats.to_json(), bloom=None, bloom_bytes=0, base_file=base_name, log_version=version,
    )


def _block(rows: pa.Table, keys: pa.Array, spec: WriteSpec, partition_path: str, log_name: str,
           task_partition: int, operation: Operation) -> LogBlock:
    if operation is Operation.DELETE:
        return delete_block(keys.to_pylist(), partition_path, [DELETE_ORDERING] * len(keys), pa.int64(),
                            spec.instant_time)
    data = rows.select(list(spec.data_columns))
    schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS]
                       + [data.schema.field(c).with_nullable(True) for c in spec.data_columns])
    if spec.record_key not in data.column_names:
        # A key that is no single string column (an int, or several fields) is the computed `_lf_key`:
        # not a data column, but `keys` holds it in the rows' order.
        data = data.append_column(spec.record_key, keys)
    records = add_meta_columns(data, spec, schema, partition_path, log_name, f"{spec.instant_time}_{task_partition}_", 0)
    assert spec.log_schema is not None  # a merge-on-read write's spec carries it (`write_spec(log_blocks=True)`)
    return avro_data_block(records, spec.log_schema, spec.instant_time)


def _slice_keys(storage: Storage, base_path: str, log_paths: tuple[str, ...], spec: WriteSpec) -> pa.Array:
    """The record keys a file slice holds before this append: its base file's, with its logs applied
    (a key whose last word is a delete is gone; one a data block names is there)."""
    if spec.meta_fields:
        keys = read_base_file(storage, base_path, [RECORD_KEY]).column(0)
    else:  # no keys stored: computed from the key fields
        assert spec.keygen is not None  # `write_spec` sets it
        keys = spec.keygen.record_keys_arrow(read_base_file(storage, base_path))
    keys = pc.cast(keys, pa.string())
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    blocks = []
    for log in log_paths:
        try:
            blocks += read_blocks(storage.read_bytes(log))
        except (OSError, LogFormatError) as exc:
            raise unreadable(log, exc, "log file") from None
    states = key_states(live_blocks(blocks))
    if not states:
        return keys
    gone = pa.array([k for k, live in states.items() if not live], pa.string())
    added = pa.array([k for k, live in states.items() if live], pa.string())
    kept = keys.filter(pc.invert(pc.is_in(keys, value_set=gone))) if len(gone) else keys
    return pa.concat_arrays([kept, added])
