"""The table context: what the write and read paths need of a table (Spark, storage, typed config, a pinned timeline)."""

from __future__ import annotations

from typing import Any
import json
import re
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat import config as C
from labformat import properties as P
from labformat.errors import (
    ConfigError,
    CorruptTableError,
    InvalidInputError,
    TableChangedError,
    TableNotFoundError,
    storage_error,
)
from labformat.fileformat.invalid_input import INPUT_REJECTED
from labformat.spark.tasks import refused_in_sql
from labformat.fileformat.footers import base_file_schema
from labformat.fs_view import FileSystemView
from labformat.keygen import KeyGenerator, string_of
from labformat.model.commit import SPARK_SCHEMA_KEY
from labformat.model.enums import BucketEngine, BucketHash, IndexType, MergeMode, TableType
from labformat.model.instant import Instant
from labformat.schema import (
    check_writable,
    column_name_problem,
    data_schema_of,
    duplicate_columns,
    evolve,
    same_type,
    spark_schema_from_avro,
)
from labformat.storage import Storage
from labformat.timeline import TIMELINE_DIR, Timeline
from labformat.fileformat.footers import FooterCache

# Written to every table labformat creates; fixed for a version-6 copy-on-write table.
_FIXED_PROPERTIES = {
    "hoodie.table.base.file.format": "PARQUET",
    "hoodie.populate.meta.fields": "true",
    "hoodie.archivelog.folder": "archived",
}
POPULATE_META_FIELDS = "hoodie.populate.meta.fields"
# How record versions of a merge-on-read slice meet. labformat writes Hudi 0.14's default payload
# class into every new table, which Hudi's readers (hudi-rs 0.5 among them) take for commit-time
# ordering: the later write wins, as on copy-on-write. A table that names neither (labformat's
# tables before, many of Hudi's) is read with event-time ordering, as hudi-rs infers it.
MERGE_MODE = "hoodie.record.merge.mode"
PAYLOAD_CLASS_KEYS = ("hoodie.compaction.payload.class", "hoodie.datasource.write.payload.class",
                      "hoodie.table.legacy.payload.class")
OVERWRITE_WITH_LATEST = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
CREATE_SCHEMA = "hoodie.table.create.schema"
# A table's metadata flags as hoodie.properties stores them; absent means off, as in a table Hudi
# wrote without them (the registry's defaults are what `Table.create` writes for a new table).
_STORED_FLAGS = ("metadata_enable", "column_stats_enable", "bloom_filter_enable")


# A partition path labformat refuses to write: one that is empty or has an empty, `.` or `..`
# segment (it would land in the table root, or outside the table's folder), or that starts with
# the timeline folder. Values are kept verbatim (Hudi's default, with
# `hoodie.datasource.write.partitionpath.urlencode` off), so these are refused, not encoded.
UNSAFE_PARTITION_PATH = rf"(^|/)\.{{0,2}}(/|$)|^{re.escape(TIMELINE_DIR)}(/|$)"
# A partition path with a control character (tab, newline, \x01, DEL): Hudi's readers (hudi-rs
# among them) cannot read such a folder back, so labformat refuses it rather than encode it.
CONTROL_CHARACTER = "[\\x00-\\x1f\\x7f]"
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
        problem = column_name_problem(value) if label in fields else None
        if problem:
            raise InvalidInputError(f"{label} {value!r}: {problem}; no write could ever fill it, table not created")


def read_table_properties(storage: Storage) -> dict[str, str]:
    """`hoodie.properties`, checked (format, required keys, Hudi's checksum); when it is missing or fails
    a check, Hudi's backup copy `hoodie.properties.backup` if that one holds. TableNotFoundError when
    neither exists, CorruptTableError naming both problems when neither holds."""
    problems = []
    for rel in (P.PROPERTIES_PATH, P.BACKUP_PATH):
        try:
            text = storage.read_text(rel)
        except FileNotFoundError:
            problems.append(f"{rel} is missing")
            continue
        except UnicodeDecodeError as exc:
            problems.append(f"{rel} is not text ({exc})")
            continue
        except OSError as exc:
            raise storage_error(exc, f"reading {rel} of the table at {storage.base_uri}") from None
        try:
            return P.parse_properties(text, rel)
        except CorruptTableError as exc:
            problems.append(str(exc))
    if all(p.endswith("is missing") for p in problems):
        raise TableNotFoundError(f"{storage.base_uri} is not a table: no {P.PROPERTIES_PATH}")
    raise CorruptTableError(f"{storage.base_uri}: no readable table properties: " + "; ".join(problems))


