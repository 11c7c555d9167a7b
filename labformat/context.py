"""The table context: what the write and read paths need of a table (Spark, storage, typed config, a pinned timeline)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat import config as C
from labformat import properties as P
from labformat.errors import ConfigError, CorruptTableError, InvalidInputError
from labformat.fileformat.invalid_input import INVALID_INPUT_MARKER
from labformat.fs_view import FileSystemView
from labformat.model.commit import SPARK_SCHEMA_KEY
from labformat.model.enums import IndexType
from labformat.schema import check_compatible, check_writable, data_schema_of
from labformat.storage import Storage
from labformat.timeline import TIMELINE_DIR, Timeline

# Written to every table labformat creates; fixed for a version-6 copy-on-write table.
_FIXED_PROPERTIES = {
    "hoodie.table.base.file.format": "PARQUET",
    "hoodie.populate.meta.fields": "true",
    "hoodie.archivelog.folder": "archived",
}
COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"
_SIMPLE_KEYGEN = "org.apache.hudi.keygen.SimpleKeyGenerator"
_NON_PARTITIONED_KEYGEN = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
# A table's metadata flags as hoodie.properties stores them; absent means off, as in a table Hudi
# wrote without them (the registry's defaults are what `Table.create` writes for a new table).
_STORED_FLAGS = ("metadata_enable", "column_stats_enable", "bloom_filter_enable")


# A partition path labformat refuses to write: one that is empty or has an empty, `.` or `..`
# segment (it would land in the table root, or outside the table's folder), or that starts with
# the timeline folder. Values are kept verbatim (Hudi's default, with
# `hoodie.datasource.write.partitionpath.urlencode` off), so these are refused, not encoded.
UNSAFE_PARTITION_PATH = rf"(^|/)\.{{0,2}}(/|$)|^{re.escape(TIMELINE_DIR)}(/|$)"
# The value Hudi (before 0.14) and labformat write a null partition value as: its folder holds the
# nulls, and also the rows whose value is the string itself.
NULL_PARTITION = "default"


def _key(name: str) -> str:
    hudi_key = C.option(name).hudi_key
    assert hudi_key is not None, name  # every table option is stored under its Hudi key
    return hudi_key


def check_names(name: str, record_key: str, precombine_field: str, partition_field: str | None) -> None:
    """A new table's name and field names, as `hoodie.properties` will store them: InvalidInputError
    for a control character (a newline could otherwise smuggle a key into the file; the file's
    escaping is the second guard) or, in a field name, a comma (Hudi reads the field keys as
    comma-separated lists)."""
    fields = {"record_key": record_key, "precombine_field": precombine_field, "partition_field": partition_field}
    for label, value in {"table name": name, **fields}.items():
        if value is None:
            continue
        bad = P.control_characters(value)
        if bad:
            raise InvalidInputError(f"{label} {value!r} holds control character(s) {', '.join(bad)}; "
                                    "names are stored in hoodie.properties and must have none")
        if label in fields and "," in value:
            raise InvalidInputError(f"{label} {value!r} holds a comma; Hudi reads it as a list of fields")


@dataclass(frozen=True)
class TableConfig:
    """A table's identity and fixed settings, typed: `hoodie.properties` read through the option registry."""

    name: str
    record_key: str
    precombine_field: str
    partition_field: str | None
    hive_style_partitioning: bool
    index_type: IndexType
    bucket_num: int
    metadata_enable: bool
    column_stats_enable: bool  # only ever true with metadata_enable: the stats live in the metadata table
    column_stats_columns: tuple[str, ...] | None  # None: every column of a supported type
    bloom_filter_enable: bool  # base files' bloom filters copied into the metadata table
    table_type: str = COPY_ON_WRITE  # or MERGE_ON_READ (`hoodie.table.type`)

    @property
    def merge_on_read(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @classmethod
    def new(cls, options: C.Config, name: str, record_key: str, precombine_field: str,
            partition_field: str | None) -> "TableConfig":
        """The config of a table being created from its table-scope options; InvalidInputError for a
        name `check_names` refuses."""
        check_names(name, record_key, precombine_field, partition_field or None)
        if options.table_type == MERGE_ON_READ and options.index_type == IndexType.BUCKET.value:
            raise ConfigError("hoodie.table.type=MERGE_ON_READ with hoodie.index.type=BUCKET is not supported "
                              "yet: a merge-on-read table takes the BLOOM or SIMPLE index")
        return cls(
            name=name, record_key=record_key, precombine_field=precombine_field,
            partition_field=partition_field or None,
            hive_style_partitioning=options.hive_style_partitioning,
            index_type=IndexType(options.index_type),
            bucket_num=options.bucket_num,
            metadata_enable=options.metadata_enable,
            column_stats_enable=options.metadata_enable and options.column_stats_enable,
            column_stats_columns=tuple(options.column_stats_columns.split(",")) if options.column_stats_columns else None,
            bloom_filter_enable=options.metadata_enable and options.bloom_filter_enable,
            table_type=options.table_type,
        )

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "TableConfig":
        """Parse `hoodie.properties` (already checked by `properties.parse_properties`); a value the
        registry cannot parse is a CorruptTableError naming the key."""

        def value(name: str):
            opt = C.option(name)
            raw = props.get(_key(name))
            if raw is None:
                return False if name in _STORED_FLAGS else opt.default
            try:
                return opt.coerce(raw, opt.hudi_key)
            except ConfigError as exc:
                raise CorruptTableError(f"{P.PROPERTIES_PATH}: {exc}") from None

        columns = value("column_stats_columns")
        return cls(
            name=props[P.TABLE_NAME], record_key=props[P.RECORD_KEY_FIELDS],
            precombine_field=props[P.PRECOMBINE_FIELD], partition_field=props.get(P.PARTITION_FIELDS) or None,
            hive_style_partitioning=value("hive_style_partitioning"),
            index_type=IndexType(value("index_type")),
            bucket_num=value("bucket_num"),
            metadata_enable=value("metadata_enable"),
            column_stats_enable=value("column_stats_enable"),
            column_stats_columns=tuple(columns.split(",")) if columns else None,
            bloom_filter_enable=value("bloom_filter_enable"),
            table_type=value("table_type"),
        )

    def to_properties(self) -> dict[str, str]:
        """The `hoodie.properties` entries of this config, in the order a new table's file lists them."""
        props = {
            P.TABLE_NAME: self.name,
            **P.REQUIRED,
            P.TABLE_TYPE: self.table_type,
            P.RECORD_KEY_FIELDS: self.record_key,
            P.PRECOMBINE_FIELD: self.precombine_field,
            **_FIXED_PROPERTIES,
            P.HIVE_STYLE: str(self.hive_style_partitioning).lower(),
            "hoodie.table.keygenerator.class": _SIMPLE_KEYGEN if self.partition_field else _NON_PARTITIONED_KEYGEN,
        }
        if self.partition_field:
            props[P.PARTITION_FIELDS] = self.partition_field
        props[_key("index_type")] = self.index_type.value
        for name in _STORED_FLAGS:
            props[_key(name)] = str(getattr(self, name)).lower()
        if self.column_stats_columns:
            props[_key("column_stats_columns")] = ",".join(self.column_stats_columns)
        if self.index_type is IndexType.BUCKET:
            props[_key("bucket_num")] = str(self.bucket_num)
        return props


@dataclass(frozen=True)
class TableContext:
    """One operation's view of a table: what write and read code takes instead of `Table`.

    The timeline is the snapshot loaded when the context was made: code holding a context sees
    the same instants throughout, whatever another call does meanwhile. A write's own instant
    transitions go through its `WriteTransaction`, which keeps a timeline of its own.
    """

    spark: SparkSession
    storage: Storage
    config: TableConfig
    timeline: Timeline

    def refreshed(self) -> "TableContext":
        """The same table with its timeline loaded again from `.hoodie/`."""
        return replace(self, timeline=self.timeline.fresh())

    def file_system_view(self, as_of: str | None = None) -> FileSystemView:
        if as_of is not None:
            self.timeline.resolve_as_of(as_of)
        return FileSystemView(self.timeline, as_of)

    def schema(self, as_of: str | None = None) -> T.StructType | None:
        """The data columns' Spark schema as of a commit (latest by default); None before any write."""
        if as_of is not None:
            self.timeline.resolve_as_of(as_of)  # InstantNotFoundError for a time that is no completed commit
        for instant in reversed(self.timeline.completed_writes(as_of)):
            raw = self.timeline.commit_metadata(instant).extra_metadata.get(SPARK_SCHEMA_KEY)
            if raw:
                try:
                    return T.StructType.fromJson(json.loads(raw))
                except (ValueError, KeyError, TypeError) as exc:
                    raise CorruptTableError(f"commit {instant.time}: unreadable schema ({exc})") from None
        return None

    def partition_path_column(self) -> Column:
        """Each row's partition path, computed in Spark ('' for a non-partitioned table).

        A path matching `UNSAFE_PARTITION_PATH` (`''`, `.`, `..`, `../../x`, `.hoodie`, `a//b`) fails
        the Spark job that computes it with a bad-input marker, so the write ends in
        InvalidInputError before a file is written: an upsert computes every path before its
        instant starts; a bulk insert in its write tasks, and its instant is rolled back.
        """
        field = self.config.partition_field
        if not field:
            return F.lit("")
        value = F.coalesce(F.col(field).cast("string"), F.lit(NULL_PARTITION))
        path = F.concat(F.lit(f"{field}="), value) if self.config.hive_style_partitioning else value
        # The message ends in a newline so that the driver reads it up to there, without Spark's suffix.
        refused = F.raise_error(F.concat(
            F.lit(f"{INVALID_INPUT_MARKER} partition column {field!r}: value '"), value,
            F.lit("' gives the partition path '"), path,
            F.lit("', which would leave the table's folder or enter .hoodie (empty, '.' and '..' "
                  "segments and '.hoodie' are refused; values are not URL-encoded)\n")))
        return F.when(path.rlike(UNSAFE_PARTITION_PATH), refused).otherwise(path)

    def schema_for_write(self, df: DataFrame) -> T.StructType:
        """The data schema a write of `df` will have: the table's, if it has one (checked), else df's.
        Columns no write can take (nested, meta or helper names) are refused first (`check_writable`)."""
        check_writable(df.schema)
        incoming = data_schema_of(df.schema)
        current = self.schema()
        if current is None:
            return incoming
        check_compatible(current, incoming)
        return current

    def validate_input(self, df: DataFrame, need_precombine: bool, writes_rows: bool = True) -> None:
        """A write's input checks that need no pass over the data: the key, precombine and partition
        columns are there (InvalidInputError names the missing ones). The schema is checked by
        `schema_for_write`; record keys by the write tasks."""
        conf = self.config
        # The first write fixes the schema: every field the table names must be one of its columns.
        first = writes_rows and not self.timeline.completed_writes()
        needed = [conf.record_key] + ([conf.precombine_field] if need_precombine or first else []) + (
            [conf.partition_field] if conf.partition_field else [])
        missing = [c for c in needed if c not in set(df.columns)]
        if missing:
            raise InvalidInputError(f"input lacks column(s) {missing}; the table needs {needed}"
                                    + (" (this first write fixes the table's columns)" if first else ""))
