"""Issue 19: Hudi v6 tables (built by tests/hudi_layout.py) read, upserted into and deleted from, checked against hudi-rs."""

from __future__ import annotations

import json
import os
from datetime import datetime
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import labformat as lf
from labformat import keygen as K
from labformat.errors import ConfigError, CorruptTableError
from labformat.schema import spark_schema_from_avro
from tests import hudi_layout as H
from tests.helpers import java_bucket


def _ts_folder(r: dict) -> str:
    return datetime.fromisoformat(r["ts_str"].replace("Z", "+00:00")).strftime("%Y/%m/%d/%H")


def _tokyo_folder(r: dict) -> str:
    return datetime.fromtimestamp(r["ts_ms"] / 1000, ZoneInfo("Asia/Tokyo")).strftime("%Y%m%d-%H")


# One layout per key generator of the issue, partitioned and not, with and without meta fields.
LAYOUTS = {
    "simple_nonhive": H.Layout("v6_simple_nonhive", "SimpleKeyGenerator", ("id",), ("byteField",)),
    "simple_hive_no_meta": H.Layout("v6_simple_hive_no_meta", "SimpleKeyGenerator", ("id",), ("byteField",),
                                    hive_style=True, meta_fields=False),
    "complex_hive": H.Layout("v6_complex_hive", "ComplexKeyGenerator", ("id", "name"), ("byteField", "shortField"),
                             hive_style=True),
    "complex_no_meta": H.Layout("v6_complex_no_meta", "ComplexKeyGenerator", ("id", "name"), ("byteField",),
                                meta_fields=False),
    "nonpartitioned": H.Layout("v6_nonpartitioned", "NonpartitionedKeyGenerator", ("id",)),
    # As hudi-rs's v6 timestamp-based table stores it: the two formats, no timestamp.type.
    "timestamp_date_string": H.Layout(
        "v6_timebased", "TimestampBasedKeyGenerator", ("id",), ("ts_str",),
        timebased={K.INPUT_DATE_FORMAT: "yyyy-MM-dd'T'HH:mm:ss.SSSZ", K.OUTPUT_DATE_FORMAT: "yyyy/MM/dd/HH"},
        time_folder=_ts_folder),
    "timestamp_epochmillis_hive": H.Layout(
        "v6_epochmillis", "TimestampBasedKeyGenerator", ("id",), ("ts_ms",), hive_style=True,
        timebased={K.TIMESTAMP_TYPE: "EPOCHMILLISECONDS", K.OUTPUT_DATE_FORMAT: "yyyyMMdd-HH",
                   K.TIMEZONE: "Asia/Tokyo"},
        time_folder=_tokyo_folder),
}

# Two commits, as hudi-rs's sample tables have: three records, then an update and an insert.
FIRST = [H.row(1, "Alice", 10, 300, 100, "2023-04-01T12:01:00.123Z"),
         H.row(2, "Bob", 20, 100, 200, "2023-04-02T12:01:00.123Z"),
         H.row(3, "Carol", 10, 300, 300, "2023-04-01T12:30:00.000Z")]
SECOND = [H.row(1, "Alice", 10, 300, 101, "2023-04-01T12:01:00.123Z") | {"doubleField": 99.5},
          H.row(4, "Diana", 30, 100, 400, "2023-04-04T13:01:00.123Z")]


def _build(tmp_path, case: str) -> tuple[str, H.Layout]:
    layout = LAYOUTS[case]
    path = str(tmp_path / layout.name)
    H.write_table(path, layout, [FIRST, SECOND])
    return path, layout


# ---- comparing rows ------------------------------------------------------------------------------

def _norm(value):
    """One value as both readers' rows compare: maps as dicts, times as epoch micros."""
    if isinstance(value, datetime):
        # Spark's collect gives naive local times, which .timestamp() reads back as local.
        return round(value.timestamp() * 1_000_000)
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return {k: _norm(v) for k, v in value}  # a map as pyarrow lists it
        return [_norm(v) for v in value]
    if hasattr(value, "asDict"):
        return _norm(value.asDict(recursive=True))
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def ours(table: lf.Table) -> list[dict]:
    """labformat's snapshot, every column, as normalized dicts sorted by id (tests may collect)."""
    return sorted((_norm(r.asDict(recursive=True)) for r in table.read().collect()), key=lambda r: r["id"])


def theirs(path: str) -> list[dict]:
    """hudi-rs's snapshot of the same table."""
    import hudi

    batches = hudi.HudiTableBuilder.from_base_uri(str(path)).build().read(hudi.HudiReadOptions())
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return sorted((_norm(r) for r in rows), key=lambda r: r["id"])


def assert_same_as_hudi_rs(got: list[dict], path: str, layout: H.Layout) -> None:
    """hudi-rs drops the (null) meta columns of a table without meta fields; the data columns must agree."""
    other = theirs(path)
    assert (got if layout.meta_fields else _data(got)) == other
    assert len(other) == len(got) and all(set(H.SCHEMA.names) <= set(r) for r in other)


