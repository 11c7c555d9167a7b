"""What a classic SparkSession and a Spark Connect session do differently, behind one set of functions.

A classic session drives a JVM in this process through py4j (`sparkContext`, `_jsc`, `_jdf`); a
Spark Connect session (`sc://...`, Spark 4's client-server mode, what managed platforms hand out)
has only the DataFrame API over gRPC. labformat's operations use these helpers wherever the two
differ, so both run every public operation. Where Connect cannot give a number a classic session
measures (a Spark accumulator, the Spark UI's task timings), the report says `NOT_ON_CONNECT`
instead of a number.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from labformat.model.report import NOT_ON_CONNECT
from labformat.spark.tasks import map_in_arrow

__all__ = ["NOT_ON_CONNECT", "is_connect", "master", "partitions_of", "default_parallelism", "distribute", "ship"]

_PARALLELISM: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()


def is_connect(spark_or_df: Any) -> bool:
    """True for a Spark Connect session (or a DataFrame of one): no JVM on this side."""
    return type(spark_or_df).__module__.startswith("pyspark.sql.connect")


def master(spark: SparkSession) -> str:
    """The session's master URL (`local[2]`, `spark://host:7077`, `yarn`); a Connect session's server's."""
    if is_connect(spark):
        return spark.conf.get("spark.master", None) or "(Spark Connect server)"
    return spark.sparkContext.master or "(no master)"


def _one_row(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"n": [1]}, schema=pa.schema([("n", pa.int64())]))


def partitions_of(df: DataFrame) -> int:
    """How many partitions Spark computes `df` in.

    Classic: the physical plan's RDD, without running a job. Connect has no RDD to ask, so one
    row per partition is counted (a Python task runs even for an empty partition): a job over
    the input's cheapest projection.
    """
    if not is_connect(df):
        jdf = getattr(df, "_jdf", None)
        if jdf is None:
            return df.rdd.getNumPartitions()
        return int(jdf.queryExecution().executedPlan().execute().getNumPartitions())
    return map_in_arrow(df.select(F.lit(0).alias("_")), _one_row, "n long").count()


def default_parallelism(spark: SparkSession) -> int:
    """`sparkContext.defaultParallelism`: the cores of the cluster, or `spark.default.parallelism`.

    On Connect it is the partition count of `spark.range(1)` (a range without a partition count
    is split into that many), measured once per session.
    """
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    known = _PARALLELISM.get(spark)
    if known is None:
        known = _PARALLELISM[spark] = partitions_of(spark.range(1))
    return known


def distribute(spark: SparkSession, rows: Sequence[tuple[Any, ...]], ddl: str, tasks: int | None = None) -> DataFrame:
    """A DataFrame of `rows` (tuples matching `ddl`) in `tasks` partitions (default: one row each),
    contiguous runs of rows per partition, with no shuffle: `sparkContext.parallelize`, and on Spark
    Connect (no SparkContext) its equivalent: the rows travel inside the plan, each a JSON text in
    one array literal, and partition i of a `spark.range` picks its own. Only for the driver's small
    metadata (a task list), never table data.
    """
    rows = list(rows)
    tasks = max(1, min(len(rows), tasks if tasks else len(rows)))
    if not rows:
        return spark.createDataFrame([], ddl)
    if not is_connect(spark):
        # An RDD of unknown size: Spark plans the joins over it as it always has (a range of known
        # size can make it broadcast a side, an extra job per join).
        return spark.createDataFrame(spark.sparkContext.parallelize(rows, tasks), ddl)
    schema = spark.createDataFrame([], ddl).schema
    names = schema.fieldNames()
    texts = [json.dumps(dict(zip(names, row))) for row in rows]
    picked = F.from_json(F.element_at(F.lit(texts), (F.col("id") + 1).cast("int")), schema)
    return spark.range(0, len(rows), 1, tasks).select(picked.alias("_row")).select("_row.*")


@dataclass(frozen=True)
class Shipped:
    """A value every task of a job reads: `.value`, as a Spark broadcast variable has it."""

    value: Any


def ship(spark: SparkSession, value: Any) -> Any:
    """Send `value` to the tasks: a broadcast (read once per executor) on a classic session; on
    Connect, which has no broadcast variables, inside the function's own closure."""
    if is_connect(spark):
        return Shipped(value)
    return spark.sparkContext.broadcast(value)
