"""Compaction (merge-on-read): a file slice's base file and logs merged into a new base file, one Spark task per slice.

`run` plans (which file slices: the strategy below), requests `<instant>.compaction.requested`
holding the plan, marks it inflight, merges each planned slice's base file and logs in a Spark
task of its own (the same merge a snapshot read does) and writes the result as the file group's
next base file, then publishes `<instant>.commit`. The new slice has no logs; later delta
commits append to it. Older slices stay for time travel until a clean deletes them.

Inline compaction (`hoodie.compact.inline`): a post-commit step of an upsert's or a delete's
transaction (`inline_compaction`) runs a `Compaction` once `hoodie.compact.inline.max.delta.commits`
delta commits have completed since the last compaction (Hudi's NUM_COMMITS trigger); the write's
report carries it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import pyarrow as pa
from pyspark.sql import types as T

from labformat import config as C
from labformat.context import TableConfig, TableContext
from labformat.errors import ConfigError
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.fs_view import check_base_files
from labformat.model.enums import MergeMode, Operation
from labformat.model.file_group import FileSlice
from labformat.model.instant import Action, Instant
from labformat.model.report import CompactionDetails, UpsertDetails, WriteReport
from labformat.read.merge_on_read import merge_file_slice
from labformat.schema import with_meta_columns
from labformat.spark.jobs import describe
from labformat.storage import Storage
from labformat.timeline import Timeline
from labformat.write.arrow_writer import WriteSpec, this_task, write_rows_as_base_file
from labformat.write.operation import OperationRun, Plan, WriteOperation, execute, key_column, write_spec
from labformat.spark.compat import distribute
from labformat.spark.tasks import map_in_arrow

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

    def to_json_dict(self) -> dict[str, Any]:
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
                        mode: MergeMode, schema: T.StructType) -> Iterator[pa.RecordBatch]:
    """The compaction task: merge each file slice it is given and write the merge as a new base file."""
    storage = Storage(spec.base_uri)
    task = this_task()
    for batch in batches:
        for row in batch.to_pylist():
            logs = json.loads(row["logs"])
            merged = merge_file_slice(storage, row["base_path"], logs, precombine_field, mode, schema)
            read = sum(info.size for info in storage.list(row["partition_path"])
                       if info.path in (row["base_path"], *logs))
            stat = write_rows_as_base_file(storage, spec, row["partition_path"], row["file_id"], task, merged,
                                           row["base_instant"], read)
            yield BaseFileStat.record_batch([stat])


@dataclass
class CompactionPlan(Plan):
    operations: list[CompactionOperation] | None = None
    details: CompactionDetails | None = None


class Compaction(WriteOperation[CompactionPlan, BaseFileStat]):
    """Compact the table's file slices with log files (see the module docstring); a report with
    instant None when none has logs."""

    kind = Operation.COMPACT

    def action(self, ctx: TableContext) -> Action:
        return Action.COMPACTION

    def plan(self, run: OperationRun) -> CompactionPlan:
        ctx = run.ctx
        if not ctx.config.merge_on_read:
            raise ConfigError(f"compaction merges log files into base files: {ctx.storage.base_uri} is a "
                              f"{ctx.config.table_type.value} table, which has none")
        with run.step("plan"):
            slices = ctx.file_system_view().latest_file_slices()
            operations = plan_compaction(slices)
            # A missing, truncated or swapped file is named here, before the instant starts.
            check_base_files(ctx.storage, [s for s in slices if s.has_logs])
        plan_json = tuple(o.to_json_dict() for o in operations)
        details = CompactionDetails(STRATEGY, len(operations), sum(len(o.log_paths) for o in operations),
                                    sum(o.log_bytes for o in operations), plan_json)
        return CompactionPlan(nothing_to_do=not operations, operations=operations, details=details,
                              requested={"operations": list(plan_json), "strategy": STRATEGY, "version": 2})

    def write(self, run: OperationRun, plan: CompactionPlan, instant: Instant | None) -> list[BaseFileStat]:
        assert instant is not None and plan.operations is not None  # a plan with operations, its instant started
        ctx = run.ctx
        data_schema = ctx.schema()
        assert data_schema is not None  # a table with log files to compact has commits, and so a schema
        spec = write_spec(ctx, run.options, instant.time, data_schema, key_column(ctx, data_schema))
        rows = [(o.partition_path, o.file_id, o.base_path, o.base_instant_time, json.dumps(list(o.log_paths)))
                for o in plan.operations]
        precombine, mode = ctx.config.precombine_field, ctx.config.merge_mode
        file_schema = with_meta_columns(data_schema)
        tasks = distribute(ctx.spark, rows, _OPERATION_DDL)
        with describe(ctx.spark, "merge file slices, write base files"):
            collected = map_in_arrow(tasks, lambda b: compact_file_slices(b, spec, precombine, mode, file_schema),
                                     BaseFileStat.spark_ddl()).collect()
        return [BaseFileStat.from_row(r) for r in collected]

    def commit(self, run: OperationRun, plan: CompactionPlan, written: list[BaseFileStat]) -> None:
        data_schema = run.ctx.schema()
        assert data_schema is not None  # as in `write`
        run.tx.commit(written, data_schema)

    def report(self, run: OperationRun, plan: CompactionPlan, written: list[BaseFileStat] | None,
               instant: str | None) -> WriteReport:
        if written is None:
            return run.report(None, details=plan.details)
        assert plan.details is not None  # every plan has its details
        rows = sum(s.num_writes for s in written)
        return run.report(instant, written, rows_in=rows, rows_written=rows,
                          details=replace(plan.details, bytes_read=sum(s.prev_size for s in written)))


# ---- inline compaction --------------------------------------------------------------------------

def inline_settings(config: TableConfig, options: C.WriteOptions) -> tuple[bool, int]:
    """(compact inline?, after how many delta commits): the write's options over the table's own.
    ConfigError, before anything is written, for a write that asks for it on a copy-on-write table."""
    enabled = config.compact_inline if options.compact_inline is None else options.compact_inline
    every = (config.compact_inline_max_delta_commits if options.compact_inline_max_delta_commits is None
             else options.compact_inline_max_delta_commits)
    if not config.merge_on_read:
        if options.compact_inline:
            raise ConfigError(f"hoodie.compact.inline=true: compaction merges log files into base files, and "
                              f"this is a {config.table_type.value} table, which has none")
        return False, every
    return enabled, every


def delta_commits_since_compaction(timeline: Timeline) -> int:
    """Completed delta commits after the latest completed compaction (a `commit` on a merge-on-read
    table), or since the table began: what Hudi's NUM_COMMITS trigger counts."""
    completed = [i for i in timeline.instants if i.is_completed]
    last = max((i.time for i in completed if i.action is Action.COMMIT), default="")
    return sum(1 for i in completed if i.action is Action.DELTA_COMMIT and i.time > last)


