"""The BUCKET index as Apache Hudi builds it: Hudi's bucket id (checked against Java's own hashCode in the
JVM), hash fields, tables that keep labformat's old hash, and bucket pruning of point queries."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

import labformat as lf
from labformat import properties as P
from labformat.fileformat.java_hash import java_string_hashes
from labformat.index.bucket import hash_values, hudi_bucket_ids
from labformat.model.enums import BucketHash, IndexType, StatsSource
from tests.helpers import hudi_snapshot, java_bucket, telemetry

pytestmark = pytest.mark.spark


def java_string_hash(spark, value: str) -> int:
    return spark.sparkContext._jvm.java.util.Objects.hashCode(value) & 0xFFFFFFFF


NON_ASCII = ["", "é", "drone_ü_7", "日本語のキー", "😀", "x😀y😀", "\u0000", "Ω≈ç√∫", "202401010000_drone0001"]


def test_string_hashes_are_javas_on_non_ascii_keys(spark):
    got = java_string_hashes(pa.array(NON_ASCII))
    assert [int(h) for h in got] == [java_string_hash(spark, v) for v in NON_ASCII]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.text(max_size=30), min_size=1, max_size=25), num_buckets=st.integers(1, 300))
def test_a_keys_bucket_is_the_one_hudis_formula_gives(spark, keys, num_buckets):
    simple = [k for k in keys if "," not in k or ":" not in k]  # complex keys are tested below
    got = hudi_bucket_ids(pa.array(simple, pa.string()), num_buckets)
    assert [int(b) for b in got] == [java_bucket(spark, [k], num_buckets) for k in simple]


def test_a_complex_keys_bucket_hashes_the_hash_fields_values(spark):
    keys = ["id:4,name:Diana", "id:5,name:__null__", "id:6,name:__empty__", "id:7,name:Zoë"]
    assert hash_values(keys[0], ()) == ["4", "Diana"]
    assert hash_values(keys[0], ("name",)) == ["Diana"]
    assert hash_values(keys[1], ()) == ["5", None]
    assert hash_values(keys[2], ("name",)) == [""]
    assert hash_values("id:4", ()) == ["id:4"]  # no ',': Hudi hashes the key as it is
    for fields in ((), ("name",), ("id",)):
        expected = [java_bucket(spark, hash_values(k, fields), 16) for k in keys]
        assert [int(b) for b in hudi_bucket_ids(pa.array(keys), 16, fields)] == expected
    # the reference values, independent of `hash_values`
    assert int(hudi_bucket_ids(pa.array(keys[:1]), 16)[0]) == java_bucket(spark, ["4", "Diana"], 16)
    assert int(hudi_bucket_ids(pa.array(keys[3:]), 16, ("name",))[0]) == java_bucket(spark, ["Zoë"], 16)


def _file_of_each_key(table) -> dict[str, str]:
    rows = table.read().select("_hoodie_record_key", "_hoodie_file_name").collect()
    return {r._hoodie_record_key: r._hoodie_file_name.split("_", 1)[0] for r in rows}


def test_labformat_puts_each_key_in_hudis_bucket_and_upserts_find_it(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "b", partition_field="day",
                        options={"index_type": IndexType.BUCKET, "bucket_num": 5})
    assert t.config.bucket_hash is BucketHash.JAVA_HASHCODE
    props = P.parse_properties((tmp_path / "b" / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.bucket.index.hash.field"] == "record_key"
    t.bulk_insert(telemetry(spark, 200).withColumn("record_key", F.concat("record_key", F.lit("_ü"))))
    report = t.upsert(telemetry(spark, 60, start=170).withColumn("record_key", F.concat("record_key", F.lit("_ü"))))
    assert (report.rows_updated, report.rows_inserted) == (30, 30)
    assert report.funnel.keys_read == 0 and report.funnel.files_scanned == 0
    files = _file_of_each_key(t)
    assert len(files) == 230
    for key, file_id in files.items():
        assert int(file_id[:8]) == java_bucket(spark, [key], 5), key
    assert len(hudi_snapshot(t.path)) == 230


def test_a_table_with_labformats_old_hash_keeps_it(spark, tmp_path):
    """A BUCKET table written before labformat hashed as Hudi does stores `hoodie.index.type=BUCKET` and no
    hash field: it keeps Spark's murmur3, so updates still find their file groups."""
    path = tmp_path / "old"
    lf.Table.create(spark, path, options={"index_type": IndexType.BUCKET, "bucket_num": 3})
    for name in ("hoodie.properties", "hoodie.properties.backup"):
        file = path / ".hoodie" / name
        lines = [line for line in file.read_text().splitlines(keepends=True)
                 if not line.startswith(("hoodie.bucket.index.hash.field=", "labformat.bucket.index.hash="))]
        file.write_text("".join(lines))
    t = lf.Table.open(spark, path)
    assert t.config.bucket_hash is BucketHash.SPARK_MURMUR3
    t.bulk_insert(telemetry(spark, 120))
    report = t.upsert(telemetry(spark, 40, start=100))
    assert (report.rows_updated, report.rows_inserted) == (20, 20)
    murmur = {r.k: r.b for r in t.read().select(F.col("_hoodie_record_key").alias("k"),
                                                F.pmod(F.hash("_hoodie_record_key"), F.lit(3)).alias("b")).collect()}
    files = _file_of_each_key(t)
    assert len(files) == 140 and all(int(files[k][:8]) == murmur[k] for k in files)
    rows, query = t.query("record_key = '202401150901_drone0001'")
    assert rows.count() == 1 and query.bucket_source.kind is StatsSource.NOT_USED