def _data(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in H.META} for r in rows]


def _model(records: list[dict]) -> list[dict]:
    return sorted((_norm(r) for r in records), key=lambda r: r["id"])


def _spark_rows(spark, table: lf.Table, records: list[dict]):
    """Records as a Spark DataFrame of the table's schema (maps as dicts, as Spark takes them)."""
    fixed = [r | {"mapField": dict(r["mapField"])} for r in records]
    return spark.createDataFrame(fixed, table.schema())


# ---- no Spark: schemas and key generators ---------------------------------------------------------

def test_avro_schemas_map_to_spark_types_with_nested_decimal_date_and_timestamps():
    avro = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "_hoodie_commit_time", "type": ["null", "string"]},
        {"name": "id", "type": "int"},
        {"name": "dec", "type": ["null", {"type": "fixed", "name": "fixed", "size": 5, "logicalType": "decimal",
                                           "precision": 10, "scale": 5}]},
        {"name": "bdec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}},
        {"name": "d", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "tmicro", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "tmilli", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "arr", "type": ["null", {"type": "array", "items": ["null", {"type": "record", "name": "a", "fields": [
            {"name": "x", "type": ["null", "string"]}]}]}]},
        {"name": "m", "type": {"type": "map", "values": {"type": "record", "name": "mv", "fields": [
            {"name": "y", "type": "double"}]}}},
        {"name": "s", "type": ["null", {"type": "record", "name": "s", "fields": [
            {"name": "inner", "type": ["null", {"type": "record", "name": "inner", "fields": [
                {"name": "z", "type": ["null", "boolean"]}]}]},
            {"name": "again", "type": ["null", "a"]}]}]},
        {"name": "e", "type": {"type": "enum", "name": "e", "symbols": ["A", "B"]}},
    ]})
    schema = spark_schema_from_avro(avro)
    a = T.StructType([T.StructField("x", T.StringType(), True)])
    assert schema == T.StructType([
        T.StructField("id", T.IntegerType(), False),
        T.StructField("dec", T.DecimalType(10, 5), True),
        T.StructField("bdec", T.DecimalType(4, 2), False),
        T.StructField("d", T.DateType(), True),
        T.StructField("tmicro", T.TimestampType(), True),
        T.StructField("tmilli", T.TimestampType(), False),
        T.StructField("local", T.TimestampNTZType(), False),
        T.StructField("arr", T.ArrayType(a, True), True),
        T.StructField("m", T.MapType(T.StringType(), T.StructType([T.StructField("y", T.DoubleType(), False)]), False),
                      False),
        T.StructField("s", T.StructType([
            T.StructField("inner", T.StructType([T.StructField("z", T.BooleanType(), True)]), True),
            T.StructField("again", a, True)]), True),
        T.StructField("e", T.StringType(), False),
    ])


def test_an_avro_union_of_two_types_is_refused_with_its_field():
    with pytest.raises(ValueError, match="u"):
        spark_schema_from_avro(json.dumps({"type": "record", "name": "r", "fields": [
            {"name": "u", "type": ["null", "int", "string"]}]}))


def test_key_generators_are_read_from_hudis_properties():
    gen = K.KeyGenerator.from_properties({K.KEYGEN_CLASS: K.COMPLEX}, "id,name", "byteField,shortField", True)
    assert (gen.record_key_fields, gen.partition_fields, gen.single_field_key) == \
        (("id", "name"), ("byteField", "shortField"), False)
    # No class stored: inferred as Hudi infers it.
    assert K.KeyGenerator.from_properties({}, "id", "p", False).class_name == K.SIMPLE
    assert K.KeyGenerator.from_properties({}, "id,name", "p", False).class_name == K.COMPLEX
    assert K.KeyGenerator.from_properties({}, "id", None, False).class_name == K.NON_PARTITIONED
    assert K.KeyGenerator.from_properties({K.KEYGEN_CLASS: "org.apache.hudi.keygen.ComplexAvroKeyGenerator"},
                                          "id", "p", False).class_name == K.COMPLEX
    # The timestamp-based table of hudi-rs's test data stores no timestamp type: DATE_STRING.
    gen = K.KeyGenerator.from_properties({K.KEYGEN_CLASS: K.TIMESTAMP_BASED, **LAYOUTS["timestamp_date_string"].timebased},
                                         "id", "ts_str", False)
    assert gen.timestamp.timestamp_type == "DATE_STRING" and gen.timestamp.input_formats == ("yyyy-MM-dd'T'HH:mm:ss.SSSZ",)
    assert gen.problem is None


