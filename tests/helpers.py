"""Test helpers: tiny inputs built in Spark, and snapshot comparisons (tests may collect; the library may not)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd
import pytest
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from labformat.schema import META_COLUMNS
from labformat.storage import Storage


def arm_writer_points() -> None:
    """In a test's writer process, before it writes: the crash and pause points its test asked for."""
    from labformat import hooks
    from tests.writer_pool import CRASH_AT, PAUSE_AT, PAUSE_DIR

    hooks.arm(crash_at=os.environ.get(CRASH_AT) or None, pause_at=os.environ.get(PAUSE_AT) or None,
              pause_dir=os.environ.get(PAUSE_DIR) or None)


def telemetry(spark, n: int, partitions: int = 3, start: int = 0, prefix: str = "2024011509"):
    """n rows with monotonic `YYYYMMDDHHmm_droneID`-style keys, over a `day` column with 2 values."""
    return spark.range(start, start + n, numPartitions=partitions).select(
        F.format_string(f"{prefix}%02d_drone%04d", (F.col("id") / 100 % 60).cast("int"), F.col("id") % 100).alias("record_key"),
        F.format_string("drone%04d", F.col("id") % 100).alias("drone_id"),
        F.when(F.col("id") % 2 == 0, F.lit("2024-01-15")).otherwise(F.lit("2024-01-16")).alias("day"),
        (F.col("id") * 0.5).alias("battery_pct"),
        F.col("id").cast("int").alias("signal_dbm"),
        F.timestamp_seconds(F.lit(1705300000) + F.col("id")).alias("updated_at"),
    )


def java_bucket(spark, values: list[str | None], num_buckets: int) -> int:
    """The oracle for Hudi's bucket id: BucketIdentifier's `(List<String>.hashCode() & Integer.MAX_VALUE)
    % num_buckets`, run by the JVM itself on a java.util.ArrayList."""
    hashed = spark.sparkContext._jvm.java.util.ArrayList()
    for v in values:
        hashed.add(v)
    return (hashed.hashCode() & 0x7FFFFFFF) % num_buckets


@dataclass(frozen=True)
class TableHome:
    """Where a test keeps its tables: a local folder, or a prefix on the session's S3 server (the
    `home` fixture gives both in turn, so one test body checks both storage backends)."""

    root: str
    storage_options: dict

    def uri(self, name: str) -> str:
        return f"{self.root}/{name}"

    def storage(self, name: str) -> Storage:
        return Storage(self.uri(name), self.storage_options or None)

    def files(self, name: str, under: str = "") -> list[str]:
        """Every file of table `name` (paths relative to it), through the storage layer."""
        return [f.path for f in self.storage(name).list(under, recursive=True)]

    def hudi_snapshot(self, name: str, as_of: str | None = None) -> pd.DataFrame:
        return hudi_snapshot(self.uri(name), as_of, storage_options=self.storage_options)


def snapshot(df, key: str = "record_key") -> pd.DataFrame:
    """A DataFrame's rows as pandas, sorted by key, meta columns kept when present."""
    pdf = df.toPandas()
    return pdf.sort_values(key).reset_index(drop=True)


def hudi_snapshot(path: str, as_of: str | None = None, key: str = "record_key",
                  storage_options: dict | None = None) -> pd.DataFrame:
    """What Apache Hudi's own reader (hudi-rs) returns for the table (on S3: given the same storage options)."""
    import hudi

    table = hudi.HudiTableBuilder.from_base_uri(str(path)).with_storage_options(storage_options or {}).build()
    options = hudi.HudiReadOptions()
    if as_of is not None:
        options = options.with_as_of_timestamp(as_of)
    batches = table.read(options)
    if not batches:
        return pd.DataFrame()
    pdf = pa.Table.from_batches(batches).to_pandas()
    return pdf.sort_values(key).reset_index(drop=True)


def assert_same_rows(ours: pd.DataFrame, theirs: pd.DataFrame, columns) -> None:
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    for column in columns:
        a, b = ours[column], theirs[column]
        if pd.api.types.is_datetime64_any_dtype(a) or pd.api.types.is_datetime64_any_dtype(b):
            a = pd.to_datetime(a, utc=True)
            b = pd.to_datetime(b, utc=True)
        pd.testing.assert_series_equal(a.reset_index(drop=True), b.reset_index(drop=True),
                                       check_names=False, check_dtype=False)


def footers(table_path, slices):
    """(min key, max key, rows) from each base file's parquet footer."""
    out = []
    for s in slices:
        meta = pq.read_metadata(f"{table_path}/{s.path}")
        kv = {k.decode(): v.decode() for k, v in (meta.metadata or {}).items()}
        out.append((kv["hoodie_min_record_key"], kv["hoodie_max_record_key"], meta.num_rows))
    return out


DATA_COLUMNS = ["record_key", "drone_id", "day", "battery_pct", "signal_dbm", "updated_at"]
ALL_COLUMNS = list(META_COLUMNS) + DATA_COLUMNS


def tree(path):
    """Every file under path with its bytes: 'the table exactly as it was'."""
    out = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = fh.read()
    return out


def kill_points(points: list[str], on_s3: tuple[str, ...] = ("before_publish",), every_point_locally: bool = True) -> list:
    """(home, point) parameters for a killed-writer test: every point on a local folder, and on the S3
    server only `on_s3`. The rollback is the same code on both backends; what S3 adds (listing and
    deleting objects, publishing the commit) is met by the last point before the publish, which
    leaves the most behind, and each point costs a writer process of its own (about 15 s).
    `every_point_locally=False`: each point once, the `on_s3` ones on S3 only (for the operations
    whose rollback the bulk insert's test in tests/test_crash.py already kills at every point locally)."""
    return ([("local", p) for p in points if every_point_locally or p not in on_s3]
            + [pytest.param("s3", p, marks=pytest.mark.s3) for p in points if p in on_s3])
