"""Key generators: each record's key and partition path from its fields, as Apache Hudi's key generators compute them.

A table names its key generator in `hoodie.properties` (`hoodie.table.keygenerator.class`),
with the fields in `hoodie.table.recordkey.fields` and `hoodie.table.partition.fields` and, for
the timestamp-based one, the `hoodie.keygen.timebased.*` settings. Keys and partition paths are
Spark columns (computed by the executors); `record_keys_arrow` computes the same record keys
from a base file's rows inside a write task, for tables without meta fields.

Facts taken from Hudi 0.14 (table version 6) and checked against tables it wrote (hudi-rs's
test data): a complex key is `field:value` pairs joined by `,` with `__null__` / `__empty__` for
a null / empty value (`id:4,name:Diana`); a complex partition path joins one folder per field
with `/` (`byteField=20/shortField=100` hive-style); the timestamp-based generator formats the
partition field's time with the output date format (`2023/04/04/13` from
`2023-04-04T13:01:00.123Z` and `yyyy/MM/dd/HH`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from labformat.errors import ConfigError, InvalidInputError
from labformat.fileformat.invalid_input import INPUT_REJECTED

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

KEYGEN_CLASS = "hoodie.table.keygenerator.class"
SIMPLE = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX = "org.apache.hudi.keygen.ComplexKeyGenerator"
NON_PARTITIONED = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
TIMESTAMP_BASED = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
# Hudi's Avro and Spark-SQL variants compute the same keys as the classes above.
_SAME_AS = {
    "org.apache.hudi.keygen.SimpleAvroKeyGenerator": SIMPLE,
    "org.apache.hudi.keygen.ComplexAvroKeyGenerator": COMPLEX,
    "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator": NON_PARTITIONED,
    "org.apache.hudi.keygen.TimestampBasedAvroKeyGenerator": TIMESTAMP_BASED,
}
SUPPORTED = (SIMPLE, COMPLEX, NON_PARTITIONED, TIMESTAMP_BASED)

NULL_RECORDKEY_PLACEHOLDER = "__null__"
EMPTY_RECORDKEY_PLACEHOLDER = "__empty__"

TIMESTAMP_TYPE = "hoodie.keygen.timebased.timestamp.type"
SCALAR_TIME_UNIT = "hoodie.keygen.timebased.timestamp.scalar.time.unit"
INPUT_DATE_FORMAT = "hoodie.keygen.timebased.input.dateformat"
INPUT_DATE_FORMAT_DELIMITER = "hoodie.keygen.timebased.input.dateformat.list.delimiter.regex"
OUTPUT_DATE_FORMAT = "hoodie.keygen.timebased.output.dateformat"
TIMEZONE = "hoodie.keygen.timebased.timezone"
INPUT_TIMEZONE = "hoodie.keygen.timebased.input.timezone"
OUTPUT_TIMEZONE = "hoodie.keygen.timebased.output.timezone"

TIMESTAMP_TYPES = ("UNIX_TIMESTAMP", "DATE_STRING", "MIXED", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "SCALAR")
# Java's TimeUnit names, as microseconds per unit (SCALAR's `scalar.time.unit`).
_MICROS_PER_UNIT = {"NANOSECONDS": 0.001, "MICROSECONDS": 1, "MILLISECONDS": 1_000, "SECONDS": 1_000_000,
                    "MINUTES": 60_000_000, "HOURS": 3_600_000_000, "DAYS": 86_400_000_000}
_UNIT_OF_TYPE = {"EPOCHMILLISECONDS": "MILLISECONDS", "EPOCHMICROSECONDS": "MICROSECONDS", "UNIX_TIMESTAMP": "SECONDS"}

# Record-key field types whose string form pyarrow and Spark agree on (a table without meta
# fields has its stored keys computed by pyarrow in the write task, the incoming ones by Spark).
_ARROW_KEY_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_date32,
                    pa.types.is_boolean)


def _fields(raw: str | None) -> tuple[str, ...]:
    return tuple(f.strip() for f in (raw or "").split(",") if f.strip())


@dataclass(frozen=True)
class TimestampOptions:
    """`hoodie.keygen.timebased.*`: how the partition field's value becomes a time, and how that is formatted."""

    timestamp_type: str
    unit: str | None  # the numeric value's time unit (None for DATE_STRING)
    input_formats: tuple[str, ...]  # Joda patterns, tried in order (DATE_STRING and MIXED)
    output_format: str  # Joda pattern of the partition folder
    input_zone: str | None
    output_zone: str | None

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "TimestampOptions":
        """ConfigError naming the property when one the generator needs is missing or unknown.

        Hudi's writer takes `timestamp.type` from the write's options and tables it wrote may not
        store it (hudi-rs's v6 timestamp-based table stores only the two date formats): with an
        input date format and no type, the type is DATE_STRING, the only type that reads one.
        """
        ttype = (props.get(TIMESTAMP_TYPE) or ("DATE_STRING" if props.get(INPUT_DATE_FORMAT) else "")).strip().upper()
        if not ttype:
            raise ConfigError(f"the timestamp-based key generator needs {TIMESTAMP_TYPE} in hoodie.properties "
                              f"(one of {', '.join(TIMESTAMP_TYPES)})")
        if ttype not in TIMESTAMP_TYPES or ttype == "MIXED":
            raise ConfigError(f"{TIMESTAMP_TYPE}={ttype!r} is not supported; labformat takes "
                              f"{', '.join(t for t in TIMESTAMP_TYPES if t != 'MIXED')}")
        output = props.get(OUTPUT_DATE_FORMAT)
        if not output:
            raise ConfigError(f"the timestamp-based key generator needs {OUTPUT_DATE_FORMAT} in hoodie.properties")
        unit = _UNIT_OF_TYPE.get(ttype)
        if ttype == "SCALAR":
            unit = (props.get(SCALAR_TIME_UNIT) or "SECONDS").strip().upper()
            if unit not in _MICROS_PER_UNIT:
                raise ConfigError(f"{SCALAR_TIME_UNIT}={unit!r} is no Java TimeUnit ({', '.join(_MICROS_PER_UNIT)})")
        formats: tuple[str, ...] = ()
        if ttype == "DATE_STRING":
            delimiter = (props.get(INPUT_DATE_FORMAT_DELIMITER) or "").strip() or ","
            formats = tuple(f.strip() for f in re.split(delimiter, props.get(INPUT_DATE_FORMAT) or "") if f.strip())
            if not formats:
                raise ConfigError(f"{TIMESTAMP_TYPE}=DATE_STRING needs {INPUT_DATE_FORMAT} in hoodie.properties")
        # One zone for both sides when `timezone` is set, as Hudi's date-time parser does.
        both = (props.get(TIMEZONE) or "").strip() or None
        return cls(ttype, unit, formats, output,
                   both or (props.get(INPUT_TIMEZONE) or "").strip() or None,
                   both or (props.get(OUTPUT_TIMEZONE) or "").strip() or None)


