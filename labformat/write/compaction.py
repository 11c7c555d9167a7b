"""Compaction (merge-on-read): each file slice with log files merged into a new base file, one Spark task per slice; a `compaction` instant that completes as a `commit`.

`run` plans (which file slices: the strategy below), requests `<instant>.compaction.requested`
holding the plan, marks it inflight, merges each planned slice's base file and logs in a Spark
task of its own (the same merge a snapshot read does) and writes the result as the file group's
next base file, then publishes `<instant>.commit`. The new slice has no logs; later delta
commits append to it. Older slices stay for time travel until cleaning (not yet written).

Inline compaction (`hoodie.compact.inline`): `after_delta_commit` runs `run` right after an upsert
or a delete has committed, once `hoodie.compact.inline.max.delta.commits` delta commits have
completed since the last compaction (Hudi's NUM_COMMITS trigger); the write's report carries it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Iterator

import pyarrow as pa

from labformat.config import Config
from labformat.context import TableConfig, TableContext
from labformat.errors import ConfigError
from labformat.fileformat.arrow_columns import constant
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.fs_view import check_base_files
from labformat.model.base_file import write_token
from labformat.model.enums import MergeMode
from labformat.model.file_group import FileSlice
from labformat.model.instant import Action
from labformat.model.report import WriteReport
from labformat.read.merge_on_read import merge_file_slice
from labformat.schema import FILE_NAME, with_meta_columns
from labformat.spark.jobs import StepRecorder, describe
from labformat.storage import Storage
from labformat.timeline import Timeline
from labformat.write.arrow_writer import BaseFileWriter, WriteSpec, task_identity
from labformat.write.transaction import WriteTransaction

STRATEGY = "every file slice with log files, most log bytes first"
_OPERATION_DDL = "partition_path string, file_id string, base_path string, base_instant string, logs string"


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact (Hudi's HoodieCompactionOperation, the fields labformat fills)."""

    partition_path: str
    file_id: str
    base_instant_time: str
    base_path: str
    log_paths: tuple[str, ...]
    log_bytes: int

    def to_json_dict(self) -> dict:
        return {"partitionPath": self.partition_path, "fileId": self.file_id,
                "baseInstantTime": self.base_instant_time, "dataFilePath": self.base_path,
                "deltaFilePaths": list(self.log_paths),
                "metrics": {"TOTAL_LOG_FILES": len(self.log_paths), "TOTAL_LOG_FILES_SIZE": self.log_bytes}}


def plan_compaction(slices: list[FileSlice]) -> list[CompactionOperation]:
    """The strategy: every latest file slice that has log files, those with the most log bytes first."""
    chosen = sorted((s for s in slices if s.has_logs), key=lambda s: (-s.log_bytes, s.path))
    return [CompactionOperation(s.partition_path, s.file_id, s.base_instant_time, s.path, s.log_paths, s.log_bytes)
            for s in chosen]


def compact_file_slices(batches: Iterator[pa.RecordBatch], spec: WriteSpec, precombine_field: str,
                        mode: MergeMode, schema) -> Iterator[pa.RecordBatch]:
    """The compaction task: merge each file slice it is given and write the merge as a new base file."""
    storage = Storage(spec.base_uri)
    task_partition, stage, attempt = task_identity()
    token = write_token(task_partition, stage, attempt)
    for batch in batches:
        for row in batch.to_pylist():
            logs = json.loads(row["logs"])
            merged = merge_file_slice(storage, row["base_path"], logs, precombine_field, mode, schema)
            schema = merged.schema
            f = BaseFileWriter(storage, spec, row["partition_path"], row["file_id"], token, schema, row["base_instant"])
            # Each record keeps the commit time and seqno of the instant that wrote it; only where it lives changes.
            merged = merged.set_column(schema.get_field_index(FILE_NAME), FILE_NAME, constant(f.name, merged.num_rows))
            f.write(merged, inserts=0, updates=0)
            stat = f.close(task_partition, attempt)
            read = sum(info.size for info in storage.list(row["partition_path"])
                       if info.path in (row["base_path"], *logs))
            yield BaseFileStat.record_batch([BaseFileStat(**{**asdict(stat), "prev_size": read})])


