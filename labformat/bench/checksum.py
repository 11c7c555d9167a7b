"""The equality check: every engine's finished table as (row count, order-independent hash of all values), in Spark.

One implementation for every engine, run by Spark's executors (no table data reaches the
driver): labformat tables through `Table.read()`, the plain-PySpark table from its current
version folder, and the peers from the snapshot their own reader produced (written to one
parquet file by the engine). Before hashing, the data columns are selected in the dataset's
column order and cast to the dataset's types, so physical differences between writers
(timestamp flavours, int widths) do not count; the `_hoodie_*` meta columns are left out.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from labformat import datasets


def table_frame(spark: SparkSession, source: dict[str, str]) -> DataFrame:
    """The data columns of a finished table, canonical types, from an engine's `check_source()`."""
    if source["kind"] == "labformat":
        import labformat as lf

        frame = lf.Table.open(spark, source["path"], storage_options=source.get("storage_options")).read()
    elif source["kind"] == "parquet":
        frame = spark.read.parquet(source["path"])
    else:
        raise ValueError(f"unknown table source kind {source['kind']!r}")
    return frame.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in datasets.SCHEMA.fields])


def table_checksum(spark: SparkSession, source: dict[str, str]) -> tuple[int, int]:
    """(rows, sum of per-row xxhash64 of all data values) of a finished table."""
    return datasets.fingerprint(table_frame(spark, source))
