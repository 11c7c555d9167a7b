"""Table schemas: the meta columns, Spark <-> Avro conversion, and the compatibility check for writes."""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from pyspark.sql import types as T

from labformat.errors import InvalidInputError, SchemaMismatchError
from labformat.helper_columns import PREFIX

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)
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


def column_name_problem(name: str) -> str | None:
    """Why no write can take a column (or a table field) called `name`, or None when one can: a Hudi
    meta column, a labformat helper column (`_lf_...`), a dotted name (Spark would read `a.b` as
    field b of a column a), or any other name Avro does not allow (the commit's schema is Avro:
    Hudi's readers, hudi-rs among them, fail on a table with a column `drone-id`, `my col` or `tëst`)."""
    if name in META_COLUMNS:
        return f"column {name!r} is a Hudi meta column, which labformat fills itself"
    if name.startswith(PREFIX):
        return f"column {name!r} starts with {PREFIX!r}, the prefix of labformat's helper columns"
    if "." in name:
        return f"column name {name!r} contains a dot"
    if not AVRO_NAME.fullmatch(name):
        return (f"column name {name!r} is no Avro name (ASCII letters, digits and '_', not starting "
                "with a digit), which Hudi's readers need; rename it, e.g. with withColumnRenamed")
    return None


def duplicate_columns(names: Iterable[str]) -> list[str]:
    """The names that occur more than once when case is ignored, as Spark resolves columns by default
    (`v, v` and `v, V` both name one column twice)."""
    seen: dict[str, str] = {}
    out = []
    for name in names:
        folded = name.lower()
        if folded in seen:
            out.append(f"{seen[folded]!r} and {name!r}" if seen[folded] != name else repr(name))
        else:
            seen[folded] = name
    return out


def check_writable(schema: T.StructType, table_schema: T.StructType | None = None) -> None:
    """Raise InvalidInputError unless every column of a write's input can be written: a flat column
    of a supported type, under a name `column_name_problem` accepts, once (names are compared
    without case, as Spark resolves them).

    A nested column (array, map, struct) is taken only where `table_schema` (the table's) already
    has it with the same type: labformat carries the nested columns of a table Apache Hudi wrote
    through its writes, but never starts one.

    Checked on the input's own schema, before any pass over the data and before an instant starts.
    """
    problems = [f"column {twice} appears twice (Spark compares column names without case)"
                for twice in duplicate_columns(schema.names)]
    existing = {f.name: f.dataType for f in table_schema.fields} if table_schema is not None else {}
    for f in schema.fields:
        if isinstance(f.dataType, NESTED_TYPES) and f.name in existing and \
                same_type(existing[f.name], f.dataType) and AVRO_NAME.fullmatch(f.name):
            continue
        problem = column_name_problem(f.name)
        if problem:
            problems.append(problem)
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


def _avro_type(dtype: T.DataType, name: str) -> Any:
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


def _nullable(avro: Any, nullable: bool) -> Any:
    return ["null", avro] if nullable else avro


def avro_record(schema: T.StructType, name: str) -> dict[str, Any]:
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