@pytest.mark.parametrize("props,fields,match", [
    ({K.KEYGEN_CLASS: "org.apache.hudi.keygen.CustomKeyGenerator"}, "p:SIMPLE", "CustomKeyGenerator"),
    ({K.KEYGEN_CLASS: K.TIMESTAMP_BASED, K.OUTPUT_DATE_FORMAT: "yyyy"}, "ts", K.TIMESTAMP_TYPE),
    ({K.KEYGEN_CLASS: K.TIMESTAMP_BASED, K.TIMESTAMP_TYPE: "EPOCHMILLISECONDS"}, "ts", K.OUTPUT_DATE_FORMAT),
    ({K.KEYGEN_CLASS: K.TIMESTAMP_BASED, K.TIMESTAMP_TYPE: "SCALAR", K.SCALAR_TIME_UNIT: "FORTNIGHTS",
      K.OUTPUT_DATE_FORMAT: "yyyy"}, "ts", "FORTNIGHTS"),
    ({K.KEYGEN_CLASS: K.TIMESTAMP_BASED, K.TIMESTAMP_TYPE: "DATE_STRING", K.OUTPUT_DATE_FORMAT: "yyyy"}, "ts",
     K.INPUT_DATE_FORMAT),
])
def test_a_key_generator_labformat_cannot_run_is_a_config_error_on_write_not_on_open(props, fields, match):
    gen = K.KeyGenerator.from_properties(props, "id", fields, False)
    with pytest.raises(ConfigError, match=match):
        gen.check()


def test_joda_offsets_become_java_time_offsets_outside_quotes():
    assert K.spark_pattern("yyyy-MM-dd'T'HH:mm:ss.SSSZ", parsing=True) == "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
    assert K.spark_pattern("yyyy'Z'MMZZ", parsing=True) == "yyyy'Z'MMXXX"
    assert K.spark_pattern("yyyy/MM/dd", parsing=False) == "yyyy/MM/dd"


def test_record_keys_from_arrow_match_hudis_format():
    table = pa.table({"id": pa.array([4, 5, None], pa.int32()), "name": ["Diana", "", "x"]})
    gen = K.KeyGenerator(K.COMPLEX, ("id", "name"), (), False)
    assert gen.record_keys_arrow(table).to_pylist() == ["id:4,name:Diana", "id:5,name:__empty__", "id:__null__,name:x"]
    assert K.KeyGenerator(K.SIMPLE, ("id",), (), False).record_keys_arrow(table).to_pylist() == ["4", "5", None]


@pytest.mark.parametrize("case", ["complex_hive", "simple_hive_no_meta"])
def test_the_schema_of_a_hudi_table_comes_from_its_commit_then_properties_then_a_footer(tmp_path, case):
    path, _ = _build(tmp_path, case)
    table = lf.Table.open(None, path)
    expected = spark_schema_from_avro(H.avro_schema(H.SCHEMA, LAYOUTS[case].name))
    assert table.schema() == expected and len(expected.fields) == len(H.SCHEMA)
    assert table.config.populate_meta_fields is LAYOUTS[case].meta_fields
    # Without the commits' schema: hoodie.table.create.schema.
    for name in os.listdir(os.path.join(path, ".hoodie")):
        if name.endswith(".commit"):
            file = os.path.join(path, ".hoodie", name)
            body = json.load(open(file))
            body["extraMetadata"] = {}
            json.dump(body, open(file, "w"))
    assert lf.Table.open(None, path).schema() == expected
    # Without that either: one base file's parquet schema (types as parquet keeps them).
    props = os.path.join(path, ".hoodie", "hoodie.properties")
    text = "".join(line for line in open(props) if not line.startswith("hoodie.table.create.schema"))
    open(props, "w").write(text)
    from_footer = lf.Table.open(None, path).schema()
    assert from_footer.names == expected.names
    assert from_footer["decimalField"].dataType == T.DecimalType(10, 5)
    assert from_footer["arrayField"].dataType.elementType.names == ["arr_struct_f1", "arr_struct_f2"]


def test_a_table_whose_schema_cannot_be_found_is_an_error(tmp_path):
    path, _ = _build(tmp_path, "nonpartitioned")
    for name in os.listdir(os.path.join(path, ".hoodie")):
        if name.endswith(".commit"):
            file = os.path.join(path, ".hoodie", name)
            json.dump({"partitionToWriteStats": {}, "compacted": False, "extraMetadata": {},
                       "operationType": "UPSERT"}, open(file, "w"))
    props = os.path.join(path, ".hoodie", "hoodie.properties")
    text = "".join(line for line in open(props) if not line.startswith("hoodie.table.create.schema"))
    open(props, "w").write(text)
    with pytest.raises(CorruptTableError, match="no schema found"):
        lf.Table.open(None, path).schema()


# ---- Spark: keys and partition paths computed in Spark ---------------------------------------------

