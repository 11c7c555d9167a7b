"""Metadata rebuild (Hudi's INDEX operation): the latest commit's missing, stale or corrupt entries, recomputed from base files.

The files are read by Spark tasks (`metadata.rebuild.stats_of_files`; the driver only lists them);
the transaction then replaces the latest completed instant's entries under the table lock, unless
another write completed meanwhile. No instant is created: no snapshot changes. Readers in the
meantime fall back to footers, as they do for any metadata they cannot trust.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Row

from labformat.metadata import STATS_DDL, record_index, stats_of_files
from labformat.model.enums import Operation
from labformat.model.file_group import FileSlice
from labformat.model.instant import Instant
from labformat.model.report import IndexDetails, WriteReport
from labformat.write.operation import OperationRun, Plan, WriteOperation
from labformat.write.transaction import record_index_asked
from labformat.spark.compat import default_parallelism
from labformat.spark.tasks import map_in_arrow


@dataclass
class RebuildPlan(Plan):
    latest: Instant | None = None  # the instant whose entries are rebuilt: the last to complete
    slices: list[FileSlice] | None = None


class MetadataRebuild(WriteOperation[RebuildPlan, Row]):
    """Recompute the metadata table's entries for the latest completed commit from the base files."""

    kind = Operation.INDEX
    write_step = "read_base_files"

    def plan(self, run: OperationRun) -> RebuildPlan:
        ctx = run.ctx
        with run.step("plan"):
            # The snapshot readers take is the last completed instant's (see MetadataReader), not the latest time's.
            completed = ctx.timeline.completed_writes_by_completion()
            latest = completed[-1] if completed else None
            if latest is None or not ctx.config.metadata_enable:
                return RebuildPlan(nothing_to_do=True)
            return RebuildPlan(needs_instant=False, latest=latest, slices=ctx.file_system_view().latest_file_slices())

    def write(self, run: OperationRun, plan: RebuildPlan, instant: Instant | None) -> list[Row]:
        assert plan.latest is not None and plan.slices is not None  # a plan with something to do has both
        ctx, spark = run.ctx, run.ctx.spark
        schema = ctx.schema()
        assert schema is not None  # the table has a completed commit (plan.latest): it has a schema
        columns = tuple(f.name for f in schema.fields)
        base_uri = ctx.storage.base_uri
        paths = spark.createDataFrame([(s.path,) for s in plan.slices], "path string")
        paths = paths.repartition(max(1, min(len(plan.slices), 2 * default_parallelism(spark))))
        # Spark Rows: their fields read as attributes, as write_metadata reads a write task's BaseFileStat.
        stats = map_in_arrow(paths, lambda batches: stats_of_files(batches, base_uri, columns), STATS_DDL).collect()
        if record_index.exists(ctx.storage) or record_index_asked(ctx, run.options):
            # A new base as of the same instant; readers take it over any older one.
            shards = record_index.shards_of(ctx.storage) or run.options.record_index_shards
            record_index.build(spark, ctx.storage, plan.latest.time, plan.slices, shards)
        return stats

    def commit(self, run: OperationRun, plan: RebuildPlan, written: list[Row]) -> None:
        assert plan.latest is not None and plan.slices is not None  # a plan with something to do has both
        run.tx.replace_metadata(plan.latest, plan.slices, written, expected_latest=plan.latest)

    def report(self, run: OperationRun, plan: RebuildPlan, written: list[Row] | None, instant: str | None) -> WriteReport:
        files = len(plan.slices or ())
        return run.report(None, details=IndexDetails(files if written is not None else 0,
                                                    plan.latest.time if plan.latest is not None else None))