def _nullable_everywhere(dtype: T.DataType) -> T.DataType:
    if isinstance(dtype, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable_everywhere(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(_nullable_everywhere(dtype.elementType), True)
    if isinstance(dtype, T.MapType):
        return T.MapType(_nullable_everywhere(dtype.keyType), _nullable_everywhere(dtype.valueType), True)
    return dtype


def same_type(a: T.DataType, b: T.DataType) -> bool:
    """Equal types once nullability is set aside, inside nested types too (Spark marks arrays built
    from literals as holding no nulls; Hudi's Avro schemas allow nulls everywhere)."""
    return _nullable_everywhere(a) == _nullable_everywhere(b)


_INTEGRAL_WIDTH = {T.ByteType: 1, T.ShortType: 2, T.IntegerType: 3, T.LongType: 4}


def promotes(narrow: T.DataType, wide: T.DataType) -> bool:
    """Whether every value of type `narrow` is one of `wide` (Avro's and Hudi's safe promotions): a
    wider integer; an integer to float or double; float to double; a decimal with no fewer digits on
    either side of the point."""
    if same_type(narrow, wide):
        return True
    n, w = type(narrow), type(wide)
    if n in _INTEGRAL_WIDTH:
        if w in _INTEGRAL_WIDTH:
            return _INTEGRAL_WIDTH[n] <= _INTEGRAL_WIDTH[w]
        return w in (T.FloatType, T.DoubleType)
    if n is T.FloatType:
        return w is T.DoubleType
    if isinstance(narrow, T.DecimalType) and isinstance(wide, T.DecimalType):
        return wide.scale >= narrow.scale and wide.precision - wide.scale >= narrow.precision - narrow.scale
    return False


def evolve(table_schema: T.StructType, incoming: T.StructType, reconcile: bool = False
           ) -> tuple[T.StructType, tuple[str, ...]]:
    """The table's schema after a write of `incoming`, as Hudi evolves it on write, and what changed.

    - A column the table lacks is added (nullable, after the table's columns): older files read it as null.
    - A column of a type that promotes the table's (`promotes`: int to long, float to double, a wider
      decimal) widens it; older files are read as the wider type. One narrower than the table's is
      cast up to it as it is written.
    - A table column the input lacks: with `reconcile` (hoodie.datasource.write.reconcile.schema) it
      is kept and written as null; without, SchemaMismatchError (as Hudi refuses the batch).
    - Any other change of type, or a name that differs from a table column's only in case:
      SchemaMismatchError, naming each.
    """
    want = {f.name: f for f in table_schema.fields}
    got = {f.name: f for f in incoming.fields}
    problems, changes, fields = [], [], []
    folded = {name.lower(): name for name in want}
    for name in got:
        if name not in want and name.lower() in folded:
            problems.append(f"column {name!r} differs from the table's {folded[name.lower()]!r} only in case")
    missing = [n for n in want if n not in got and n.lower() not in {g.lower() for g in got}]
    if missing and not reconcile:
        problems.append(f"missing columns {missing} (hoodie.datasource.write.reconcile.schema=true keeps them, "
                        "written as null)")
    for name, field in want.items():
        new = got.get(name)
        if new is None or same_type(field.dataType, new.dataType) or promotes(new.dataType, field.dataType):
            fields.append(T.StructField(name, field.dataType, True))
            if new is None and name in missing:
                changes.append(f"{name}: kept, written as null")
        elif promotes(field.dataType, new.dataType):
            fields.append(T.StructField(name, new.dataType, True))
            changes.append(f"{name}: {field.dataType.simpleString()} -> {new.dataType.simpleString()}")
        else:
            problems.append(f"column {name!r} is {new.dataType.simpleString()}, the table has "
                            f"{field.dataType.simpleString()} (not a safe promotion either way)")
    for name, field in got.items():
        if name not in want and name.lower() not in folded:
            fields.append(T.StructField(name, field.dataType, True))
            changes.append(f"{name}: added ({field.dataType.simpleString()})")
    if problems:
        raise SchemaMismatchError("input does not match the table schema, table unchanged: " + "; ".join(sorted(problems)))
    return T.StructType(fields), tuple(changes)


# ---- Avro -> Spark: the schema of a table Apache Hudi wrote -------------------------------------

_AVRO_PRIMITIVES = {
    "boolean": T.BooleanType(), "int": T.IntegerType(), "long": T.LongType(), "float": T.FloatType(),
    "double": T.DoubleType(), "bytes": T.BinaryType(), "string": T.StringType(),
}
_AVRO_LOGICAL = {
    "date": T.DateType(), "timestamp-millis": T.TimestampType(), "timestamp-micros": T.TimestampType(),
    "local-timestamp-millis": T.TimestampNTZType(), "local-timestamp-micros": T.TimestampNTZType(),
    "uuid": T.StringType(),
}


def spark_schema_from_avro(text: str) -> T.StructType:
    """The data columns' Spark schema from an Avro record schema (a commit's `extraMetadata.schema`
    or `hoodie.table.create.schema`), as Spark's Avro reader maps it: nullable unions, nested
    records, arrays and maps, decimals (bytes or fixed), dates and timestamps. Meta columns are
    dropped. ValueError (with the reason) when it is no record schema labformat can map."""
    try:
        avro = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    dtype, _ = _spark_type(avro, {}, "schema")
    if not isinstance(dtype, T.StructType):
        raise ValueError("the schema is no Avro record")
    return data_schema_of(dtype)


def _spark_type(avro: Any, named: dict[str, T.DataType], where: str) -> tuple[T.DataType, bool]:
    """(Spark type, nullable) of one Avro type; `named` collects named types for later references."""
    if isinstance(avro, list):  # a union: Spark maps [null, X] (either order) to a nullable X
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"{where}: union {avro} is not [null, type]")
        return _spark_type(branches[0], named, where)[0], len(branches) < len(avro)
    if isinstance(avro, str):
        if avro in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[avro], False
        if avro in named:
            return named[avro], False
        short = avro.rsplit(".", 1)[-1]
        if short in named:
            return named[short], False
        raise ValueError(f"{where}: unknown Avro type {avro!r}")
    if not isinstance(avro, dict) or "type" not in avro:
        raise ValueError(f"{where}: unreadable Avro type {avro!r}")
    kind, logical = avro["type"], avro.get("logicalType")
    dtype: T.DataType
    if logical == "decimal" and kind in ("bytes", "fixed"):
        dtype = T.DecimalType(int(avro["precision"]), int(avro.get("scale", 0)))
    elif logical in _AVRO_LOGICAL and kind in ("int", "long", "string"):
        dtype = _AVRO_LOGICAL[logical]
    elif kind == "record":
        fields = []
        placeholder = T.StructType([])
        named[avro.get("name", "")] = placeholder  # recursive records are not supported; a reference fails below
        for f in avro.get("fields", []):
            ftype, nullable = _spark_type(f["type"], named, f"{where}.{f['name']}")
            fields.append(T.StructField(f["name"], ftype, nullable))
        dtype = T.StructType(fields)
    elif kind == "array":
        element, nullable = _spark_type(avro["items"], named, f"{where}[]")
        dtype = T.ArrayType(element, nullable)
    elif kind == "map":
        value, nullable = _spark_type(avro["values"], named, f"{where}{{}}")
        dtype = T.MapType(T.StringType(), value, nullable)
    elif kind == "enum":
        dtype = T.StringType()
    elif kind == "fixed":
        dtype = T.BinaryType()
    elif isinstance(kind, (dict, list, str)) and kind not in ("record", "array", "map", "enum", "fixed"):
        return _spark_type(kind, named, where)  # {"type": "int"} and {"type": {...}}: a wrapped type
    else:
        raise ValueError(f"{where}: unsupported Avro type {kind!r}")
    if isinstance(avro.get("name"), str):
        named[avro["name"]] = dtype
        if avro.get("namespace"):
            named[f"{avro['namespace']}.{avro['name']}"] = dtype
    return dtype, False
