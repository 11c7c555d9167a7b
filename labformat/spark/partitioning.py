"""Shuffles whose task counts the plan names, never the session's: labformat leaves a caller's SparkSession as it found it.

Spark gives a shuffle without a count of its own `spark.sql.shuffle.partitions` tasks (200 unless
the caller set it), and a join of a side already hash-partitioned with one that is not shuffles
both into max(that side's count, spark.sql.shuffle.partitions) (EnsureRequirements). So every
join and grouping of a write names its count here: the side step 1 partitioned by the keys stays
where it is, and the other side is hash-partitioned by the same keys into as many tasks.

Left to Spark: a batch read in a single partition gives step 1 a single task, and Spark 4.x plans a
join of such a cached single partition with a shuffled side at spark.sql.shuffle.partitions
whatever counts the plan names (seen with the SIMPLE and BLOOM joins; a smaller query of the same
shape keeps them). The session's settings are read there, still never changed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, Sequence

from pyspark.sql import DataFrame

from labformat.spark.compat import default_parallelism, is_connect
from labformat.spark.tasks import map_in_arrow

if TYPE_CHECKING:
    import pyarrow as pa

# "hashpartitioning(_lf_part#12, _lf_key#13, 4)": the column names and the count. A column aliased in a
# projection shows as "(hashpartitioning(a#1, 4) or hashpartitioning(b#2, 4))".
_HASH = re.compile(r"hashpartitioning\((?P<columns>[^()]*), (?P<n>\d+)\)")


def hash_partitionings(df: DataFrame) -> list[tuple[tuple[str, ...], int]]:
    """Every (columns, task count) `df`'s physical plan is hash-partitioned by, ((), 1) for a single
    partition (which any keys' grouping accepts), none otherwise or on Spark Connect (whose plan is
    the server's)."""
    if is_connect(df.sparkSession):
        return []
    # The physical plan before adaptive execution wraps it (an AdaptiveSparkPlan says nothing until
    # it has run) and before its preparation rules: planning only, no Spark job.
    text = df._jdf.queryExecution().sparkPlan().outputPartitioning().toString()
    if text == "SinglePartition":
        return [((), 1)]
    return [(tuple(c.strip().split("#", 1)[0] for c in m["columns"].split(",")), int(m["n"]))
            for m in _HASH.finditer(text)]


def planned_partitions(df: DataFrame) -> int:
    """The partitions `df`'s plan says it has, or the cores' when it cannot say (a file scan)."""
    if not is_connect(df.sparkSession):
        n = df._jdf.queryExecution().sparkPlan().outputPartitioning().numPartitions()
        if n > 0:
            return int(n)
    return default_parallelism(df.sparkSession)


def _is_partitioned(found: list[tuple[tuple[str, ...], int]], keys: Sequence[str], n: int) -> bool:
    return ((tuple(keys), n) in found) or (n == 1 and ((), 1) in found)


def _repartition(df: DataFrame, keys: Sequence[str], n: int) -> DataFrame:
    # One task takes every key: a plain single partition (a hash repartition into one can come out
    # planned at spark.sql.shuffle.partitions under a limit).
    return df.repartition(1) if n == 1 else df.repartition(n, *keys)


def partitioned_by(df: DataFrame, keys: Sequence[str], n: int) -> DataFrame:
    """`df` hash-partitioned by `keys` (in that order) into `n` tasks: itself when its plan already
    is, else repartitioned (an explicit count, which adaptive execution keeps)."""
    return df if _is_partitioned(hash_partitionings(df), keys, n) else _repartition(df, keys, n)


def join_partitioned(left: DataFrame, right: DataFrame, keys: Sequence[str], how: str = "left",
                     n: int | None = None, hint: str | None = None) -> DataFrame:
    """`left` joined with `right` on `keys`, both hash-partitioned by the keys into `n` tasks
    (default: as many as `left` has). When step 1 partitioned `left` so, only `right` moves; `right`
    (a lookup's result, never partitioned by the keys) is always repartitioned. `hint`: a join
    strategy hint on `right`, put after its repartition, where the join sees it."""
    keys = list(keys)
    found = hash_partitionings(left)
    if n is None:
        same = [count for columns, count in found if columns in (tuple(keys), ())]
        n = same[0] if same else planned_partitions(left)
    n = max(1, n)
    if not _is_partitioned(found, keys, n):
        left = _repartition(left, keys, n)
    right = _repartition(right, keys, n)
    return left.join(right.hint(hint) if hint else right, on=keys, how=how)


def grouped_counts(df: DataFrame, by: Sequence[str], sums: dict[str, str | None], n: int) -> DataFrame:
    """Per group of `by`: each of `sums` (output name -> the column it sums, None: the rows), in `n`
    tasks. Each task first sums its own rows (as Spark's map-side aggregation would, and as Hudi's
    countByKey combines), so only a row per group and task moves, however skewed the groups."""
    from pyspark.sql import functions as F

    by = list(by)
    schema = ", ".join([f"`{c}` {df.schema[c].dataType.simpleString()}" for c in by]
                       + [f"`{name}` bigint" for name in sums])
    narrow = df.select(*by, *[c for c in dict.fromkeys(c for c in sums.values() if c) if c not in by])
    partial = map_in_arrow(narrow, lambda batches: _partial_sums(batches, by, sums), schema)
    return _repartition(partial, by, max(1, n)).groupBy(*by).agg(
        *[F.sum(F.col(name)).alias(name) for name in sums])


def _partial_sums(batches: Iterator[pa.RecordBatch], by: list[str],
                  sums: dict[str, str | None]) -> Iterator[pa.RecordBatch]:
    """Task: its rows summed per group (pyarrow), one batch out."""
    import pyarrow as pa

    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    table = pa.concat_tables(tables)
    table = table.append_column("_lf_one", pa.repeat(pa.scalar(1, pa.int64()), table.num_rows))
    columns = {name: (column or "_lf_one") for name, column in sums.items()}
    grouped = table.group_by(by, use_threads=False).aggregate([(c, "sum") for c in dict.fromkeys(columns.values())])
    out = [grouped.column(c) for c in by] + [grouped.column(f"{columns[name]}_sum").cast(pa.int64())
                                             for name in sums]
    yield from pa.Table.from_arrays(out, names=by + list(sums)).to_batches()