@pytest.fixture(scope="module")
def bucket_table(spark, tmp_path_factory):
    t = lf.Table.create(spark, tmp_path_factory.mktemp("pruning") / "t", partition_field="day",
                        options={"index_type": IndexType.BUCKET, "bucket_num": 16})
    t.bulk_insert(telemetry(spark, 600))
    return t


@pytest.mark.parametrize("keys", [["202401150901_drone0001"], ["202401150901_drone0001", "202401150905_drone0002"]])
def test_a_point_query_on_a_bucket_table_opens_one_file_slice_per_partition_and_bucket(spark, bucket_table, keys):
    t = bucket_table
    quoted = ", ".join(f"'{k}'" for k in keys)
    rows, report = t.query(f"record_key IN ({quoted})")
    assert sorted(r.record_key for r in rows.collect()) == sorted(keys)
    buckets = {java_bucket(spark, [k], 16) for k in keys}
    expected = sum(1 for s in t.file_slices() if int(s.file_id[:8]) in buckets)
    assert report.funnel.after_bucket_pruning == expected <= 2 * len(keys)
    assert report.funnel.files_read <= expected
    assert report.bucket_source.kind is StatsSource.HASH


def test_bucket_pruning_needs_the_key_fixed(bucket_table):
    rows, report = bucket_table.query("drone_id = 'drone0001'")
    assert rows.count() == 6
    assert report.funnel.after_bucket_pruning == report.funnel.after_partition_pruning == len(bucket_table.file_slices())
    assert report.bucket_source.kind is StatsSource.NOT_USED


def test_bucket_pruning_is_not_used_on_other_tables(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "bloom")
    t.bulk_insert(telemetry(spark, 50))
    _, report = t.query("record_key = '202401150900_drone0001'")
    assert report.bucket_source.kind is StatsSource.NOT_USED
    assert report.funnel.after_bucket_pruning == report.funnel.after_partition_pruning


def test_simple_counts_the_keys_it_reads(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "s", partition_field="day")
    t.bulk_insert(telemetry(spark, 300))
    # Both partitions are affected: SIMPLE reads every key of their latest base files.
    report = t.upsert(telemetry(spark, 10, start=5), {"index_type": IndexType.SIMPLE})
    assert report.funnel.keys_read == 300
    one_day = telemetry(spark, 20, start=0).filter(F.col("day") == "2024-01-15")
    report = t.upsert(one_day, {"index_type": IndexType.SIMPLE})
    on_disk = t.read().filter(F.col("day") == "2024-01-15").count()
    assert report.funnel.keys_read == on_disk == 150
    bloom = t.upsert(one_day, {"index_type": IndexType.BLOOM})
    assert bloom.funnel.keys_read == bloom.funnel.keys_read_by_exact_check


def test_hash_fields_must_be_record_key_fields(spark, tmp_path):
    with pytest.raises(lf.ConfigError, match="hash.field"):
        lf.Table.create(spark, tmp_path / "x", options={"index_type": IndexType.BUCKET, "bucket_hash_field": "drone_id"})
    assert not os.path.exists(tmp_path / "x" / ".hoodie" / "hoodie.properties")


def test_file_groups_that_contradict_the_bucket_count_are_named():
    """A count below a bucket the file groups name (hoodie.properties edited from 4 to 2), a file group
    named after no bucket, and two file groups in one bucket (two first writes that both committed)."""
    from labformat.index.bucket import check_layout

    groups = [("a", "00000000-u1-0"), ("a", "00000002-u2-0"), ("b", "00000003-u3-0")]
    check_layout(groups, 4, "t")
    with pytest.raises(lf.CorruptTableError, match=r"num.buckets=2, .*bucket\(s\) up to 3 \(a/00000002-u2-0, "
                                                   r"b/00000003-u3-0\)"):
        check_layout(groups, 2, "t")
    with pytest.raises(lf.CorruptTableError, match="file group a/f1-0 is named after no bucket"):
        check_layout(groups + [("a", "f1-0")], 4, "t")
    with pytest.raises(lf.CorruptTableError, match=r"bucket 2 of partition 'a' has 2 file groups "
                                                   r"\(00000002-u2-0, 00000002-u9-0\)"):
        check_layout(groups + [("a", "00000002-u9-0")], 4, "t")
