"""Table schemas: the meta columns, Spark <-> Avro conversion, and the compatibility check for writes."""

from __future__ import annotations

import json
import re

from pyspark.sql import types as T

from labformat.errors import InvalidInputError, SchemaMismatchError

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)
# labformat's own helper columns (the record key as a string, the partition path, the target file
# group, ...) start with this; the write steps add them beside the data columns.
INTERNAL_PREFIX = "_lf_"
# Accepted by `_avro_type` for Hudi's sake, but the write tasks, column stats and the merge handle
# flat columns only: refused up front rather than failing inside a Spark task.
NESTED_TYPES = (T.ArrayType, T.MapType, T.StructType)


def with_meta_columns(data_schema: T.StructType) -> T.StructType:
    """The schema of a base file: the five meta columns first, then the data columns."""
    return T.StructType([T.StructField(c, T.StringType(), True) for c in META_COLUMNS] + list(data_schema.fields))


def data_schema_of(schema: T.StructType) -> T.StructType:
    return T.StructType([f for f in schema.fields if f.name not in META_COLUMNS])


# A name Avro accepts for a record or a field; the commit's schema is Avro, read by every Hudi reader.
AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_writable(schema: T.StructType) -> None:
    """Raise InvalidInputError unless every column of a write's input can be written: a flat column
    of a supported type, under a name that is neither a Hudi meta column, nor a labformat helper
    column (`_lf_...`), nor a dotted name (Spark would read `a.b` as field b of a column a), nor
    any other name Avro does not allow (the commit's schema is Avro: Hudi's readers, hudi-rs
    among them, fail on a table with a column `drone-id`, `my col` or `tëst`).

    Checked on the input's own schema, before any pass over the data and before an instant starts.
    """
    problems = []
    for f in schema.fields:
        if f.name in META_COLUMNS:
            problems.append(f"column {f.name!r} is a Hudi meta column, which labformat fills itself")
        elif f.name.startswith(INTERNAL_PREFIX):
            problems.append(f"column {f.name!r} starts with {INTERNAL_PREFIX!r}, the prefix of labformat's helper columns")
        elif "." in f.name:
            problems.append(f"column name {f.name!r} contains a dot")
        elif not AVRO_NAME.fullmatch(f.name):
            problems.append(f"column name {f.name!r} is no Avro name (ASCII letters, digits and '_', not starting "
                            "with a digit), which Hudi's readers need; rename it, e.g. with withColumnRenamed")
        elif isinstance(f.dataType, NESTED_TYPES):
            problems.append(f"column {f.name!r} is {f.dataType.simpleString()}: nested columns (array, map, "
                            "struct) are not supported")
        elif isinstance(f.dataType, T.NullType):
            problems.append(f"column {f.name!r} has no type (void: only nulls); cast it to the type it should have")
        else:
            try:
                _avro_type(f.dataType, f.name)
            except SchemaMismatchError as exc:
                problems.append(str(exc))
    if problems:
        raise InvalidInputError("input cannot be written, table unchanged: " + "; ".join(problems))


def _avro_type(dtype: T.DataType, name: str):
    simple = {
        T.StringType: "string", T.BooleanType: "boolean", T.IntegerType: "int", T.ShortType: "int",
        T.ByteType: "int", T.LongType: "long", T.FloatType: "float", T.DoubleType: "double",
        T.BinaryType: "bytes",
    }
    for spark_type, avro in simple.items():
        if isinstance(dtype, spark_type):
            return avro
    if isinstance(dtype, T.TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(dtype, T.TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(dtype, T.DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(dtype, T.DecimalType):
        return {"type": "fixed", "name": f"{name}_fixed", "size": 16, "logicalType": "decimal",
                "precision": dtype.precision, "scale": dtype.scale}
    if isinstance(dtype, T.ArrayType):
        return {"type": "array", "items": _nullable(_avro_type(dtype.elementType, name + "_item"), dtype.containsNull)}
    if isinstance(dtype, T.MapType):
        return {"type": "map", "values": _nullable(_avro_type(dtype.valueType, name + "_value"), dtype.valueContainsNull)}
    if isinstance(dtype, T.StructType):
        return avro_record(dtype, name)
    raise SchemaMismatchError(f"column {name!r}: type {dtype.simpleString()} is not supported")


def _nullable(avro, nullable: bool):
    return ["null", avro] if nullable else avro


def avro_record(schema: T.StructType, name: str) -> dict:
    fields = []
    for f in schema.fields:
        field = {"name": f.name, "type": _nullable(_avro_type(f.dataType, f.name), f.nullable)}
        if f.nullable:
            field["default"] = None
        fields.append(field)
    return {"type": "record", "name": name, "fields": fields}


def avro_schema_json(data_schema: T.StructType, table_name: str, meta_columns: bool = False) -> str:
    """The Avro schema Hudi keeps in a commit's extraMetadata.schema (data columns only); with
    `meta_columns`, the writer schema of a log file's data blocks (the five meta columns first)."""
    # Avro names are [A-Za-z_][A-Za-z0-9_]*, ASCII only: hudi-rs's Avro parser panics on a record
    # named after a table called "tä" (str.isalnum() would keep the "ä").
    safe = re.sub(r"[^A-Za-z0-9_]", "_", table_name) or "table"  # AVRO_NAME, once a leading digit is prefixed
    if safe[0].isdigit():
        safe = f"_{safe}"
    record = avro_record(with_meta_columns(data_schema) if meta_columns else data_schema, f"{safe}_record")
    record["namespace"] = f"hoodie.{safe}"
    return json.dumps(record)


def check_compatible(table_schema: T.StructType, incoming: T.StructType) -> None:
    """Raise SchemaMismatchError unless `incoming` has exactly the table's columns and types.

    Column order may differ (writers select by name); nullability may differ, since Spark
    marks many derived columns nullable.
    """
    want = {f.name: f.dataType for f in table_schema.fields}
    got = {f.name: f.dataType for f in incoming.fields}
    problems = []
    missing = [n for n in want if n not in got]
    extra = [n for n in got if n not in want]
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"columns not in the table {extra}")
    for name in want.keys() & got.keys():
        if want[name] != got[name]:
            problems.append(f"column {name!r} is {got[name].simpleString()}, the table has {want[name].simpleString()}")
    if problems:
        raise SchemaMismatchError("input does not match the table schema: " + "; ".join(sorted(problems)))
