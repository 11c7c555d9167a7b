"""Test fixtures: small copy-on-write tables written in Apache Hudi's version-6 layout, as Hudi's Spark writer leaves them.

Compared by hand with the v6 tables in hudi-rs's test data (`crates/test/data/sample_table/cow/`:
v6_nonpartitioned, v6_simplekeygen_nonhivestyle, v6_simplekeygen_hivestyle_no_metafields,
v6_complexkeygen_hivestyle, v6_timebasedkeygen_nonhivestyle; unzipped outside the repository,
2026-11-23). What these fixtures reproduce:

- `.hoodie/hoodie.properties`: Hudi's keys (`hoodie.table.keygenerator.class`,
  `hoodie.table.recordkey.fields=id,name`, `hoodie.table.partition.fields=byteField,shortField`,
  `hoodie.datasource.write.hive_style_partitioning`, `hoodie.populate.meta.fields=false` only when
  off, `hoodie.table.create.schema`, `hoodie.keygen.timebased.input/output.dateformat` for the
  timestamp-based table, which stores no `timestamp.type`), `:` and `=` escaped as Java does;
- per instant: an empty `<t>.commit.requested`, `<t>.inflight`, and `<t>.commit` JSON with
  `partitionToWriteStats`, `compacted: false`, `extraMetadata.schema` (the Avro schema of the
  data columns only, `["null", type]` unions, decimals as `fixed` of the smallest size) and
  `operationType: UPSERT`; the empty `.aux/.bootstrap/.partitions|.fileids`, `.temp`, `.schema`
  and `archived` folders;
- partition folders (`byteField=20/shortField=100`, `2023/04/01/12`) each with a
  `.hoodie_partition_metadata` (commitTime, partitionDepth);
- base files `<uuid>-0_<task>-<stage>-<attempt>_<instant>.parquet`, the five meta columns first
  (`_hoodie_record_key` `id:4,name:Diana` for complex keys, `_hoodie_commit_seqno`
  `<instant>_<task>_<n>`), footer keys `hoodie_min_record_key` / `hoodie_max_record_key`; a table
  without meta fields has the meta columns all null but `_hoodie_file_name`, and no key footers
  (as hudi-rs's v6 no_metafields files are).

With `legacy_lists`, lists as Hudi's Avro writer leaves them (parquet-avro's
`parquet.avro.write-old-list-structure`, on by default): the element named `array` and never null.
pyarrow cannot write that 2-level layout (`repeated group array`); it writes the 3-level one with
those names (`use_compliant_nested_type=False`), which pyarrow and hudi-rs read as the same Arrow type
(`list<array: T not null>`, checked against a 2-level file Spark's legacy writer wrote,
`test_hudi_tables.py`).

Not reproduced: Hudi's Java-serialized bloom filter (`org.apache.hudi.bloomfilter`),
`parquet.avro.schema`, GZIP compression.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

from labformat.properties import table_checksum

META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name")
KEYGEN = "org.apache.hudi.keygen."

# The data columns of hudi-rs's v6 sample tables (nested types, a fixed decimal, a date, a
# micro-second timestamp), trimmed to a few rows.
SCHEMA = pa.schema([
    ("id", pa.int32()), ("name", pa.string()), ("isActive", pa.bool_()),
    ("byteField", pa.int32()), ("shortField", pa.int32()), ("longField", pa.int64()),
    ("doubleField", pa.float64()), ("decimalField", pa.decimal128(10, 5)), ("dateField", pa.date32()),
    ("timestampField", pa.timestamp("us", tz="UTC")), ("binaryField", pa.binary()),
    ("arrayField", pa.list_(pa.struct([("arr_struct_f1", pa.string()), ("arr_struct_f2", pa.int32())]))),
    ("mapField", pa.map_(pa.string(), pa.struct([("map_field_value_struct_f1", pa.float64()),
                                                  ("map_field_value_struct_f2", pa.bool_())]))),
    ("structField", pa.struct([("field1", pa.string()), ("field2", pa.int32()),
                               ("child_struct", pa.struct([("child_field1", pa.float64()),
                                                           ("child_field2", pa.bool_())]))])),
    ("ts_str", pa.string()), ("ts_ms", pa.int64()),
])


# Every nested shape a Hudi table's Avro schema can give a column, beyond SCHEMA's list of records,
# map of records and record of records: lists of primitives, of lists and of maps, a map of lists,
# a record holding a list.
NESTED_SCHEMA = pa.schema(list(SCHEMA) + [
    ("intList", pa.list_(pa.int32())),
    ("listOfList", pa.list_(pa.list_(pa.string()))),
    ("listOfMap", pa.list_(pa.map_(pa.string(), pa.int64()))),
    ("mapOfList", pa.map_(pa.string(), pa.list_(pa.float64()))),
    ("structWithList", pa.struct([("label", pa.string()), ("tags", pa.list_(pa.string()))])),
])


def nested_row(i: int, name: str, byte: int, short: int, long_field: int, ts_str: str = "2023-04-01T12:01:00.123Z") -> dict:
    """One record in NESTED_SCHEMA (no null list element: the legacy layout cannot hold one)."""
    return row(i, name, byte, short, long_field, ts_str) | {
        "intList": [i, i + 1], "listOfList": [[f"x{i}"], [], [f"y{i}", "z"]], "listOfMap": [[("m", i)], [("n", -i), ("o", 0)]],
        "mapOfList": [(f"k{i}", [i / 2, 0.5])], "structWithList": {"label": name, "tags": [f"t{i}"]},
    }


def legacy_list_type(t: pa.DataType) -> pa.DataType:
    """`t` with every list's element named `array` and not null, at any depth (parquet-avro's old lists)."""
    if pa.types.is_list(t):
        return pa.list_(pa.field("array", legacy_list_type(t.value_type), nullable=False))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(legacy_list_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(legacy_list_type(t.key_type)),
                       t.item_field.with_type(legacy_list_type(t.item_type)))
    return t


def row(i: int, name: str, byte: int, short: int, long_field: int, ts_str: str = "2023-04-01T12:01:00.123Z") -> dict:
    """One record in SCHEMA; `i` makes every other value distinct."""
    return {
        "id": i, "name": name, "isActive": i % 2 == 0, "byteField": byte, "shortField": short,
        "longField": long_field, "doubleField": i * 1.5, "decimalField": Decimal(f"{i}2345.67890"),
        "dateField": date(2023, 4, i % 28 + 1),
        "timestampField": datetime(2023, 4, 1, 12, i, tzinfo=timezone.utc),
        "binaryField": f"bin{i}".encode(),
        "arrayField": [{"arr_struct_f1": f"a{i}", "arr_struct_f2": i}, {"arr_struct_f1": None, "arr_struct_f2": -i}],
        "mapField": [(f"k{i}", {"map_field_value_struct_f1": i / 4, "map_field_value_struct_f2": True})],
        "structField": {"field1": name, "field2": i * 10,
                        "child_struct": {"child_field1": i / 8, "child_field2": i % 3 == 0}},
        "ts_str": ts_str,
        "ts_ms": int(datetime.fromisoformat(ts_str.replace("Z", "+00:00")).timestamp() * 1000),
    }


@dataclass(frozen=True)
class Layout:
    """How a table computes its keys: Hudi's key generator class and fields, folder style, meta fields."""

    name: str
    keygen: str  # class name after org.apache.hudi.keygen.
    record_key: tuple[str, ...]
    partition: tuple[str, ...] = ()
    hive_style: bool = False
    meta_fields: bool = True
    timebased: dict[str, str] = field(default_factory=dict)  # hoodie.keygen.timebased.* as stored
    # The timestamp-based generator's expected folder of a record, in Python (the oracle).
    time_folder: object = None

    def record_key_of(self, r: dict) -> str:
        if len(self.record_key) == 1 and self.keygen != "ComplexKeyGenerator":
            return str(r[self.record_key[0]])
        parts = []
        for f in self.record_key:
            v = r[f]
            parts.append(f"{f}:" + ("__null__" if v is None else "__empty__" if v == "" else str(v)))
        return ",".join(parts)

    def partition_of(self, r: dict) -> str:
        if not self.partition:
            return ""
        if self.keygen == "TimestampBasedKeyGenerator":
            value = self.time_folder(r)
            return f"{self.partition[0]}={value}" if self.hive_style else value
        folders = []
        for f in self.partition:
            v = r[f]
            v = "default" if v is None or v == "" else str(v)
            folders.append(f"{f}={v}" if self.hive_style else v)
        return "/".join(folders)