@pytest.mark.spark
def test_timestamp_based_partition_paths_follow_hudis_rules(spark):
    df = spark.createDataFrame(
        [(1680350460123, 1680350460, "2023-04-01T12:01:00.123Z", 19448, None)],
        "ms long, secs long, text string, days long, missing long")

    def path(field, **props):
        stored = {K.KEYGEN_CLASS: K.TIMESTAMP_BASED, **props}
        gen = K.KeyGenerator.from_properties(stored, "ms", field, False)
        return df.select(gen.partition_path_column("default", df.schema).alias("p")).first().p

    assert path("ms", **{K.TIMESTAMP_TYPE: "EPOCHMILLISECONDS", K.OUTPUT_DATE_FORMAT: "yyyy/MM/dd/HH"}) == "2023/04/01/12"
    assert path("secs", **{K.TIMESTAMP_TYPE: "UNIX_TIMESTAMP", K.OUTPUT_DATE_FORMAT: "yyyy-MM-dd HH:mm",
                           K.OUTPUT_TIMEZONE: "America/New_York"}) == "2023-04-01 08:01"
    assert path("days", **{K.TIMESTAMP_TYPE: "SCALAR", K.SCALAR_TIME_UNIT: "days",
                           K.OUTPUT_DATE_FORMAT: "yyyyMMdd"}) == "20230401"
    assert path("text", **{K.INPUT_DATE_FORMAT: "yyyy-MM-dd'T'HH:mm:ss.SSSZ", K.OUTPUT_DATE_FORMAT: "yyyy/MM/dd/HH",
                           K.TIMEZONE: "Asia/Kolkata"}) == "2023/04/01/17"
    # Text without an offset is read in the input zone; micro-seconds and timestamps by their instant.
    assert path("text", **{K.INPUT_DATE_FORMAT: "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", K.TIMESTAMP_TYPE: "DATE_STRING",
                           K.INPUT_TIMEZONE: "Asia/Tokyo", K.OUTPUT_TIMEZONE: "UTC",
                           K.OUTPUT_DATE_FORMAT: "yyyy-MM-dd HH"}) == "2023-04-01 03"
    micros = df.withColumn("us", F.col("ms") * 1000).withColumn("ts", F.timestamp_millis("ms"))
    for field, ttype in (("us", "EPOCHMICROSECONDS"), ("ts", "EPOCHMILLISECONDS")):
        gen = K.KeyGenerator.from_properties({K.KEYGEN_CLASS: K.TIMESTAMP_BASED, K.TIMESTAMP_TYPE: ttype,
                                              K.OUTPUT_DATE_FORMAT: "yyyy/MM/dd/HH:mm"}, "ms", field, True)
        assert micros.select(gen.partition_path_column("default", micros.schema).alias("p")).first().p \
            == f"{field}=2023/04/01/12:01"
    # A null value is epoch 1 in the type's unit, as in Hudi.
    assert path("missing", **{K.TIMESTAMP_TYPE: "UNIX_TIMESTAMP", K.OUTPUT_DATE_FORMAT: "yyyy-MM-dd'T'HH:mm:ss"}) \
        == "1970-01-01T00:00:01"


@pytest.mark.spark
def test_complex_record_keys_and_paths_are_computed_in_spark(spark):
    df = spark.createDataFrame([(4, "Diana", 30, 100), (5, "", None, 100)], "id int, name string, b int, s int")
    gen = K.KeyGenerator(K.COMPLEX, ("id", "name"), ("b", "s"), True)
    rows = df.select(gen.record_key_column().alias("k"), gen.partition_path_column("default").alias("p")).collect()
    assert [(r.k, r.p) for r in rows] == [("id:4,name:Diana", "b=30/s=100"), ("id:5,name:__empty__", "b=default/s=100")]
    with pytest.raises(Exception, match="null or empty record keys"):
        spark.createDataFrame([(None, "")], "id int, name string").select(gen.record_key_column()).collect()


# ---- Spark and hudi-rs: read, upsert, delete ------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("case", list(LAYOUTS))
def test_a_hudi_table_reads_every_column_with_the_rows_hudi_rs_reads(spark, tmp_path, case):
    """Every data column (nested ones too) and the meta columns, row for row as hudi-rs returns them."""
    path, layout = _build(tmp_path, case)
    table = lf.Table.open(spark, path)
    got = ours(table)
    assert table.read().columns == list(H.META) + H.SCHEMA.names
    assert_same_as_hudi_rs(got, path, layout)
    assert _data(got) == _model([SECOND[0], FIRST[1], FIRST[2], SECOND[1]])
    if layout.meta_fields:
        assert [r["_hoodie_record_key"] for r in got] == [layout.record_key_of(r) for r in _model(
            [SECOND[0], FIRST[1], FIRST[2], SECOND[1]])]


@pytest.mark.spark
@pytest.mark.parametrize("case,index", [(c, "BLOOM") for c in LAYOUTS] + [("complex_hive", "SIMPLE"),
                                                                         ("simple_hive_no_meta", "SIMPLE")])
