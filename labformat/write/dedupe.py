"""Step 1 of an upsert: one record per key (the highest precombine value wins), and the count per partition path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.config import WriteOptions
from labformat.context import TableContext
from labformat.errors import InvalidInputError
from labformat.helper_columns import (
    BAD_KEYS, COUNT, KEY, NEWEST, NULL_ORDERING, PART
)
from labformat.model.enums import IndexType, Operation, ParallelismMode
from labformat.spark.partitioning import grouped_counts


@dataclass(frozen=True)
class PartitionCount:
    """Step 1's count of one affected partition: records after deduplication, input rows before."""

    records: int
    rows_in: int
    null_ordering: int = 0  # input rows whose precombine value is null (an upsert refuses them)
    bad_keys: int = 0  # input rows whose record key is null or blank (every write refuses them)


def shuffle_parallelism(input_partitions: int, options: WriteOptions) -> int:
    """Hudi >= 0.13: min(input partitions, hoodie.upsert.shuffle.parallelism) when that is above 0,
    else the input's partition count. Hudi < 0.13 (LEGACY): the option itself, 200 by default."""
    configured = options.upsert_parallelism
    if options.upsert_parallelism_mode is ParallelismMode.LEGACY:
        return configured or 200
    return min(input_partitions, configured) if configured > 0 else input_partitions


@dataclass(frozen=True)
class Keyed:
    """The input with its record key (KEY) and partition path (PART) computed, and what step 1 groups by."""

    rows: DataFrame
    group: list[str]
    bad_key: Column  # 1 for a row whose key is null or blank

    @classmethod
    def of(cls, ctx: TableContext, df: DataFrame, by_key: bool = False) -> "Keyed":
        """`by_key` (a global index): a key is one record however many partitions name it."""
        conf = ctx.config
        keyed = df.withColumn(KEY, ctx.record_key_column(df.schema))
        if conf.partition_field:
            keyed = keyed.withColumn(PART, ctx.partition_path_column(df.schema))
        # Counted with the records, so that a null or blank key is refused before any instant starts,
        # whatever the index (BLOOM's range pruning would meet it only in the tag step's tasks).
        bad_key = (F.col(KEY).isNull() | (F.trim(F.col(KEY)) == "")).cast("long")
        # Group by the key alone when the table has no partition field: a constant partition column
        # would be folded away by the optimizer, the grouping would stop matching the explicit
        # repartition, and Spark would shuffle a second time (at spark.sql.shuffle.partitions).
        return cls(keyed, [PART, KEY] if conf.partition_field and not by_key else [KEY], bad_key)


def combine_records(ctx: TableContext, df: DataFrame, parallelism: int, by_key: bool = False) -> DataFrame:
    """Step 1 (hoodie.combine.before.upsert, the default): one record per (partition path, record key),
    the one with the highest precombine value.

    Ties on the precombine value are broken by the remaining columns, compared in order, so the
    winner never depends on the order rows arrive in. COUNT keeps how many input rows each
    record stood for (the report's deduplicated count), NULL_ORDERING how many of them had a null
    precombine value and BAD_KEYS how many a null or blank key (counted in the same aggregation;
    `partition_counts` sums them, and the upsert refuses the batch, as Hudi refuses a null
    ordering value)."""
    conf = ctx.config
    keyed = Keyed.of(ctx, df, by_key)
    shuffled = keyed.rows.repartition(parallelism, *keyed.group)
    data_columns = list(df.columns)
    # Grouped by the key alone, the winner's partition path travels with its columns.
    carried = [PART] if PART not in keyed.group and PART in keyed.rows.columns else []
    ordering = [conf.precombine_field] + [c for c in data_columns if c != conf.precombine_field]
    orderable = [c for c in ordering if _orderable(df.schema[c].dataType)]
    # Built as SQL text, parsed once: a Column per field costs a few Py4J calls each, and every
    # upsert pays them on the driver (about 500 calls for the drone table's 20 columns).
    if len(orderable) == len(ordering) and not carried:
        newest = F.expr(f"max({_struct_sql(ordering)})")
    else:  # maps cannot be compared: order by the other columns, carry the maps (and PART) along
        newest = F.expr(f"max_by({_struct_sql(ordering + carried)}, {_struct_sql(orderable)})")
    deduped = shuffled.groupBy(*keyed.group).agg(
        newest.alias(NEWEST), F.count(F.lit(1)).alias(COUNT),
        F.sum(F.col(conf.precombine_field).isNull().cast("long")).alias(NULL_ORDERING),
        F.sum(keyed.bad_key).alias(BAD_KEYS))
    # Back out of the struct in the input's column order (the struct's own starts with the precombine field).
    deduped = deduped.selectExpr(*keyed.group, COUNT, NULL_ORDERING, BAD_KEYS,
                                 *[f"{NEWEST}.{_quoted(c)} AS {_quoted(c)}" for c in carried + data_columns])
    return _with_partition(ctx, deduped)