@dataclass(frozen=True)
class KeyGenerator:
    """A table's key generator: its Hudi class, key and partition fields, folder style and time settings."""

    class_name: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    hive_style: bool
    timestamp: TimestampOptions | None = None
    problem: str | None = None  # why this table's generator cannot compute keys (writes refuse it)

    @classmethod
    def for_fields(cls, record_key: str, partition_field: str | None, hive_style: bool) -> "KeyGenerator":
        """A new labformat table's generator: one record-key field, one partition field or none."""
        return cls(SIMPLE if partition_field else NON_PARTITIONED, (record_key,),
                   (partition_field,) if partition_field else (), hive_style)

    @classmethod
    def from_properties(cls, props: dict[str, str], record_key: str, partition_fields: str | None,
                        hive_style: bool) -> "KeyGenerator":
        """The generator `hoodie.properties` names; without a class, the one Hudi infers from the fields
        (none partition field: non-partitioned; one key and one partition field: simple; else complex).
        A class labformat cannot compute keys for is kept with its `problem`: reads need no keys."""
        keys, parts = _fields(record_key), _fields(partition_fields)
        stored = (props.get(KEYGEN_CLASS) or "").strip()
        name = _SAME_AS.get(stored, stored)
        if not name:
            name = NON_PARTITIONED if not parts else SIMPLE if len(parts) == 1 and len(keys) <= 1 else COMPLEX
        if name not in SUPPORTED:
            return cls(name, keys, parts, hive_style,
                       problem=f"{KEYGEN_CLASS}={stored}: labformat computes keys for {', '.join(SUPPORTED)} only")
        if name == NON_PARTITIONED:
            parts = ()  # Hudi ignores partition fields with this generator: every record goes to ''
        timestamp = None
        if name == TIMESTAMP_BASED:
            if len(parts) != 1:
                return cls(name, keys, parts, hive_style,
                           problem=f"the timestamp-based key generator takes one partition field, got {list(parts)}")
            try:
                timestamp = TimestampOptions.from_properties(props)
            except ConfigError as exc:
                return cls(name, keys, parts, hive_style, problem=str(exc))
        return cls(name, keys, parts, hive_style, timestamp)

    # ---- what the table's code asks ----------------------------------------------------------

    def check(self) -> None:
        """ConfigError when this table's generator cannot compute keys (checked before a write starts)."""
        if self.problem:
            raise ConfigError(self.problem)

    @property
    def single_field_key(self) -> bool:
        """Whether a record key is its one field's value as a string (simple, non-partitioned with one
        field, timestamp-based); a complex key is `field:value` pairs even for one field."""
        return len(self.record_key_fields) == 1 and self.class_name != COMPLEX

    @property
    def value_partitions(self) -> bool:
        """Whether each partition folder holds one field's value (`v` or `f=v`), which query pruning can read."""
        return len(self.partition_fields) == 1 and self.class_name != TIMESTAMP_BASED

    @property
    def fields(self) -> tuple[str, ...]:
        """The input columns keys and partition paths are computed from."""
        return self.record_key_fields + tuple(f for f in self.partition_fields if f not in self.record_key_fields)

    def record_key_column(self, schema: StructType | None = None) -> Column:
        """Each row's record key, as Hudi writes it into `_hoodie_record_key` (a Spark column).
        `schema`: the input's Spark schema; a timestamp field is rendered in UTC (`string_of`)."""
        from pyspark.sql import functions as F

        self.check()
        if self.single_field_key:
            return string_of(self.record_key_fields[0], schema)
        parts = []
        for name in self.record_key_fields:
            value = string_of(name, schema)
            shown = F.when(value.isNull(), F.lit(NULL_RECORDKEY_PLACEHOLDER)).when(
                value == "", F.lit(EMPTY_RECORDKEY_PLACEHOLDER)).otherwise(value)
            parts.append(F.concat(F.lit(f"{name}:"), shown))
        key = F.concat_ws(",", *parts)
        # Hudi refuses a key whose fields are all null or empty.
        all_missing: Column | None = None
        for name in self.record_key_fields:
            missing = F.coalesce(string_of(name, schema), F.lit("")) == ""
            all_missing = missing if all_missing is None else all_missing & missing
        from labformat.spark.tasks import refused_in_sql

        refused = refused_in_sql(InvalidInputError, F.lit(
            f"{INPUT_REJECTED}null or empty record keys: every one of the record key fields "
            f"{list(self.record_key_fields)} is null or empty"))
        assert all_missing is not None  # a table has at least one record key field
        return F.when(all_missing, refused).otherwise(key)

    def partition_path_column(self, null_value: str, schema: StructType | None = None) -> Column:
        """Each row's partition path before labformat's safety check ('' when not partitioned).
        `schema`: the input's Spark schema (the timestamp-based generator reads by type)."""
        from pyspark.sql import functions as F

        self.check()
        if not self.partition_fields:
            return F.lit("")
        if self.class_name == TIMESTAMP_BASED:
            field = self.partition_fields[0]
            dtype = schema[field].dataType if schema is not None and field in schema.names else None
            assert self.timestamp is not None  # check() requires the timestamp options of this generator
            value = _formatted_time(F.col(field), dtype, self.timestamp)
            return F.concat(F.lit(f"{field}="), value) if self.hive_style else value
        folders = []
        for name in self.partition_fields:
            value = string_of(name, schema)
            if len(self.partition_fields) > 1:  # Hudi's complex path: an empty value is null's folder too
                value = F.when(value == "", F.lit(None)).otherwise(value)
            value = F.coalesce(value, F.lit(null_value))
            folders.append(F.concat(F.lit(f"{name}="), value) if self.hive_style else value)
        return folders[0] if len(folders) == 1 else F.concat_ws("/", *folders)

    def check_key_types(self, schema: StructType) -> None:
        """InvalidInputError unless each record-key field of `schema` (Spark) is a type whose string form
        pyarrow and Spark agree on: what a table without meta fields needs, since its stored keys are
        computed by the write tasks in pyarrow and the incoming ones in Spark."""
        from pyspark.sql import types as T

        allowed = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType, T.DateType)
        bad = [f"{f.name} ({f.dataType.simpleString()})" for f in schema.fields
               if f.name in self.record_key_fields and not isinstance(f.dataType, allowed)]
        if bad:
            raise InvalidInputError(f"record key field(s) {', '.join(bad)}: a table without meta fields needs "
                                    "string, integer, boolean or date key fields; table unchanged")

    def record_keys_arrow(self, table: pa.Table) -> pa.Array:
        """The record keys of a base file's rows, from their key fields (tables without meta fields):
        the same strings `record_key_column` gives for the same values."""
        columns = []
        for name in self.record_key_fields:
            column = table.column(name).combine_chunks()
            if not any(check(column.type) for check in _ARROW_KEY_TYPES):
                # Checked on the driver first (`check_key_types`); raised in a task, it reaches the driver as data.
                raise InvalidInputError(f"{INPUT_REJECTED}record key field {name!r} is {column.type}: a table "
                                        "without meta fields needs string, integer, boolean or date key fields")
            columns.append(pc.cast(column, pa.string()))
        if self.single_field_key:
            return columns[0]
        shown = []
        for name, value in zip(self.record_key_fields, columns):
            value = pc.if_else(pc.is_null(value), NULL_RECORDKEY_PLACEHOLDER,
                               pc.if_else(pc.equal(value, ""), EMPTY_RECORDKEY_PLACEHOLDER, value))
            shown.append(pc.binary_join_element_wise(f"{name}:", value, ""))
        return pc.binary_join_element_wise(*shown, ",")