def inline_compaction(ctx: TableContext, options: C.WriteOptions) -> Callable[[WriteReport], WriteReport]:
    """The post-commit step of an upsert's or a delete's transaction: with `hoodie.compact.inline` on and
    enough delta commits completed, a `Compaction` of its own instant, carried in the write's report.
    A compaction that fails is rolled back; the delta commit stays, and the error says so."""
    def after(write: WriteReport) -> WriteReport:
        enabled, every = inline_settings(ctx.config, options)
        if not enabled or write.instant is None:
            return write
        assert isinstance(write.details, UpsertDetails)  # the report of an upsert or a delete
        now = ctx.refreshed()  # as of after the write
        since = delta_commits_since_compaction(now.timeline)
        details = replace(write.details, delta_commits_since_compaction=since, compact_inline_max_delta_commits=every)
        if since < every:
            return replace(write, details=details)
        try:
            compacted = execute(Compaction(), now, options)
        except Exception as exc:
            exc.add_note(f"labformat: the {write.operation.value} committed as deltacommit {write.instant}; only its "
                         "inline compaction failed, and was rolled back")
            raise
        if compacted.instant is None:  # every slice's logs were rolled back or deleted: nothing to merge
            return replace(write, details=replace(details, inline_compaction="nothing to compact"))
        return replace(write, details=details, compaction=compacted)
    return after
