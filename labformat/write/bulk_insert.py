"""Bulk insert: sort (or not) by the chosen mode, write new file groups in Spark tasks, commit."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.config import WriteOptions
from labformat.context import TableContext
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.helper_columns import KEY, PART
from labformat.model.enums import Operation, SortMode
from labformat.model.instant import Instant
from labformat.model.report import BulkInsertDetails, WriteReport
from labformat.spark.compat import partitions_of
from labformat.spark.jobs import WRITE_BASE_FILES, describe
from labformat.write.arrow_writer import write_new_file_groups
from labformat.write.operation import OperationRun, Plan, WriteOperation, key_column, write_spec
from labformat.write.transaction import record_index_asked
from labformat.spark.tasks import map_in_arrow


@dataclass
class BulkInsertPlan(Plan):
    df: DataFrame | None = None  # the input, in the table's (evolved) schema
    data_schema: T.StructType | None = None
    schema_changes: tuple[str, ...] = ()
    input_partitions: int | None = None  # counted in the plan when the sort mode needs the count anyway


class BulkInsert(WriteOperation[BulkInsertPlan, BaseFileStat]):
    """Write `df` as new file groups, without index lookups or deduplication (Hudi's bulk_insert).

    A BUCKET table's bulk insert is an `Upsert` of kind BULK_INSERT instead (`Table.bulk_insert`), so
    that every row lands in its bucket's file group. An empty input is known only from the write
    tasks (knowing earlier would cost a pass over it): its instant is then abandoned.
    """

    kind = Operation.BULK_INSERT

    def __init__(self, df: DataFrame) -> None:
        self.df = df

    def plan(self, run: OperationRun) -> BulkInsertPlan:
        ctx = run.ctx
        with run.step("validate"):
            record_index_asked(ctx, run.options)
            ctx.validate_input(self.df, need_precombine=False)
            data_schema, changes = ctx.schema_for_write(self.df, run.options.reconcile_schema)
        df = ctx.conform_input(self.df, data_schema)
        options = run.options
        partitions = (partitions_of(df) if counts_input_partitions(options.bulk_insert_sort_mode,
                                                                        options.bulk_insert_parallelism,
                                                                        ctx.partitioned) else None)
        # An input of no partitions (`createDataFrame(sc.emptyRDD(), schema)`) is empty for sure: no
        # instant. Other empty inputs are known only from the write tasks, which `execute` abandons.
        return BulkInsertPlan(nothing_to_do=partitions == 0, df=df, data_schema=data_schema,
                              schema_changes=changes, input_partitions=partitions)

    def write(self, run: OperationRun, plan: BulkInsertPlan, instant: Instant | None) -> list[BaseFileStat]:
        assert instant is not None and plan.df is not None and plan.data_schema is not None  # a plan to write
        return write_bulk_insert(run.ctx, plan.df, plan.data_schema, run.options, instant.time, plan.input_partitions)

    def commit(self, run: OperationRun, plan: BulkInsertPlan, written: list[BaseFileStat]) -> None:
        assert plan.data_schema is not None  # a plan to write
        run.tx.commit(written, plan.data_schema)

    def report(self, run: OperationRun, plan: BulkInsertPlan, written: list[BaseFileStat] | None,
               instant: str | None) -> WriteReport:
        rows = sum(s.num_writes for s in written or ())
        return run.report(instant, written or (), rows_in=rows, rows_written=rows, rows_inserted=rows,
                          details=BulkInsertDetails(plan.schema_changes))


def _shuffles(mode: SortMode, partitioned: bool) -> bool:
    """Whether `mode` moves rows between tasks: GLOBAL_SORT always; PARTITION_PATH_REPARTITION and
    PARTITION_SORT on a partitioned table (by partition path, as Hudi's row writer does since 0.13)."""
    return mode is SortMode.GLOBAL_SORT or (
        partitioned and mode in (SortMode.PARTITION_PATH_REPARTITION, SortMode.PARTITION_SORT))


def counts_input_partitions(mode: SortMode, parallelism: int, partitioned: bool = True) -> bool:
    """Whether laying rows out in `mode` reads the input's partition count (`order_for_sort_mode`)."""
    return not parallelism if _shuffles(mode, partitioned) else bool(parallelism)


def order_for_sort_mode(df: DataFrame, mode: SortMode, record_key: str, parallelism: int,
                        partitions: int | None = None, partitioned: bool = True) -> DataFrame:
    """Lay rows out across write tasks as Hudi's `hoodie.bulkinsert.sort.mode` does.

    GLOBAL_SORT range-partitions by (partition path, key), so each task, and so each base
    file, holds its own slice of the key space: the clean key ranges that range pruning
    relies on later. The other modes leave ranges overlapping. On a partitioned table
    PARTITION_PATH_REPARTITION and PARTITION_SORT hash-partition rows by partition path, so a
    task holds whole table partitions (Hudi's row writer since 0.13, RepartitioningBulkInsertPartitionerBase;
    its RDD path and older releases coalesce on any table); on a
    table without partitions they coalesce like NONE (`_tasks_without_sort`). `partitions`: the
    input's partition count, when the caller counted it already.
    """
    def tasks() -> int:
        # Spark refuses a repartition into 0 partitions, which an input of none would ask for.
        return parallelism or max(1, partitions_of(df) if partitions is None else partitions)

    if mode is SortMode.GLOBAL_SORT:
        return df.repartitionByRange(tasks(), PART, record_key).sortWithinPartitions(PART, record_key)
    if _shuffles(mode, partitioned):
        source = df.repartition(tasks(), PART)
    else:
        source = _tasks_without_sort(df, parallelism, partitions)
    if mode is SortMode.PARTITION_SORT:
        return source.sortWithinPartitions(PART, record_key)
    return source  # NONE, PARTITION_PATH_REPARTITION


def _tasks_without_sort(df: DataFrame, parallelism: int, partitions: int | None = None) -> DataFrame:
    """`df` in at most `parallelism` tasks, moving no row (NONE and PARTITION_SORT).

    A coalesce: fewer tasks than the input has partitions merge neighbouring partitions, no shuffle;
    more leave the input's count, since a coalesce never splits a partition (4 input partitions with
    parallelism 6 run 4 write tasks and write 4 files), as Hudi's PartitionSortPartitioner(WithRows)
    and PARTITION_PATH_REPARTITION do on a table without partitions. Hudi's NONE ignores the parallelism
    since 0.12.2 (HUDI-5338: its input's partitions as they come); labformat's coalesces like
    PARTITION_SORT, so that `bulk_insert_parallelism` bounds the files in every sort mode.
    """
    if not parallelism:
        return df
    if partitions is None:
        partitions = partitions_of(df)
    return df.coalesce(parallelism) if parallelism < partitions else df


def write_bulk_insert(ctx: TableContext, df: DataFrame, data_schema: T.StructType, options: WriteOptions,
                      instant_time: str, partitions: int | None = None) -> list[BaseFileStat]:
    """Run the write tasks; returns the write-stat rows (one per base file), collected as metadata."""
    record_key = key_column(ctx, data_schema)
    spec = write_spec(ctx, options, instant_time, data_schema, record_key)
    # A computed key (complex keys, a key that is no string) travels beside the data columns; a
    # one-field string key is read from its field.
    computed = [ctx.record_key_column(df.schema).alias(KEY)] if record_key == KEY else []
    prepared = df.select(*[F.col(c) for c in spec.data_columns], ctx.partition_path_column(df.schema).alias(PART),
                         *computed)
    ordered = order_for_sort_mode(prepared, options.bulk_insert_sort_mode, record_key, options.bulk_insert_parallelism,
                                  partitions, ctx.partitioned)
    with describe(df.sparkSession, "read input", WRITE_BASE_FILES, before="sample key ranges"):
        rows = map_in_arrow(ordered, lambda batches: write_new_file_groups(batches, spec),
                            BaseFileStat.spark_ddl()).collect()
    return [BaseFileStat.from_row(row) for row in rows]
