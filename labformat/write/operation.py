"""The operation protocol: every write and table service as plan (driver, metadata only), tasks, commit, report.

`execute(operation, ctx, options)` runs any `WriteOperation` the same way::

    plan = operation.plan(run)              # its own named steps; metadata only, no instant yet
    if plan.nothing_to_do:                  # an empty write or a service with nothing to do
        -> the report of nothing (instant None), no instant left behind
    start_instant: tx.start(plan.requested) # or tx.resume(plan.resume): a dead writer's instant
    <write_step>:  operation.write(...)     # Spark tasks; their write stats come back
    commit:        operation.commit(...)    # the transaction checks, writes the metadata, publishes
    report = operation.report(...)
    then the transaction's post-commit steps (inline compaction), each an operation of its own

The transaction (`write/transaction.py`) is the only code that takes the table lock, checks it,
runs the heartbeat and the crash points, and completes an instant; an operation only plans, runs
tasks and says what to commit. Bulk insert, upsert and delete, compaction, clustering, clean and
the metadata rebuild are the operations.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from labformat import config as C
from labformat.context import TableContext
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.helper_columns import KEY
from labformat.model.enums import Operation
from labformat.model.instant import Action, Instant
from labformat.model.report import FileReport, WriteReport
from labformat.schema import avro_schema_json
from labformat.spark.jobs import StepRecorder
from labformat.write.arrow_writer import WriteSpec
from labformat.write.transaction import WriteTransaction


@dataclass
class Plan:
    """What planning decided: whether there is anything to do, what the requested instant holds (or
    which dead writer's instant to resume), and whether the operation needs an instant at all."""

    nothing_to_do: bool = False
    requested: dict[str, Any] | None = None  # the body of `<instant>.<action>.requested` beside the operation type
    resume: Instant | None = None  # finish this pending instant (a dead clean's) instead of starting one
    needs_instant: bool = True  # False: the operation changes no snapshot (the metadata rebuild)


@dataclass
class OperationRun:
    """One operation as it runs: the table as of its start, its options, its steps and its transaction."""

    ctx: TableContext
    options: C.WriteOptions
    steps: StepRecorder
    tx: WriteTransaction
    cleanup: list[DataFrame] = field(default_factory=list)  # persisted DataFrames released when the run ends

    def step(self, name: str) -> AbstractContextManager[None]:
        return self.steps.step(name)

    def report(self, instant: str | None, stats: Iterable[BaseFileStat] = (), **fields: Any) -> WriteReport:
        """The operation's report: the fields every report has (steps, files from the write stats,
        options, the dead writers' instants rolled back) and the operation's own `fields`."""
        defaults = {"rows_in": 0, "rows_written": 0, "rows_inserted": 0}
        return WriteReport(self.tx.operation, instant, **{**defaults, **fields}, steps=tuple(self.steps.steps),
                           files=file_reports(stats), options=dict(self.options), rolled_back=self.tx.rolled_back)


def file_reports(stats: Iterable[BaseFileStat]) -> tuple[FileReport, ...]:
    """The report's entries of the files a write's tasks wrote, in path order."""
    return tuple(s.to_file_report() for s in sorted(stats, key=lambda s: s.path))


PlanT = TypeVar("PlanT", bound=Plan)
WrittenT = TypeVar("WrittenT")  # what one write task reports: a BaseFileStat, a deleted file, ...


class WriteOperation(ABC, Generic[PlanT, WrittenT]):
    """One kind of operation; `execute` calls its hooks in the protocol's order. Generic in its plan
    (`PlanT`, what `plan` returns and the other hooks get) and in what its tasks report (`WrittenT`)."""

    kind: Operation  # a class attribute; an instance's own where one class runs several (Upsert)
    write_step: ClassVar[str] = "write"  # the step its tasks run in

    def action(self, ctx: TableContext) -> Action:
        """The timeline action of its instant: a `commit`, or a `deltacommit` on a merge-on-read table."""
        return Action.DELTA_COMMIT if ctx.config.merge_on_read else Action.COMMIT

    @abstractmethod
    def plan(self, run: OperationRun) -> PlanT:
        """Validate and plan on the driver, in named steps (`run.step`); no instant exists yet."""

    @abstractmethod
    def write(self, run: OperationRun, plan: PlanT, instant: Instant | None) -> list[WrittenT]:
        """Run the Spark tasks; their stats (one per file written, or deleted). Empty: nothing written.
        `instant` is the one `execute` started; None only for a plan that needs none (`needs_instant`)."""

    @abstractmethod
    def commit(self, run: OperationRun, plan: PlanT, written: list[WrittenT]) -> None:
        """Hand the stats to the transaction (`run.tx.commit`, `publish`, ...)."""

    @abstractmethod
    def report(self, run: OperationRun, plan: PlanT, written: list[WrittenT] | None, instant: str | None) -> WriteReport:
        """The report; `written` None and `instant` None when nothing was to do or nothing was written."""


def execute(operation: WriteOperation[Any, Any], ctx: TableContext, options: C.WriteOptions) -> WriteReport:
    """Run `operation` through the protocol (the module docstring), then the post-commit steps the
    transaction collected; its report, with theirs attached. Any operation (`WriteOperation[Any, Any]`):
    its plan and task results pass only between its own hooks."""
    run = OperationRun(ctx, options, StepRecorder(ctx.spark),
                       WriteTransaction(ctx, operation.kind, operation.action(ctx), options))
    try:
        with run.tx as tx:
            plan = operation.plan(run)
            if plan.nothing_to_do:
                tx.abandon()
                return operation.report(run, plan, None, None)
            instant = None
            if plan.needs_instant:
                with run.step("start_instant"):
                    instant = tx.resume(plan.resume) if plan.resume is not None else tx.start(plan.requested)
                if instant is None:  # the dead writer's instant was finished or taken meanwhile
                    return operation.report(run, plan, None, None)
            with run.step(operation.write_step):
                written = operation.write(run, plan, instant)
            if not written and plan.needs_instant:  # learnt only from its tasks (a bulk insert's empty input)
                tx.abandon()
                return operation.report(run, plan, None, None)
            with run.step("commit"):
                operation.commit(run, plan, written)
    finally:
        for frame in run.cleanup:
            frame.unpersist()
    report = operation.report(run, plan, written, instant.time if instant is not None else None)
    for after in tx.after_commit:
        report = after(report)
    return report


def key_column(ctx: TableContext, data_schema: T.StructType) -> str:
    """The column write tasks read record keys from: the key field itself when a key is its string
    value, else the key the key generator computed in Spark (KEY): pyarrow would render a timestamp,
    a double or a decimal otherwise than Spark's cast does."""
    conf = ctx.config
    if conf.keygen.single_field_key and (conf.record_key not in data_schema.names or
                                         isinstance(data_schema[conf.record_key].dataType, T.StringType)):
        return conf.record_key
    return KEY


def write_spec(ctx: TableContext, options: C.WriteOptions, instant_time: str, data_schema: T.StructType,
               record_key: str, *, max_file_size: int | None = None, log_blocks: bool = False) -> WriteSpec:
    """What every write task of this table needs (`WriteSpec`), from the table and the options: one
    place, so that no two operations write files differently. `log_blocks`: the Avro schema of
    merge-on-read log data blocks too."""
    conf = ctx.config
    return WriteSpec(
        base_uri=ctx.storage.base_uri, instant_time=instant_time, record_key=record_key,
        data_columns=tuple(f.name for f in data_schema.fields),
        max_file_size=options.max_file_size if max_file_size is None else max_file_size,
        compression=options.compression_codec, bloom_fpp=options.bloom_fpp,
        bloom_num_entries=options.bloom_num_entries, collect_bloom=conf.bloom_filter_enable,
        meta_fields=conf.populate_meta_fields, keygen=conf.keygen, bloom_type=options.bloom_filter_type,
        bloom_max_entries=options.bloom_dynamic_max_entries,
        log_schema=avro_schema_json(data_schema, conf.name, meta_columns=True) if log_blocks else None,
    )