# labformat's own key: which hash a BUCKET table's buckets were made with (Hudi reads past it).
BUCKET_HASH_KEY = "labformat.bucket.index.hash"


def bucket_hash_of(props: dict[str, str]) -> BucketHash:
    """The bucket hash a table says it uses. A table that names none is Hudi's (JAVA_HASHCODE), except
    a BUCKET table that also stores no `hoodie.bucket.index.hash.field`: labformat wrote those before it
    hashed as Hudi does (it stores `hoodie.index.type`, which Hudi keeps in its write config), with
    Spark's murmur3; an upsert keeps using that hash, so keys stay in their file groups."""
    stored = (props.get(BUCKET_HASH_KEY) or "").strip()
    if stored:
        try:
            return BucketHash(stored)
        except ValueError:
            raise CorruptTableError(f"{P.PROPERTIES_PATH}: {BUCKET_HASH_KEY}={stored} is not one of "
                                    f"{', '.join(h.value for h in BucketHash)}") from None
    legacy = (props.get(_key("index_type")) or "").strip().upper() == IndexType.BUCKET and not props.get(
        _key("bucket_hash_field"))
    return BucketHash.SPARK_MURMUR3 if legacy else BucketHash.JAVA_HASHCODE


def merge_mode_of(props: dict[str, str]) -> MergeMode:
    """The record merge mode `hoodie.properties` implies, as Hudi's readers infer it: the merge mode if
    stored, else the payload class (OverwriteWithLatestAvroPayload: commit time), else event time."""
    stored = (props.get(MERGE_MODE) or "").strip().upper()
    if stored in MergeMode.__members__:
        return MergeMode(stored)
    payload = next((props[k].strip() for k in PAYLOAD_CLASS_KEYS if (props.get(k) or "").strip()), "")
    if payload == OVERWRITE_WITH_LATEST:
        return MergeMode.COMMIT_TIME_ORDERING
    return MergeMode.EVENT_TIME_ORDERING


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
    # How record keys and partition paths are computed (Hudi's key generator, from hoodie.properties).
    keygen: KeyGenerator = None  # type: ignore[assignment]  # set by `new` and `from_properties`
    # False for a table Hudi wrote with hoodie.populate.meta.fields=false: its base files hold no
    # record keys or partition paths, so every lookup computes keys from the key fields.
    populate_meta_fields: bool = True
    create_schema: str | None = None  # hoodie.table.create.schema: the Avro schema Hudi created the table with
    table_type: TableType = TableType.COPY_ON_WRITE  # `hoodie.table.type`
    # Merge-on-read: the table's own `hoodie.compact.inline` and its delta-commit count (a write may override them).
    compact_inline: bool = False
    compact_inline_max_delta_commits: int = C.option("compact_inline_max_delta_commits").default
    merge_mode: MergeMode = MergeMode.COMMIT_TIME_ORDERING  # from the payload class or merge mode stored
    # BUCKET: the record-key fields a bucket is hashed from (empty: all of them), and how.
    bucket_hash_fields: tuple[str, ...] = ()
    bucket_hash: BucketHash = BucketHash.JAVA_HASHCODE
    bucket_engine: BucketEngine = BucketEngine.SIMPLE
    cdc_enabled: bool = False  # hoodie.table.cdc.enabled: writes record their changes (`write/cdc.py`)

    @property
    def merge_on_read(self) -> bool:
        return self.table_type is TableType.MERGE_ON_READ

    @classmethod
    def new(cls, options: C.TableOptions, name: str, record_key: str, precombine_field: str,
            partition_field: str | None) -> "TableConfig":
        """The config of a table being created from its table-scope options; InvalidInputError for a
        name `check_names` refuses."""
        check_names(name, record_key, precombine_field, partition_field or None)
        if options.bucket_engine is BucketEngine.CONSISTENT_HASHING and (
                options.index_type is not IndexType.BUCKET or options.table_type is not TableType.MERGE_ON_READ):
            raise ConfigError("hoodie.index.bucket.engine=CONSISTENT_HASHING needs hoodie.index.type=BUCKET and "
                              "hoodie.table.type=MERGE_ON_READ (as in Hudi: a split moves a bucket's records "
                              "while its updates keep going to log files)")
        hash_fields = tuple(options.bucket_hash_field.split(",")) if options.bucket_hash_field else ()
        if set(hash_fields) - {record_key}:
            raise ConfigError(f"hoodie.bucket.index.hash.field={options.bucket_hash_field}: the hash fields must be "
                              f"record key fields (hoodie.datasource.write.recordkey.field={record_key})")
        if options.table_type is not TableType.MERGE_ON_READ and options.compact_inline:
            raise ConfigError(f"hoodie.compact.inline=true needs hoodie.table.type=MERGE_ON_READ: compaction merges "
                              f"log files into base files, and a {options.table_type.value} table has none")
        return cls(
            name=name, record_key=record_key, precombine_field=precombine_field,
            partition_field=partition_field or None,
            hive_style_partitioning=options.hive_style_partitioning,
            index_type=options.index_type,
            bucket_num=options.bucket_num,
            metadata_enable=options.metadata_enable,
            column_stats_enable=options.metadata_enable and options.column_stats_enable,
            column_stats_columns=tuple(options.column_stats_columns.split(",")) if options.column_stats_columns else None,
            bloom_filter_enable=options.metadata_enable and options.bloom_filter_enable,
            keygen=KeyGenerator.for_fields(record_key, partition_field or None, options.hive_style_partitioning),
            table_type=options.table_type,
            compact_inline=options.compact_inline,
            compact_inline_max_delta_commits=options.compact_inline_max_delta_commits,
            bucket_hash_fields=(hash_fields or (record_key,)) if options.index_type is IndexType.BUCKET else (),
            bucket_engine=options.bucket_engine,
            cdc_enabled=options.cdc_enabled,
        )

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "TableConfig":
        """Parse `hoodie.properties` (already checked by `properties.parse_properties`); a value the
        registry cannot parse is a CorruptTableError naming the key."""

        def value(name: str) -> Any:
            opt = C.option(name)
            raw = props.get(_key(name))
            if raw is None:
                return False if name in _STORED_FLAGS else opt.default
            try:
                return opt.coerce(raw, _key(name))
            except ConfigError as exc:
                raise CorruptTableError(f"{P.PROPERTIES_PATH}: {exc}") from None

        def flag(key: str, default: bool) -> bool:
            # As Hudi reads a stored flag (Boolean.parseBoolean: "true" in any case is true), blank or
            # absent meaning the default; anything but true or false is no flag Hudi wrote.
            raw = (props.get(key) or "").strip().lower()
            if raw in ("true", "false"):
                return raw == "true"
            if not raw:
                return default
            raise CorruptTableError(f"{P.PROPERTIES_PATH}: {key}={props[key]!r}: expected true or false")

        columns = value("column_stats_columns")
        hive_style = value("hive_style_partitioning")
        hash_field = value("bucket_hash_field")
        return cls(
            name=props[P.TABLE_NAME], record_key=props[P.RECORD_KEY_FIELDS],
            precombine_field=props[P.PRECOMBINE_FIELD], partition_field=props.get(P.PARTITION_FIELDS) or None,
            hive_style_partitioning=hive_style,
            index_type=value("index_type"),
            bucket_num=value("bucket_num"),
            metadata_enable=value("metadata_enable"),
            column_stats_enable=value("column_stats_enable"),
            column_stats_columns=tuple(columns.split(",")) if columns else None,
            bloom_filter_enable=value("bloom_filter_enable"),
            keygen=KeyGenerator.from_properties(props, props[P.RECORD_KEY_FIELDS], props.get(P.PARTITION_FIELDS),
                                                hive_style),
            populate_meta_fields=flag(POPULATE_META_FIELDS, True),
            create_schema=props.get(CREATE_SCHEMA) or None,
            table_type=value("table_type"),
            compact_inline=value("compact_inline"),
            compact_inline_max_delta_commits=value("compact_inline_max_delta_commits"),
            merge_mode=merge_mode_of(props),
            bucket_hash_fields=tuple(hash_field.split(",")) if hash_field else (),
            bucket_hash=bucket_hash_of(props),
            bucket_engine=value("bucket_engine"),
            cdc_enabled=flag(_key("cdc_enabled"), False),
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
            "hoodie.table.keygenerator.class": self.keygen.class_name,
            PAYLOAD_CLASS_KEYS[0]: OVERWRITE_WITH_LATEST,
        }
        if self.partition_field:
            props[P.PARTITION_FIELDS] = self.partition_field
        props[_key("index_type")] = self.index_type.value
        for name in _STORED_FLAGS:
            props[_key(name)] = str(getattr(self, name)).lower()
        if self.column_stats_columns:
            props[_key("column_stats_columns")] = ",".join(self.column_stats_columns)
        if self.cdc_enabled:
            props[_key("cdc_enabled")] = "true"
            props[_key("cdc_supplemental_logging_mode")] = C.option("cdc_supplemental_logging_mode").default.value
        if self.index_type is IndexType.BUCKET:
            props[_key("bucket_num")] = str(self.bucket_num)
            props[_key("bucket_hash_field")] = ",".join(self.bucket_hash_fields)
            props[BUCKET_HASH_KEY] = self.bucket_hash.value
            if self.bucket_engine is not BucketEngine.SIMPLE:
                props[_key("bucket_engine")] = self.bucket_engine.value
        if (self.compact_inline, self.compact_inline_max_delta_commits) != (
                C.option("compact_inline").default, C.option("compact_inline_max_delta_commits").default):
            props[_key("compact_inline")] = str(self.compact_inline).lower()
            props[_key("compact_inline_max_delta_commits")] = str(self.compact_inline_max_delta_commits)
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
    # hoodie.properties as this table's `Table` read it: a write checks, under the lock, that the file
    # still says so (`check_same_table`), so that a table deleted and created again is never written
    # to with the old one's key or layout.
    properties: tuple[tuple[str, str], ...] = ()
    # The table's footers as planning reads them, shared by its contexts (`Table` holds one); a
    # context made without one gets its own.
    footers: FooterCache = None  # type: ignore[assignment]  # set in __post_init__ when not given

    def __post_init__(self) -> None:
        if self.footers is None:
            object.__setattr__(self, "footers", FooterCache(self.storage))

    def check_same_table(self) -> None:
        """TableChangedError unless `hoodie.properties` still holds what this context was made from."""
        if self.properties and tuple(read_table_properties(self.storage).items()) != self.properties:
            raise TableChangedError(f"{self.storage.base_uri}: the table was deleted and created again, or its "
                                    f"{P.PROPERTIES_PATH} changed, since this Table was opened; nothing was written. "
                                    "Open it again with Table.open")

    def refreshed(self) -> "TableContext":
        """The same table with its timeline loaded again from `.hoodie/`."""
        return replace(self, timeline=self.timeline.fresh())

    def at(self, as_of: "str | Instant | None") -> "Instant | None":
        """The completed instant a read as of `as_of` reads (None: the latest), resolved once:
        InstantNotFoundError for a time that is no completed commit, CleanedInstantError for one a
        clean no longer keeps readable."""
        if as_of is None or isinstance(as_of, Instant):
            return as_of
        return self.timeline.resolve_as_of(as_of)

    def file_system_view(self, at: "Instant | None" = None) -> FileSystemView:
        """The file groups and their latest slices as of `at` (an instant `at()` resolved), or now."""
        return FileSystemView(self.timeline, at.time if at is not None else None)

    def schema(self, at: "Instant | None" = None) -> T.StructType | None:
        """The data columns' Spark schema as of a commit (latest by default); None before any write.

        From what Hudi writes, newest first: the latest commit's Avro schema (`extraMetadata.schema`),
        where labformat's exact Spark schema beside it (`labformat.sparkSchema`) refines it (a short
        column stays short); else `hoodie.table.create.schema`; else the parquet schema of one
        latest base file (its footer only). A table with commits and none of these is a
        CorruptTableError: a read without its data columns would be silently wrong.
        """
        as_of = at.time if at is not None else None
        writes = self.timeline.completed_writes(as_of)
        for instant in reversed(writes):
            extra = self.timeline.commit_metadata(instant).extra_metadata
            for key, parse in ((SPARK_SCHEMA_KEY, lambda raw: T.StructType.fromJson(json.loads(raw))),
                               ("schema", spark_schema_from_avro)):
                raw = extra.get(key)
                if raw:
                    try:
                        return parse(raw)
                    except (ValueError, KeyError, TypeError) as exc:
                        raise CorruptTableError(f"commit {instant.time}: unreadable schema {key!r} ({exc})") from None
        if not writes:
            return None
        created = self.config.create_schema
        if created:
            try:
                return spark_schema_from_avro(created)
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptTableError(f"{P.PROPERTIES_PATH}: unreadable {CREATE_SCHEMA} ({exc})") from None
        slices = self.file_system_view(at).latest_file_slices()
        if slices:
            return data_schema_of(base_file_schema(self.storage.base_uri, slices[0].path))
        raise CorruptTableError(f"{self.storage.base_uri}: no schema found (no schema in its commits, no "
                                f"{CREATE_SCHEMA}, no base file); the table cannot be read")

    def avro_schema_text(self, data_schema: T.StructType) -> str | None:
        """The Avro schema text the table already records (latest commit, else the create schema) when it
        describes `data_schema`: a write keeps it as it is (Hudi's record names, fixed sizes, ...)."""
        writes = self.timeline.completed_writes()
        candidates = [self.timeline.commit_metadata(writes[-1]).schema] if writes else []
        candidates.append(self.config.create_schema)
        for text in candidates:
            if not text:
                continue
            try:
                found = spark_schema_from_avro(text)
            except (ValueError, KeyError, TypeError):
                continue
            if [f.name for f in found.fields] == data_schema.names and all(
                    same_type(a.dataType, b.dataType) for a, b in zip(found.fields, data_schema.fields)):
                return text
        return None

    def record_key_column(self, schema: T.StructType | None = None) -> Column:
        """Each row's record key, computed in Spark by the table's key generator; `schema`: the input's
        (a timestamp key field is rendered in UTC, whatever the session's time zone)."""
        return self.config.keygen.record_key_column(schema)

    @property
    def partitioned(self) -> bool:
        """Whether rows have partition paths (a partition field its key generator uses)."""
        return bool(self.config.partition_field and self.config.keygen.partition_fields)

    def partition_path_column(self, schema: T.StructType | None = None) -> Column:
        """Each row's partition path, computed in Spark ('' for a non-partitioned table).

        A path matching `UNSAFE_PARTITION_PATH` (`''`, `.`, `..`, `../../x`, `.hoodie`, `a//b`) fails
        the Spark job that computes it (`spark.tasks.refused_in_sql`), so the write ends in
        InvalidInputError before a file is written: an upsert computes every path before its
        instant starts; a bulk insert in its write tasks, and its instant is rolled back.
        """
        field = self.config.partition_field
        keygen = self.config.keygen
        if not self.partitioned:  # a non-partitioned key generator ignores the fields
            return F.lit("")
        if keygen.value_partitions:
            assert field is not None  # value partitions have one field
            value = F.coalesce(string_of(field, schema), F.lit(NULL_PARTITION))
            path = F.concat(F.lit(f"{field}="), value) if self.config.hive_style_partitioning else value
        else:  # several fields or a formatted time: the key generator's path
            value = path = keygen.partition_path_column(NULL_PARTITION, schema)
        escaped = F.lit(f"{INPUT_REJECTED}partition column {field!r}: value '")
        refused = refused_in_sql(InvalidInputError, F.concat(
            escaped, value, F.lit("' gives the partition path '"), path,
            F.lit("', which would leave the table's folder or enter .hoodie (empty, '.' and '..' "
                  "segments and '.hoodie' are refused; values are not URL-encoded)")))
        control = refused_in_sql(InvalidInputError, F.concat(
            escaped, F.regexp_replace(value, CONTROL_CHARACTER, "?"),
            F.lit("' (a control character shown as ?) holds a control character (tab, newline, \\x00-\\x1f, "
                  "\\x7f), which Hudi's readers cannot read back in a folder name; values are not URL-encoded")))
        return (F.when(path.rlike(UNSAFE_PARTITION_PATH), refused)
                .when(path.rlike(CONTROL_CHARACTER), control).otherwise(path))

    def schema_for_write(self, df: DataFrame, reconcile: bool = False) -> tuple[T.StructType, tuple[str, ...]]:
        """The data schema a write of `df` will have, and how it changes the table's: df's for a table
        never written, else the table's evolved by df (`schema.evolve`: columns added, types widened,
        with `reconcile` missing columns kept). Columns no write can take (nested, meta or helper
        names) are refused first (`check_writable`)."""
        current = self.schema()
        check_writable(df.schema, current)
        incoming = data_schema_of(df.schema)
        if current is None:
            return incoming, ()
        return evolve(current, incoming, reconcile)

    @staticmethod
    def conform_input(df: DataFrame, data_schema: T.StructType) -> DataFrame:
        """`df` with exactly the columns of `data_schema`, in its types: a narrower column cast up, a
        column the input lacks (reconciled) as nulls. Free when they already agree."""
        if [(f.name, f.dataType) for f in df.schema.fields] == [(f.name, f.dataType) for f in data_schema.fields]:
            return df
        present = set(df.columns)
        return df.select(*[(F.col(f.name) if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name)
                           if f.name not in present or df.schema[f.name].dataType != f.dataType else F.col(f.name)
                           for f in data_schema.fields],
                         *[c for c in df.columns if c not in {f.name for f in data_schema.fields}])

    def validate_input(self, df: DataFrame, need_precombine: bool, writes_rows: bool = True) -> None:
        """A write's input checks that need no pass over the data: the key, precombine and partition
        columns are there (InvalidInputError names the missing ones). The schema is checked by
        `schema_for_write`; record keys by the write tasks."""
        conf = self.config
        conf.keygen.check()  # ConfigError for a key generator labformat cannot compute keys with
        twice = duplicate_columns(df.columns)
        if twice:
            raise InvalidInputError(f"input has column(s) {', '.join(twice)} twice (Spark compares column names "
                                    "without case); table unchanged")
        # The first write fixes the schema: every field the table names must be one of its columns.
        first = writes_rows and not self.timeline.completed_writes()
        keygen = conf.keygen
        needed = list(keygen.record_key_fields) + ([conf.precombine_field] if need_precombine or first else []) + [
            f for f in keygen.partition_fields if f not in keygen.record_key_fields]
        missing = [c for c in needed if c not in set(df.columns)]
        if missing:
            raise InvalidInputError(f"input lacks column(s) {missing}; the table needs {needed}"
                                    + (" (this first write fixes the table's columns)" if first else ""))
        # Hudi has no one string for a binary value: its Avro key generators write hex, its Spark row
        # writer the JVM's name of the byte array. Cast here, bytes that are no UTF-8 would fail the
        # write tasks after the instant started.
        binary = [f.name for f in df.schema.fields if isinstance(f.dataType, T.BinaryType)
                  and (f.name in keygen.record_key_fields or f.name in keygen.partition_fields)]
        if binary:
            raise InvalidInputError(f"binary column(s) {', '.join(map(repr, binary))} as record key or partition "
                                    "field: Hudi has no string form for bytes that its writers agree on; write a "
                                    "string made from them (hex() or a UTF-8 decode); table unchanged")
        if not conf.populate_meta_fields:
            keygen.check_key_types(df.schema)