def _avro_type(t: pa.DataType, name: str, namespace: str):
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_binary(t):
        return "bytes"
    if pa.types.is_decimal(t):
        size = math.ceil((t.precision * math.log2(10) + 1) / 8)  # Hudi: precision 10 -> fixed(5)
        return {"type": "fixed", "name": "fixed", "namespace": f"{namespace}.{name}", "size": size,
                "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if pa.types.is_struct(t):
        return {"type": "record", "name": name, "namespace": namespace,
                "fields": [{"name": f.name, "type": ["null", _avro_type(f.type, f.name, f"{namespace}.{name}")],
                            "default": None} for f in t]}
    if pa.types.is_list(t):
        return {"type": "array", "items": ["null", _avro_type(t.value_type, name, namespace)]}
    if pa.types.is_map(t):
        return {"type": "map", "values": ["null", _avro_type(t.item_type, name, namespace)]}
    raise TypeError(t)


def avro_schema(schema: pa.Schema, table: str) -> str:
    """The data columns' Avro schema as Hudi's commits carry it."""
    namespace = f"hoodie.{table}"
    record = f"{table}_record"
    return json.dumps({"type": "record", "name": record, "namespace": namespace,
                       "fields": [{"name": f.name, "type": ["null", _avro_type(f.type, f.name, f"{namespace}.{record}")],
                                   "default": None} for f in schema]})


def _java_escape(text: str) -> str:
    return "".join("\\" + c if c in ":=#!\\" else c for c in text)


def _write(path: str, data: bytes | str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)


@dataclass
class _FileGroup:
    partition: str
    file_id: str
    rows: dict[str, dict]  # record key -> row
    path: str | None = None
    instant: str | None = None


def write_table(root: str, layout: Layout, commits: list[list[dict]], schema: pa.Schema = SCHEMA,
                extra_properties: dict[str, str] | None = None, bucket_of=None, legacy_lists: bool = False) -> str:
    """Write `commits` (each a batch of records, upserted in turn) as Hudi would: one file group per
    partition, rewritten whole when a later commit updates or adds records to it. Returns `root`.
    `bucket_of(record key)`: a bucket table's bucket of a key; then one file group per partition and
    bucket, its file id starting with the 8-digit bucket number as Hudi's bucket index names them."""
    os.makedirs(os.path.join(root, ".hoodie"), exist_ok=True)
    for folder in (".aux/.bootstrap/.partitions", ".aux/.bootstrap/.fileids", ".temp", ".schema", "archived"):
        os.makedirs(os.path.join(root, ".hoodie", folder), exist_ok=True)
    avro = avro_schema(schema, layout.name)
    props = {
        "hoodie.table.precombine.field": "longField",
        "hoodie.datasource.write.drop.partition.columns": "false",
        **({"hoodie.table.partition.fields": ",".join(layout.partition)} if layout.partition else {}),
        "hoodie.table.type": "COPY_ON_WRITE",
        "hoodie.archivelog.folder": "archived",
        **({"hoodie.populate.meta.fields": "false"} if not layout.meta_fields else {}),
        "hoodie.timeline.layout.version": "1",
        "hoodie.table.version": "6",
        **layout.timebased,
        "hoodie.table.recordkey.fields": ",".join(layout.record_key),
        "hoodie.database.name": "default",
        "hoodie.datasource.write.partitionpath.urlencode": "false",
        "hoodie.table.name": layout.name,
        "hoodie.table.keygenerator.class": KEYGEN + layout.keygen,
        "hoodie.datasource.write.hive_style_partitioning": str(layout.hive_style).lower(),
        "hoodie.table.create.schema": avro,
        **(extra_properties or {}),
    }
    # Hudi's checksum of the database and table names, written last as Hudi's own tables have it.
    props["hoodie.table.checksum"] = table_checksum(props)
    text = "#Properties saved on 2024-04-18T22:32:13.522Z\n#Thu Apr 18 17:32:13 CDT 2024\n" + "".join(
        f"{k}={_java_escape(v)}\n" for k, v in props.items())
    _write(os.path.join(root, ".hoodie", "hoodie.properties"), text)
    groups: dict[str, _FileGroup] = {}
    for n, batch in enumerate(commits):
        instant = f"202404181732{13 + n:02d}674"
        _write(os.path.join(root, ".hoodie", f"{instant}.commit.requested"), b"")
        _write(os.path.join(root, ".hoodie", f"{instant}.inflight"), b"")
        touched: dict[str, tuple[_FileGroup, int, int, str]] = {}
        for r in batch:
            part = layout.partition_of(r)
            key = layout.record_key_of(r)
            bucket = bucket_of(key) if bucket_of is not None else None
            if (part, bucket) not in groups:
                file_id = f"{uuid.uuid4()}-0"
                if bucket is not None:
                    file_id = f"{bucket:08d}{file_id[8:]}"
                groups[part, bucket] = _FileGroup(part, file_id, {})
            group = groups[part, bucket]
            before = touched.get((part, bucket), (group, 0, 0, group.instant or "null"))
            updated = key in group.rows
            group.rows[key] = dict(r)
            touched[part, bucket] = (group, before[1] + (0 if updated else 1), before[2] + (1 if updated else 0),
                                     before[3])
        stats = {}
        for task, ((part, _), (group, inserts, updates, prev)) in enumerate(sorted(
                touched.items(), key=lambda item: (item[0][0], item[0][1] or 0))):
            name = f"{group.file_id}_{task}-{140 + n}-{198 + task}_{instant}.parquet"
            rel = f"{part}/{name}" if part else name
            _write_base_file(os.path.join(root, rel), group, layout, schema, instant, task, name, legacy_lists)
            if part and not os.path.exists(os.path.join(root, part, ".hoodie_partition_metadata")):
                _write(os.path.join(root, part, ".hoodie_partition_metadata"),
                       f"#partition metadata\n#Thu Apr 18 17:32:14 CDT 2024\ncommitTime={instant}\n"
                       f"partitionDepth={part.count('/') + 1}\n")
            size = os.path.getsize(os.path.join(root, rel))
            stats.setdefault(part, []).append({
                "fileId": group.file_id, "path": rel, "cdcStats": None, "prevCommit": prev,
                "numWrites": len(group.rows), "numDeletes": 0, "numUpdateWrites": updates, "numInserts": inserts,
                "totalWriteBytes": size, "totalWriteErrors": 0, "tempPath": None, "partitionPath": part,
                "totalLogRecords": 0, "totalLogFilesCompacted": 0, "totalLogSizeCompacted": 0,
                "totalUpdatedRecordsCompacted": 0, "totalLogBlocks": 0, "totalCorruptLogBlock": 0,
                "totalRollbackBlocks": 0, "fileSizeInBytes": size, "minEventTime": None, "maxEventTime": None,
                "runtimeStats": {"totalScanTime": 0, "totalUpsertTime": 0, "totalCreateTime": 1}})
            group.path, group.instant = rel, instant
        body = {"partitionToWriteStats": stats, "compacted": False, "extraMetadata": {"schema": avro},
                "operationType": "UPSERT"}
        _write(os.path.join(root, ".hoodie", f"{instant}.commit"), json.dumps(body, indent=2))
    return root


def _write_base_file(path: str, group: _FileGroup, layout: Layout, schema: pa.Schema, instant: str, task: int,
                     name: str, legacy_lists: bool = False) -> None:
    keys = sorted(group.rows)
    rows = [group.rows[k] for k in keys]
    n = len(rows)
    if layout.meta_fields:
        meta = {"_hoodie_commit_time": [instant] * n,
                "_hoodie_commit_seqno": [f"{instant}_{task}_{i}" for i in range(n)],
                "_hoodie_record_key": keys, "_hoodie_partition_path": [group.partition] * n,
                "_hoodie_file_name": [name] * n}
    else:
        meta = {c: [None] * n for c in META[:4]} | {"_hoodie_file_name": [name] * n}
    columns = [pa.array(meta[c], pa.string()) for c in META] + [
        pa.array([r[f.name] for r in rows], f.type) for f in schema]
    table = pa.Table.from_arrays(columns, schema=pa.schema([pa.field(c, pa.string()) for c in META] + list(schema)))
    footer = {"hoodie_min_record_key": keys[0], "hoodie_max_record_key": keys[-1]} if layout.meta_fields else {}
    table = table.replace_schema_metadata({"writer.model.name": "avro", **footer})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if legacy_lists:
        table = table.cast(pa.schema([f.with_type(legacy_list_type(f.type)) for f in table.schema],
                                     metadata=table.schema.metadata))
    pq.write_table(table, path, use_compliant_nested_type=not legacy_lists)
