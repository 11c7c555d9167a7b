"""Bucket join (seed 003): two BUCKET tables hashed alike are joined one bucket pair per task, with no
exchange in the physical plan, and give what Spark's shuffled join of the two snapshots gives."""

from __future__ import annotations

import pytest

import labformat as lf
from labformat.model.enums import IndexType

pytestmark = pytest.mark.spark

BUCKETS = {"index_type": IndexType.BUCKET, "bucket_num": 4}


def plan_of(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture
def pair(spark, tmp_path):
    readings = lf.Table.create(spark, tmp_path / "readings", partition_field="p", options=BUCKETS)
    readings.bulk_insert(spark.createDataFrame(
        [(f"k{i:03d}", "ab"[i % 2], i, float(i)) for i in range(60)], "record_key string, p string, updated_at long, v double"))
    notes = lf.Table.create(spark, tmp_path / "notes", options=BUCKETS)
    notes.bulk_insert(spark.createDataFrame(
        [(f"k{i:03d}", 100 + i, f"note {i}") for i in range(0, 90, 3)], "record_key string, updated_at long, note string"))
    return readings, notes


@pytest.mark.parametrize("how", ["inner", "left", "outer", "left_anti"])
def test_a_bucket_join_equals_the_shuffled_join_and_has_no_exchange(spark, pair, how):
    readings, notes = pair
    joined = readings.join_by_bucket(notes, how)
    assert "Exchange" not in plan_of(joined)
    spark_how = {"outer": "full_outer"}.get(how, how)
    columns = ["record_key", "p", "v"] + ([] if how == "left_anti" else ["updated_at_right", "note"])
    right = notes.read().selectExpr("record_key", "updated_at AS updated_at_right", "note")
    shuffled = readings.read().select("record_key", "p", "updated_at", "v").join(right, "record_key", spark_how)
    assert "Exchange" in plan_of(shuffled)
    ours = sorted(tuple(r) for r in joined.select(*columns).collect())
    theirs = sorted(tuple(r) for r in shuffled.select(*columns).collect())
    assert ours == theirs
    assert len(ours) == {"inner": 20, "left": 60, "outer": 70, "left_anti": 40}[how]


def test_tables_bucketed_differently_are_refused(spark, pair, tmp_path):
    readings, _ = pair
    other = lf.Table.create(spark, tmp_path / "eight", options={**BUCKETS, "bucket_num": 8})
    other.bulk_insert(spark.createDataFrame([("k001", 1)], "record_key string, updated_at long"))
    with pytest.raises(lf.ConfigError, match="same bucket count"):
        readings.join_by_bucket(other)
    bloom = lf.Table.create(spark, tmp_path / "bloom")
    bloom.bulk_insert(spark.createDataFrame([("k001", 1)], "record_key string, updated_at long"))
    with pytest.raises(lf.ConfigError, match="two BUCKET tables"):
        readings.join_by_bucket(bloom)