def test_upserts_and_deletes_keep_hudis_layout_and_hudi_rs_reads_the_same(spark, tmp_path, case, index):
    """End state: Bob updated in place, Eve inserted into a new partition, Frank into an existing one,
    Carol deleted; labformat and hudi-rs read the same rows; new files sit in the key generator's
    folders with its record keys (or no meta values at all), and the commits keep Hudi's Avro schema."""
    path, layout = _build(tmp_path, case)
    table = lf.Table.open(spark, path)
    avro = H.avro_schema(H.SCHEMA, layout.name)
    bob = H.row(2, "Bob", 20, 100, 201, "2023-04-02T12:01:00.123Z") | {"doubleField": -1.0}
    eve = H.row(5, "Eve", 40, 500, 500, "2023-04-05T09:15:00.000Z")
    frank = H.row(6, "Frank", 10, 300, 600, "2023-04-01T12:45:00.000Z")
    report = table.upsert(_spark_rows(spark, table, [bob, eve, frank]), {"index_type": index})
    assert (report.rows_updated, report.rows_inserted) == (1, 2)
    deleted = table.delete(table.read().filter(F.col("id") == 3).select(*H.SCHEMA.names), {"index_type": index})
    assert deleted.rows_deleted == 1

    expected = _model([SECOND[0], bob, SECOND[1], eve, frank])
    got = ours(table)
    assert _data(got) == expected
    assert_same_as_hudi_rs(got, path, layout)
    latest = table.file_slices()
    assert {s.partition_path for s in latest} == {layout.partition_of(r) for r in [SECOND[0], bob, SECOND[1], eve, frank]}
    for s in latest:
        if s.partition_path:  # Eve's new folder too: Hudi's listing finds partitions by this file
            assert os.path.exists(os.path.join(path, s.partition_path, ".hoodie_partition_metadata"))
        rows = pq.read_table(os.path.join(path, s.path)).to_pylist()
        for r in rows:
            assert layout.partition_of(r) == s.partition_path
            if layout.meta_fields:
                assert (r["_hoodie_record_key"], r["_hoodie_partition_path"]) == (layout.record_key_of(r), s.partition_path)
            else:
                assert [r[c] for c in H.META[:4]] == [None] * 4 and r["_hoodie_file_name"] == s.path.rsplit("/", 1)[-1]
    for instant in table.timeline():
        assert table.commit_metadata(instant).schema == avro


@pytest.mark.spark
def test_an_upsert_missing_a_key_field_names_it(spark, tmp_path):
    path, _ = _build(tmp_path, "complex_hive")
    table = lf.Table.open(spark, path)
    rows = _spark_rows(spark, table, [H.row(7, "Gus", 10, 300, 1)]).drop("shortField")
    with pytest.raises(lf.InvalidInputError, match="shortField"):
        table.upsert(rows)


# ---- labformat's own tables --------------------------------------------------------------------

@pytest.mark.spark
def test_labformat_tables_record_their_key_generator_and_old_ones_without_it_still_write(spark, tmp_path):
    from tests.helpers import telemetry

    for partition, expected in (("day", K.SIMPLE), (None, K.NON_PARTITIONED)):
        path = tmp_path / f"t_{partition}"
        table = lf.Table.create(spark, path, partition_field=partition)
        assert table.properties[K.KEYGEN_CLASS] == expected == table.config.keygen.class_name
        table.bulk_insert(telemetry(spark, 20))
        # A table written before the class was stored: the generator is inferred, keys as before.
        props = path / ".hoodie" / "hoodie.properties"
        text = "".join(line for line in open(props) if not line.startswith(K.KEYGEN_CLASS))
        open(props, "w").write(text)
        old = lf.Table.open(spark, path)
        assert old.config.keygen == table.config.keygen
        report = old.upsert(telemetry(spark, 5, start=18))
        assert (report.rows_updated, report.rows_inserted) == (2, 3)
        keys = sorted(r._hoodie_record_key for r in old.read().select("_hoodie_record_key").collect())
        assert keys == sorted(r.record_key for r in telemetry(spark, 23).collect())


@pytest.mark.spark
@pytest.mark.parametrize("case,hash_field", [("complex_no_meta", "id,name"), ("complex_no_meta", "name"),
                                             ("simple_nonhive", "id")])