def run(ctx: TableContext, cfg: Config) -> WriteReport:
    """Compact the table's file slices with log files (see the module docstring); a report with
    instant None when none has logs."""
    if not ctx.config.merge_on_read:
        raise ConfigError(f"compaction merges log files into base files: {ctx.storage.base_uri} is a "
                          f"{ctx.config.table_type} table, which has none")
    steps = StepRecorder(ctx.spark)
    with WriteTransaction(ctx, "compact", Action.COMPACTION, options=cfg) as tx:
        with steps.step("plan"):
            slices = ctx.file_system_view().latest_file_slices()
            operations = plan_compaction(slices)
            # A missing, truncated or swapped file is named here, before the instant starts.
            check_base_files(ctx.storage, [s for s in slices if s.has_logs])
        details = {"strategy": STRATEGY, "file_slices_compacted": len(operations),
                   "log_files_compacted": sum(len(o.log_paths) for o in operations),
                   "log_bytes_compacted": sum(o.log_bytes for o in operations),
                   "plan": [o.to_json_dict() for o in operations]}
        if not operations:
            return tx.abandon(steps=tuple(steps.steps), options=dict(cfg), details=details)
        data_schema = ctx.schema()
        with steps.step("start_instant"):
            instant = tx.start(plan={"operations": details["plan"], "strategy": STRATEGY, "version": 2})
        with steps.step("write"):
            spec = WriteSpec(ctx.storage.base_uri, instant.time, ctx.config.record_key,
                             tuple(f.name for f in data_schema.fields), cfg.max_file_size, cfg.compression_codec,
                             bloom_fpp=cfg.bloom_fpp, bloom_num_entries=cfg.bloom_num_entries,
                             collect_bloom=ctx.config.bloom_filter_enable, bloom_type=cfg.bloom_filter_type,
                             bloom_max_entries=cfg.bloom_dynamic_max_entries)
            rows = [(o.partition_path, o.file_id, o.base_path, o.base_instant_time, json.dumps(list(o.log_paths)))
                    for o in operations]
            precombine, mode = ctx.config.precombine_field, ctx.config.merge_mode
            file_schema = with_meta_columns(data_schema)
            tasks = ctx.spark.createDataFrame(ctx.spark.sparkContext.parallelize(rows, len(rows)), _OPERATION_DDL)
            with describe(ctx.spark, "merge file slices, write base files"):
                collected = tasks.mapInArrow(lambda b: compact_file_slices(b, spec, precombine, mode, file_schema),
                                             BaseFileStat.spark_ddl()).collect()
            stats = [BaseFileStat.from_row(r) for r in collected]
        with steps.step("commit"):
            tx.commit(stats, data_schema)
    files = tuple(s.to_file_report() for s in sorted(stats, key=lambda s: s.path))
    details["bytes_read"] = sum(s.prev_size for s in stats)
    rows_written = sum(f.rows for f in files)
    return WriteReport("compact", instant.time, rows_in=rows_written, rows_written=rows_written, rows_inserted=0,
                       steps=tuple(steps.steps), files=files, options=dict(cfg), rolled_back=tx.rolled_back,
                       details=details)


# ---- inline compaction --------------------------------------------------------------------------

def inline_settings(config: TableConfig, cfg: Config) -> tuple[bool, int]:
    """(compact inline?, after how many delta commits): the write's options over the table's own.
    ConfigError, before anything is written, for a write that asks for it on a copy-on-write table."""
    enabled = config.compact_inline if cfg.compact_inline is None else cfg.compact_inline
    every = (config.compact_inline_max_delta_commits if cfg.compact_inline_max_delta_commits is None
             else cfg.compact_inline_max_delta_commits)
    if not config.merge_on_read:
        if cfg.compact_inline:
            raise ConfigError(f"hoodie.compact.inline=true: compaction merges log files into base files, and "
                              f"this is a {config.table_type} table, which has none")
        return False, every
    return enabled, every


def delta_commits_since_compaction(timeline: Timeline) -> int:
    """Completed delta commits after the latest completed compaction (a `commit` on a merge-on-read
    table), or since the table began: what Hudi's NUM_COMMITS trigger counts."""
    completed = [i for i in timeline.instants if i.is_completed]
    last = max((i.time for i in completed if i.action is Action.COMMIT), default="")
    return sum(1 for i in completed if i.action is Action.DELTA_COMMIT and i.time > last)


def after_delta_commit(ctx: TableContext, cfg: Config, write: WriteReport) -> WriteReport:
    """`write` (an upsert or a delete that has committed), with the inline compaction its writer ran
    when `hoodie.compact.inline` is on and enough delta commits have completed; `ctx` is the table as
    of after the write. A compaction that fails is rolled back; the delta commit stays, and the
    error says so."""
    enabled, every = inline_settings(ctx.config, cfg)
    if not enabled or write.instant is None:
        return write
    since = delta_commits_since_compaction(ctx.timeline)
    details = {**write.details, "delta_commits_since_compaction": since, "compact_inline_max_delta_commits": every}
    if since < every:
        return replace(write, details=details)
    try:
        compacted = run(ctx, cfg)
    except Exception as exc:
        exc.add_note(f"labformat: the {write.operation} committed as deltacommit {write.instant}; only its inline "
                     "compaction failed, and was rolled back")
        raise
    if compacted.instant is None:  # every slice's logs were rolled back or deleted: nothing to merge
        return replace(write, details={**details, "inline_compaction": "nothing to compact"})
    return replace(write, details=details, compaction=compacted)
