"""Arrow columns built in C for the batches labformat's tasks write and pass on."""

from __future__ import annotations

from typing import TYPE_CHECKING
import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with exactly `schema`'s columns, in its order and types: a column the table lacks (one a
    later schema added) as nulls, one of another type cast to it (a promotion, a nested type's child
    names). Free when they already agree."""
    if table.schema == schema:
        return table
    arrays = []
    for field in schema:
        if field.name not in table.column_names:
            arrays.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        arrays.append(column if column.type == field.type else column.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def conform_to_spark(table: pa.Table, spark_schema: StructType) -> pa.Table:
    """`table` (a base file's rows) with exactly the columns of `spark_schema` (the table's schema now,
    meta columns first): a column the file predates as nulls, a type the schema has since widened
    (int to long, float to double, a wider decimal) cast up, and nested columns in the one layout
    `spark_arrow_type` gives, whoever wrote the file. Timestamps keep the file's Arrow type, which
    Spark reads as the schema's."""
    fields = []
    for f in spark_schema.fields:
        have = table.schema.field(f.name).type if f.name in table.column_names else None
        fields.append(pa.field(f.name, spark_arrow_type(f.dataType, have)))
    return conform(table, pa.schema(fields))


def spark_arrow_type(dtype: DataType, have: pa.DataType | None = None) -> pa.DataType:
    """The Arrow type a file's column of Arrow type `have` is handed on as, for the Spark type `dtype`.

    Writers lay nested columns out differently: parquet-avro (Apache Hudi's writer) names a list's
    element `array` and makes it non-null (its legacy 2-level lists), pyarrow and Spark name it
    `element`, and map entries and struct children differ in nullability. One Spark task streams
    the batches of many files through one Arrow stream, which takes a single schema, and the merges
    concatenate files: so a list's element, a map's key and value and a struct's children take the
    names and nullability `dtype` gives them (as pyspark's `to_arrow_type` lays them out), at every
    depth. Timestamp leaves keep the file's unit and zone."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    if isinstance(dtype, T.ArrayType):
        inner = have.value_type if have is not None and pa.types.is_list(have) else None
        return pa.list_(pa.field("element", spark_arrow_type(dtype.elementType, inner), nullable=dtype.containsNull))
    if isinstance(dtype, T.MapType):
        key = value = None
        if have is not None and pa.types.is_map(have):
            key, value = have.key_type, have.item_type
        return pa.map_(pa.field("key", spark_arrow_type(dtype.keyType, key), nullable=False),
                       pa.field("value", spark_arrow_type(dtype.valueType, value), nullable=dtype.valueContainsNull))
    if isinstance(dtype, T.StructType):
        children = {c.name: c.type for c in have} if have is not None and pa.types.is_struct(have) else {}
        return pa.struct([pa.field(c.name, spark_arrow_type(c.dataType, children.get(c.name)), nullable=c.nullable)
                          for c in dtype.fields])
    if have is not None and pa.types.is_timestamp(have) and isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return have
    # A column the file lacks reads as nulls: a zone is needed only to name the type.
    return to_arrow_type(dtype, timezone="UTC")


def constant(value: str, n: int) -> pa.Array:
    """A string column of one value: built in C (a Python list of n strings takes ~0.3 s per 350k rows)."""
    return pa.repeat(pa.scalar(value, pa.string()), n)