# ---- the timestamp-based partition path -----------------------------------------------------------

_JODA_OFFSET = re.compile(r"Z{1,2}")


def spark_pattern(joda: str, parsing: bool) -> str:
    """A Joda date pattern in Spark's (java.time) letters. They agree on the common letters (y M d H
    m s S, quoted text); Joda's `Z` parses `Z` and `+hh:mm` offsets, which java.time spells `XXX`."""
    if not parsing:
        return joda
    pieces = re.split(r"('[^']*')", joda)  # quoted text stays as it is
    return "".join(p if p.startswith("'") else _JODA_OFFSET.sub("XXX", p) for p in pieces)


def _has_zone(pattern: str) -> bool:
    unquoted = re.sub(r"'[^']*'", "", pattern)
    return any(letter in unquoted for letter in "ZXxOVz")


def string_of(name: str, schema: StructType | None = None) -> Column:
    """Column `name` as the string a record key or partition path holds, the same in every Spark
    session: Spark's cast to string, except that a timestamp (an instant) is rendered in UTC. The
    cast would render it in the session's time zone (`spark.sql.session.timeZone`), and the same
    record would get another key after a change of zone. In UTC sessions both agree, so keys
    labformat stored before read the same."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    column = F.col(name)
    dtype = schema[name].dataType if schema is not None and name in schema.names else None
    if isinstance(dtype, T.TimestampType):
        # Microseconds since the epoch added to the epoch as a wall clock: the UTC wall clock, exactly.
        return F.timestamp_add("MICROSECOND", F.unix_micros(column), _epoch_ntz()).cast("string")
    return column.cast("string")


def _epoch_ntz() -> Column:
    from pyspark.sql import functions as F

    return F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")


def _millis_of_value(column: Column, dtype: DataType | None, options: TimestampOptions) -> Column:
    """Epoch milliseconds of the partition field's value, as Hudi's generator converts it: numbers in
    the type's unit (a fraction dropped first), dates as days in that unit (Hudi's own rule),
    timestamps as their instant, strings by the input date formats."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, T.StringType):
        if options.timestamp_type != "DATE_STRING":
            raise ConfigError(f"{TIMESTAMP_TYPE}={options.timestamp_type} cannot read a string partition field; "
                              "DATE_STRING does")
        parsed = []
        for joda in options.input_formats:
            pattern = spark_pattern(joda, parsing=True)
            if _has_zone(joda) or options.input_zone is None:
                # An offset in the text fixes the instant. Without one, Hudi takes the JVM's zone;
                # labformat takes UTC (its sessions' zone), the same on every machine.
                ts = F.try_to_timestamp(column, F.lit(pattern))
                parsed.append(F.when(ts.isNotNull(), F.unix_millis(ts)))
            else:
                ts = F.try_to_timestamp(column, F.lit(pattern))
                local = F.when(ts.isNotNull(), F.to_timestamp_ntz(column, F.lit(pattern)))
                utc = F.convert_timezone(F.lit(options.input_zone), F.lit("UTC"), local)
                parsed.append(F.timestamp_diff("MILLISECOND", _epoch_ntz(), utc))
        return F.coalesce(*parsed) if len(parsed) > 1 else parsed[0]
    if options.timestamp_type == "DATE_STRING":
        raise ConfigError(f"{TIMESTAMP_TYPE}=DATE_STRING reads strings; the partition field is "
                          f"{dtype.simpleString() if dtype is not None else 'of unknown type'}")
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return F.unix_millis(column.cast("timestamp")) if isinstance(dtype, T.TimestampType) else \
            F.timestamp_diff("MILLISECOND", _epoch_ntz(), column)
    if isinstance(dtype, T.DateType):
        number = F.unix_date(column).cast("long")
    elif isinstance(dtype, T.NumericType):
        number = column.cast("long")  # Java's longValue(): the fraction dropped, toward zero
    else:
        raise ConfigError(f"the timestamp-based key generator cannot read a partition field of type "
                          f"{dtype.simpleString() if dtype is not None else 'unknown'}")
    assert options.unit is not None  # set for every timestamp type but DATE_STRING
    per_unit = _MICROS_PER_UNIT[options.unit]
    if per_unit >= 1000:
        return number * F.lit(int(per_unit // 1000))
    divisor = int(round(1000 / per_unit))  # Java's TimeUnit.convert truncates toward zero
    return ((number - number % F.lit(divisor)) / F.lit(divisor)).cast("long")


def _formatted_time(column: Column, dtype: DataType | None, options: TimestampOptions) -> Column:
    """The partition folder of each row: its time, in the output zone, by the output date format; a
    value the input formats cannot parse fails the write as bad input."""
    from pyspark.sql import functions as F

    from labformat.spark.tasks import refused_in_sql

    millis = _millis_of_value(column, dtype, options)
    # A null value stands for epoch 1 in the type's unit (Hudi's default partition value).
    default = _default_millis(options)
    millis = F.when(column.isNull(), F.lit(default)).otherwise(millis)
    # Without an output zone Hudi formats in the JVM's zone (numbers) or the parsed text's zone
    # (strings); labformat formats in the input zone if set, else UTC: the same folders for
    # text in UTC, as Hudi's own test tables have.
    zone = options.output_zone or options.input_zone or "UTC"
    utc = F.timestamp_add("MILLISECOND", millis, _epoch_ntz())
    local = utc if zone == "UTC" else F.convert_timezone(F.lit("UTC"), F.lit(zone), utc)
    path = F.date_format(local, spark_pattern(options.output_format, parsing=False))
    refused = refused_in_sql(InvalidInputError, F.concat(
        F.lit(f"{INPUT_REJECTED}partition field value '"), column.cast("string"),
        F.lit(f"' matches none of the input date formats {list(options.input_formats)} ({INPUT_DATE_FORMAT})")))
    return F.when(millis.isNull(), refused).otherwise(path)


def _default_millis(options: TimestampOptions) -> int:
    if options.timestamp_type == "DATE_STRING":
        return 1
    assert options.unit is not None  # set for every timestamp type but DATE_STRING
    per_unit = _MICROS_PER_UNIT[options.unit]
    return int(per_unit // 1000) if per_unit >= 1000 else 0