def test_a_bucket_index_finds_keys_in_the_file_groups_hudi_put_them(spark, tmp_path, case, hash_field):
    """A BUCKET table laid out as Hudi's bucket index lays it out (file groups per partition and bucket,
    the bucket from Java's hashCode of the hash fields' values): Bob is updated in place, Eve lands in
    her bucket's file group, Carol is deleted, and hudi-rs reads what labformat reads."""
    layout = LAYOUTS[case]
    path = str(tmp_path / "bucket")
    fields = hash_field.split(",")

    def bucket_of(key: str) -> int:
        if "," not in key or ":" not in key:
            return java_bucket(spark, [key], 4)
        pairs = dict(part.split(":", 1) for part in key.split(","))
        return java_bucket(spark, [pairs[f] for f in fields], 4)

    H.write_table(path, layout, [FIRST], extra_properties={"hoodie.index.type": "BUCKET",
                                                           "hoodie.bucket.index.num.buckets": "4",
                                                           "hoodie.bucket.index.hash.field": hash_field},
                  bucket_of=bucket_of)
    table = lf.Table.open(spark, path)
    assert table.index_type.value == "BUCKET"
    bob = H.row(2, "Bob", 20, 100, 201) | {"doubleField": -1.0}
    eve = H.row(5, "Eve", 40, 500, 500)
    report = table.upsert(_spark_rows(spark, table, [bob, eve]))
    assert (report.rows_updated, report.rows_inserted) == (1, 1)
    assert table.delete(table.read().filter(F.col("id") == 3).select(*H.SCHEMA.names)).rows_deleted == 1
    got = ours(table)
    assert _data(got) == _model([FIRST[0], bob, eve])
    for r in got:
        key = layout.record_key_of(r)
        assert r["_hoodie_file_name"][:8] == f"{bucket_of(key):08d}", key
    assert_same_as_hudi_rs(got, path, layout)


@pytest.mark.spark
@pytest.mark.parametrize("case,condition,after_partitions,files_read", [
    ("simple_nonhive", "byteField = 10", 1, 1),  # value folders: partition pruning keeps one of three
    ("complex_hive", "byteField = 10", 3, 1),  # two-field folders are not pruned by value; footer stats are
    ("simple_nonhive", "id = 2", 3, 2),  # footer stats keep ids 1-3 and 2; no labformat bloom filter to skip by
    ("timestamp_date_string", "id = 4", 3, 1),
])
def test_queries_on_hudi_tables_return_the_matching_rows(spark, tmp_path, case, condition, after_partitions, files_read):
    path, _ = _build(tmp_path, case)
    table = lf.Table.open(spark, path)
    rows, report = table.query(condition)
    expected = sorted(r.id for r in table.read().filter(condition).collect())
    assert sorted(r.id for r in rows.collect()) == expected and expected
    assert (report.funnel.after_partition_pruning, report.funnel.files_read) == (after_partitions, files_read)


@pytest.mark.spark
def test_bulk_insert_into_a_complex_key_table_writes_hudis_keys(spark, tmp_path):
    path, layout = _build(tmp_path, "complex_hive")
    table = lf.Table.open(spark, path)
    new = [H.row(7, "Gus", 10, 300, 700), H.row(8, "Hal", 50, 100, 800)]
    table.bulk_insert(_spark_rows(spark, table, new))
    got = ours(table)
    assert _data(got) == _model([SECOND[0], FIRST[1], FIRST[2], SECOND[1]] + new)
    assert {r["_hoodie_record_key"]: r["_hoodie_partition_path"] for r in got if r["id"] >= 7} == {
        "id:7,name:Gus": "byteField=10/shortField=300", "id:8,name:Hal": "byteField=50/shortField=100"}
    assert_same_as_hudi_rs(got, path, layout)


@pytest.mark.spark
def test_a_time_the_input_formats_cannot_parse_is_bad_input_and_leaves_the_table_as_it_was(spark, tmp_path):
    from tests.helpers import tree

    path, _ = _build(tmp_path, "timestamp_date_string")
    table = lf.Table.open(spark, path)
    before = {k: v for k, v in tree(path).items() if not k.startswith(".hoodie")}
    with pytest.raises(lf.InvalidInputError, match="not a date"):
        table.upsert(_spark_rows(spark, table, [H.row(9, "Ivy", 10, 300, 900) | {"ts_str": "not a date"}]))
    assert {k: v for k, v in tree(path).items() if not k.startswith(".hoodie")} == before
    assert len(ours(table)) == 4


def test_a_table_without_meta_fields_refuses_key_fields_whose_string_form_is_ambiguous():
    gen = K.KeyGenerator(K.COMPLEX, ("id", "score"), (), False)
    gen.check_key_types(T.StructType([T.StructField("id", T.IntegerType()), T.StructField("score", T.StringType())]))
    with pytest.raises(lf.InvalidInputError, match="score"):
        gen.check_key_types(T.StructType([T.StructField("id", T.IntegerType()), T.StructField("score", T.DoubleType())]))
    with pytest.raises(ValueError, match="score"):
        gen.record_keys_arrow(pa.table({"id": [1], "score": [1.5]}))


# ---- Hudi's legacy list layout beside labformat's files (issue 48, case 9) -------------------------

# Hudi's upserts write lists in parquet-avro's old layout (`list<array: T not null>`); labformat writes
# the standard one (`list<element: T>`). A task streams both through one Arrow stream, and a merge or
# clustering concatenates them: each file is conformed to the schema's one layout first.
NESTED_FIRST = [H.nested_row(1, "Alice", 10, 300, 100, "2023-04-01T12:01:00.123Z"),
                H.nested_row(2, "Bob", 20, 100, 200, "2023-04-02T12:01:00.123Z"),
                H.nested_row(3, "Carol", 10, 300, 300, "2023-04-01T12:30:00.000Z")]