def keys_to_delete(ctx: TableContext, df: DataFrame, parallelism: int, by_key: bool = False) -> DataFrame:
    """Step 1 of a delete: the distinct keys (and partition paths) of the input, each with the rows it
    stood for; a one-field key also under the key field's own name, which the write tasks read."""
    conf = ctx.config
    keyed = Keyed.of(ctx, df, by_key)
    # A global index deletes the key wherever it is: the partition the input names only counts it.
    carried = [F.max(PART).alias(PART)] if PART not in keyed.group and PART in keyed.rows.columns else []
    deduped = _with_partition(ctx, keyed.rows.repartition(parallelism, *keyed.group).groupBy(*keyed.group).agg(
        F.count(F.lit(1)).alias(COUNT), F.sum(keyed.bad_key).alias(BAD_KEYS), *carried))
    if conf.keygen.single_field_key:
        deduped = deduped.withColumn(conf.record_key, F.col(KEY))
    return deduped


def every_row(ctx: TableContext, df: DataFrame) -> DataFrame:
    """Step 1 with hoodie.combine.before.upsert=false: no shuffle; every input row is a record of its
    own, in the same columns and partitions (a key twice in the batch is then stored twice)."""
    conf = ctx.config
    keyed = Keyed.of(ctx, df)
    rows = keyed.rows.withColumn(COUNT, F.lit(1).cast("long")).withColumn(
        NULL_ORDERING, F.col(conf.precombine_field).isNull().cast("long")).withColumn(BAD_KEYS, keyed.bad_key)
    return _with_partition(ctx, rows.select(*keyed.group, COUNT, NULL_ORDERING, BAD_KEYS, *df.columns))


def rows_to_buckets(ctx: TableContext, df: DataFrame) -> DataFrame:
    """Step 1 of a BUCKET table's bulk insert: every row kept, keyed for routing to its bucket."""
    keyed = Keyed.of(ctx, df)
    return _with_partition(ctx, keyed.rows.withColumn(COUNT, F.lit(1).cast("long")).withColumn(BAD_KEYS, keyed.bad_key))


def deduplicate(ctx: TableContext, df: DataFrame, options: WriteOptions, operation: Operation,
                input_count: int, by_key: bool = False) -> tuple[DataFrame, int]:
    """Step 1 for `operation`: (the records, the partitions they are in). `input_count`: the
    partitions `df` is read in; a shuffle takes `shuffle_parallelism` of them (at least one: an
    empty input can have none). `by_key` (a global index): one record per key, whatever partition."""
    parallelism = max(1, shuffle_parallelism(input_count, options))
    if operation is Operation.BULK_INSERT:
        return rows_to_buckets(ctx, df), input_count
    if operation is Operation.DELETE:
        return keys_to_delete(ctx, df, parallelism, by_key), parallelism
    if not options.combine_before_upsert:
        return every_row(ctx, df), input_count
    return combine_records(ctx, df, parallelism, by_key), parallelism


