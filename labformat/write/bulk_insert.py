"""Bulk insert: sort (or not) by the chosen mode, write new file groups in Spark tasks, commit."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.config import Config
from labformat.context import TableContext
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.index.base import KEY, PART
from labformat.model.enums import IndexType, Operation
from labformat.model.report import WriteReport
from labformat.spark.jobs import WRITE_BASE_FILES, StepRecorder, describe, input_partitions
from labformat.write import upsert
from labformat.write.arrow_writer import WriteSpec, write_new_file_groups
from labformat.write.transaction import WriteTransaction


def run(ctx: TableContext, df: DataFrame, cfg: Config) -> WriteReport:
    """Write `df` as new file groups, without index lookups or deduplication (Hudi's bulk_insert).

    A BUCKET table's bulk insert goes through the upsert's routing instead (see `upsert.run`),
    so that every row lands in its bucket's file group.
    """
    if ctx.config.index_type == IndexType.BUCKET:
        return upsert.run(ctx, df, cfg, Operation.BULK_INSERT)
    steps = StepRecorder(ctx.spark)
    with WriteTransaction(ctx, Operation.BULK_INSERT, WriteTransaction.action_for(ctx), options=cfg) as tx:
        with steps.step("validate"):
            ctx.validate_input(df, need_precombine=False)
            data_schema, schema_changes = ctx.schema_for_write(df, cfg.reconcile_schema)
            df = ctx.conform_input(df, data_schema)
        with steps.step("start_instant"):
            instant = tx.start()
        with steps.step("write"):
            stats = write_bulk_insert(ctx, df, data_schema, cfg, instant.time)
        if not stats:  # an empty input: its write tasks wrote nothing
            return tx.abandon(steps=tuple(steps.steps), options=dict(cfg))
        with steps.step("commit"):
            tx.commit(stats, data_schema)
    files = tuple(s.to_file_report() for s in sorted(stats, key=lambda s: s.path))
    rows = sum(f.rows for f in files)
    return WriteReport(Operation.BULK_INSERT.value, instant.time, rows_in=rows, rows_written=rows, rows_inserted=rows,
                       steps=tuple(steps.steps), files=files, options=dict(cfg), rolled_back=tx.rolled_back,
                       details={"schema_changes": schema_changes})


def order_for_sort_mode(df: DataFrame, mode: str, record_key: str, parallelism: int) -> DataFrame:
    """Lay rows out across write tasks as Hudi's `hoodie.bulkinsert.sort.mode` does.

    GLOBAL_SORT range-partitions by (partition path, key), so each task, and so each base
    file, holds its own slice of the key space: the clean key ranges that range pruning
    relies on later. The other modes leave ranges overlapping.
    """
    tasks = parallelism or input_partitions(df)
    if mode == "GLOBAL_SORT":
        return df.repartitionByRange(tasks, PART, record_key).sortWithinPartitions(PART, record_key)
    if mode == "PARTITION_SORT":
        source = df.repartition(parallelism) if parallelism else df
        return source.sortWithinPartitions(PART, record_key)
    if mode == "PARTITION_PATH_REPARTITION":
        return df.repartition(tasks, PART)
    return df.repartition(parallelism) if parallelism else df  # NONE


def write_bulk_insert(ctx: TableContext, df: DataFrame, data_schema: T.StructType, cfg: Config,
                      instant_time: str) -> list[BaseFileStat]:
    """Run the write tasks; returns the write-stat rows (one per base file), collected as metadata."""
    data_columns = tuple(f.name for f in data_schema.fields)
    record_key = upsert.key_column(ctx, data_schema)
    spec = WriteSpec(
        base_uri=ctx.storage.base_uri,
        instant_time=instant_time,
        record_key=record_key,
        data_columns=data_columns,
        max_file_size=cfg.max_file_size,
        compression=cfg.compression_codec,
        bloom_fpp=cfg.bloom_fpp,
        bloom_num_entries=cfg.bloom_num_entries,
        collect_bloom=ctx.config.bloom_filter_enable,
        meta_fields=ctx.config.populate_meta_fields,
        keygen=ctx.config.keygen,
        bloom_type=cfg.bloom_filter_type,
        bloom_max_entries=cfg.bloom_dynamic_max_entries,
    )
    # A computed key (complex keys) travels beside the data columns; a one-field key is read from its field.
    computed = [ctx.record_key_column(df.schema).alias(KEY)] if record_key == KEY else []
    prepared = df.select(*[F.col(c) for c in data_columns], ctx.partition_path_column(df.schema).alias(PART),
                         *computed)
    ordered = order_for_sort_mode(prepared, cfg.bulk_insert_sort_mode, record_key, cfg.bulk_insert_parallelism)
    with describe(df.sparkSession, "read input", WRITE_BASE_FILES, before="sample key ranges"):
        rows = ordered.mapInArrow(lambda batches: write_new_file_groups(batches, spec),
                                  BaseFileStat.spark_ddl()).collect()
    return [BaseFileStat.from_row(row) for row in rows]