NESTED_SECOND = [H.nested_row(1, "Alice", 10, 300, 101, "2023-04-01T12:01:00.123Z") | {"doubleField": 99.5},
                 H.nested_row(4, "Diana", 30, 100, 400, "2023-04-04T13:01:00.123Z")]


def _nested_spark_rows(spark, table: lf.Table, records: list[dict]):
    """NESTED_SCHEMA records as a Spark DataFrame (maps as dicts, as Spark takes them)."""
    fixed = [r | {"mapField": dict(r["mapField"]), "mapOfList": dict(r["mapOfList"]),
                  "listOfMap": [dict(m) for m in r["listOfMap"]]} for r in records]
    return spark.createDataFrame(fixed, table.schema())


def _list_element_names(path: str) -> set[str]:
    """The element names of a base file's lists, at every depth, as pyarrow reads them."""
    names = set()

    def walk(t: pa.DataType) -> None:
        if pa.types.is_list(t):
            names.add(t.value_field.name)
            walk(t.value_type)
        elif pa.types.is_struct(t):
            for f in t:
                walk(f.type)
        elif pa.types.is_map(t):
            walk(t.key_type)
            walk(t.item_type)

    for f in pq.read_schema(path):
        walk(f.type)
    return names


def test_base_files_of_either_list_layout_conform_to_one_arrow_schema(tmp_path):
    """Every nested shape, written in Hudi's old list layout and in the standard one, reads back as
    different Arrow types and conforms to one (names and nullability at every depth), which one Arrow
    stream takes batch after batch, with the same rows."""
    from labformat.fileformat.arrow_columns import conform_to_spark

    schema = spark_schema_from_avro(H.avro_schema(H.NESTED_SCHEMA, "t"))
    rows = pa.Table.from_pylist([NESTED_FIRST[0], NESTED_SECOND[1]], schema=H.NESTED_SCHEMA)
    legacy = rows.cast(pa.schema([f.with_type(H.legacy_list_type(f.type)) for f in rows.schema]))
    pq.write_table(legacy, tmp_path / "hudi.parquet", use_compliant_nested_type=False)
    pq.write_table(rows, tmp_path / "labformat.parquet")
    assert _list_element_names(str(tmp_path / "hudi.parquet")) == {"array"}
    assert _list_element_names(str(tmp_path / "labformat.parquet")) == {"element"}
    theirs_ = conform_to_spark(pq.read_table(tmp_path / "hudi.parquet"), schema)
    ours_ = conform_to_spark(pq.read_table(tmp_path / "labformat.parquet"), schema)
    # Equal as an Arrow stream compares schemas: nullability at every depth (pyarrow ignores child names).
    assert theirs_.schema == ours_.schema
    assert theirs_.to_pylist() == ours_.to_pylist() == rows.to_pylist()
    # The merge-on-read merge (a snapshot's slices with logs, compaction, a bucket split) reads base files too.
    from labformat.model.enums import MergeMode
    from labformat.read.merge_on_read import merge_file_slice
    from labformat.storage import Storage

    with_meta = T.StructType([T.StructField(c, T.StringType()) for c in H.META] + schema.fields)
    slices = []
    for name, table in (("hudi", legacy), ("labformat", rows)):
        meta = [pa.array([f"2024041817321{n}674" for n in range(2)]), pa.array(["s0", "s1"]),
                pa.array(["1", "4"]), pa.array(["", ""]), pa.array(["f", "f"])]
        base = f"{name}-0_0-1-1_20240418173213674.parquet"
        pq.write_table(pa.Table.from_arrays(meta + table.columns, names=list(H.META) + table.column_names),
                       tmp_path / base, use_compliant_nested_type=name != "hudi")
        slices.append(merge_file_slice(Storage(str(tmp_path)), base, [], "longField",
                                       MergeMode.COMMIT_TIME_ORDERING, with_meta))
    assert slices[0].schema == slices[1].schema and slices[0].to_pylist() == slices[1].to_pylist()

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, ours_.schema) as stream:
        for batch in ours_.to_batches() + theirs_.to_batches():
            stream.write_batch(batch)
    assert pa.concat_tables([theirs_, ours_]).num_rows == 2 * rows.num_rows