def _quoted(name: str) -> str:
    """A column name as a SQL identifier: backticks around it, its own backticks doubled."""
    return "`" + name.replace("`", "``") + "`"


def _struct_sql(names: list[str]) -> str:
    """`struct(`a`, `b`)` for the named columns: field names are the columns' names."""
    return "struct(" + ", ".join(_quoted(n) for n in names) + ")"


def _orderable(dtype: T.DataType) -> bool:
    """Whether Spark can compare values of this type (a map, or anything holding one, cannot)."""
    if isinstance(dtype, T.MapType):
        return False
    if isinstance(dtype, T.ArrayType):
        return _orderable(dtype.elementType)
    if isinstance(dtype, T.StructType):
        return all(_orderable(f.dataType) for f in dtype.fields)
    return True


def _with_partition(ctx: TableContext, df: DataFrame) -> DataFrame:
    return df if ctx.config.partition_field else df.withColumn(PART, F.lit(""))


def partition_counts_query(deduped: DataFrame, tasks: int) -> DataFrame:
    """Records, input rows, null precombine values and null or blank keys per partition path (PART,
    records, rows_in, null_ordering, bad_keys), counted in `tasks` tasks; not run here."""
    sums = {"records": None, "rows_in": COUNT, "null_ordering": NULL_ORDERING, "bad_keys": BAD_KEYS}
    counted = grouped_counts(deduped, [PART], {k: c for k, c in sums.items() if c is None or c in deduped.columns},
                             tasks)
    for name in ("null_ordering", "bad_keys"):  # columns a delete's or a bucket load's records lack
        if sums[name] not in deduped.columns:
            counted = counted.withColumn(name, F.lit(0).cast("long"))
    return counted


def partition_counts(deduped: DataFrame, tasks: int) -> dict[str, PartitionCount]:
    """The affected partitions with their counts; the one pass that also fills the persisted records."""
    return counts_by_partition((r[PART], r.records, r.rows_in, r.null_ordering, r.bad_keys)
                               for r in partition_counts_query(deduped, tasks).collect())


def counts_by_partition(rows: Iterable[tuple[str, int, int | None, int | None, int | None]]
                        ) -> dict[str, PartitionCount]:
    return {part: PartitionCount(records, rows_in or 0, nulls or 0, bad or 0)
            for part, records, rows_in, nulls, bad in rows}


def fuses_count_into_tag(ctx: TableContext, index_type: IndexType, operation: Operation) -> bool:
    """Whether step 1's count runs inside the tag step's Spark job, saving a job per upsert.

    Only without a partition field: the one affected partition is then the table's root, known
    before any count, so step 2 and the BLOOM lookup need nothing from step 1 but its lazy
    records. With a partition field, step 2 lists only the partitions step 1 found, so the
    count runs first, in a job of its own (as Hudi counts records per partition first).
    """
    conf = ctx.config
    return (index_type is IndexType.BLOOM and conf.populate_meta_fields and not conf.partition_field
            and operation in (Operation.UPSERT, Operation.DELETE))


def refuse_bad_rows(counts: dict[str, PartitionCount], precombine_field: str, record_key: str) -> None:
    """InvalidInputError when step 1 counted input rows with a null or blank record key, or with a null
    precombine value: Hudi refuses a null ordering value, which would otherwise replace the stored
    record whatever its own value."""
    bad = sum(c.bad_keys for c in counts.values())
    if bad:
        raise InvalidInputError(f"null or empty record keys: {bad} input row(s) (record key {record_key!r}); "
                                "table unchanged")
    nulls = sum(c.null_ordering for c in counts.values())
    if nulls:
        raise InvalidInputError(f"{nulls} input row(s) have a null precombine value (column {precombine_field!r}); "
                                "an upsert needs one to order records, table unchanged")