@pytest.mark.spark
def test_the_legacy_list_fixture_reads_as_the_two_level_layout_parquet_avro_writes(spark, tmp_path):
    """tests/hudi_layout.py writes Hudi's old lists 3-level (pyarrow cannot write 2-level ones); Spark's
    legacy writer writes them 2-level (`repeated group array`, as parquet-avro does): pyarrow reads both
    as the same Arrow types, every nested shape."""
    path = str(tmp_path / "legacy")
    H.write_table(path, LAYOUTS["nonpartitioned"], [NESTED_FIRST], schema=H.NESTED_SCHEMA, legacy_lists=True)
    fixture = next(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".parquet"))

    def no_null_elements(t: T.DataType) -> T.DataType:  # what Spark's legacy writer writes 2-level
        if isinstance(t, T.ArrayType):
            return T.ArrayType(no_null_elements(t.elementType), False)
        if isinstance(t, T.MapType):
            return T.MapType(t.keyType, no_null_elements(t.valueType), t.valueContainsNull)
        if isinstance(t, T.StructType):
            return T.StructType([T.StructField(f.name, no_null_elements(f.dataType), f.nullable) for f in t.fields])
        return t

    rows = spark.read.parquet(fixture)
    spark.conf.set("spark.sql.parquet.writeLegacyFormat", "true")
    try:
        spark.createDataFrame(rows.rdd, no_null_elements(rows.schema)).coalesce(1).write.parquet(
            str(tmp_path / "two_level"))
    finally:
        spark.conf.unset("spark.sql.parquet.writeLegacyFormat")
    two_level = next(str(p) for p in (tmp_path / "two_level").iterdir() if p.name.endswith(".parquet"))
    assert "repeated group field_id=-1 array" in str(pq.ParquetFile(two_level).schema)
    assert "repeated group field_id=-1 list" not in str(pq.ParquetFile(two_level).schema)
    for f in (f for f in H.NESTED_SCHEMA if pa.types.is_nested(f.type)):  # its timestamps are INT96
        assert str(pq.read_schema(two_level).field(f.name).type) == str(pq.read_schema(fixture).field(f.name).type)


@pytest.mark.spark
@pytest.mark.parametrize("case", ["simple_nonhive", "complex_hive", "simple_hive_no_meta", "timestamp_date_string"])
def test_a_table_in_hudis_legacy_list_layout_reads_upserts_deletes_and_clusters_with_labformats_files(
        spark, tmp_path, case, monkeypatch):
    """A Hudi table whose lists are in parquet-avro's old layout, every nested shape: an upsert rewrites
    one file group and adds two (labformat's files, in the standard layout), a delete rewrites another,
    then clustering merges them (tables with meta fields); after each, labformat and hudi-rs read the
    same rows. Scans pack every file into one task, as a table with more files than cores has
    tasks holding files of both layouts."""
    monkeypatch.setattr("labformat.io.files.default_parallelism", lambda spark: 1)
    layout = LAYOUTS[case]
    path = str(tmp_path / layout.name)
    H.write_table(path, layout, [NESTED_FIRST, NESTED_SECOND], schema=H.NESTED_SCHEMA, legacy_lists=True)
    hudis = {s.path for s in lf.Table.open(spark, path).file_slices()}
    assert all(_list_element_names(os.path.join(path, p)) == {"array"} for p in hudis)
    table = lf.Table.open(spark, path)
    bob = H.nested_row(2, "Bob", 20, 100, 201, "2023-04-02T12:01:00.123Z") | {"doubleField": -1.0, "intList": [7]}
    eve = H.nested_row(5, "Eve", 40, 500, 500, "2023-04-05T09:15:00.000Z")
    frank = H.nested_row(6, "Frank", 10, 300, 600, "2023-04-01T12:45:00.000Z")
    report = table.upsert(_nested_spark_rows(spark, table, [bob, eve, frank]), {"index_type": "SIMPLE"})
    assert (report.rows_updated, report.rows_inserted) == (1, 2)
    expected = _model([NESTED_SECOND[0], bob, NESTED_SECOND[1], eve, frank, NESTED_FIRST[2]])
    got = ours(table)
    assert _data(got) == expected
    assert_same_as_hudi_rs(got, path, layout)
    # The table now mixes the two layouts: labformat's new files are standard, the untouched ones Hudi's.
    layouts = {s.path: _list_element_names(os.path.join(path, s.path)) for s in table.file_slices()}
    assert {"array"} in layouts.values() and {"element"} in layouts.values()
    assert all(names == {"element"} for p, names in layouts.items() if p not in hudis)

    deleted = table.delete(table.read().filter(F.col("id") == 3).select(*H.NESTED_SCHEMA.names), {"index_type": "SIMPLE"})
    assert deleted.rows_deleted == 1
    expected = _model([NESTED_SECOND[0], bob, NESTED_SECOND[1], eve, frank])
    got = ours(table)
    assert _data(got) == expected
    assert_same_as_hudi_rs(got, path, layout)

    if not layout.meta_fields:
        return  # clustering needs stored record keys
    table.cluster({"clustering_small_file_limit": "64MB", "clustering_target_file_max_bytes": "64MB"})
    got = ours(table)
    assert _data(got) == expected
    assert_same_as_hudi_rs(got, path, layout)

