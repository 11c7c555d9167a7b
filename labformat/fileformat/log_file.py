"""Hudi log files: the block format of a merge-on-read file slice's log (data, delete and rollback blocks), written and read.

A log file is a sequence of blocks, each laid out as Hudi's log format version 1 writes it
(all integers big-endian)::

    #HUDI#                     magic, 6 bytes
    block length               8 bytes: the bytes that follow, up to and including the reverse pointer
    log format version         4 bytes (1)
    block type                 4 bytes (0 command, 1 delete, 3 Avro data, 5 parquet data)
    header                     4 bytes entry count, then per entry: 4 bytes key, 4 bytes length, UTF-8 value
    content length             8 bytes, then the content
    footer                     as the header (labformat writes none)
    reverse pointer            8 bytes: this block's size from the magic up to here, so a reader can walk back

Contents (block version 3, the one hudi-rs reads):

- Avro data block: version, record count (4 bytes each), then per record its length (4 bytes)
  and the record in Avro's binary encoding, under the writer schema of the SCHEMA header;
- delete block: version, the byte length of one Avro `HoodieDeleteRecordList` datum, the
  datum: (record key, partition path, ordering value) per deleted record;
- rollback command block: no content; its header names the instant it rolls back.

Everything here runs inside Spark tasks (writers) or on small files (readers): plain bytes and
pyarrow, no Spark.
"""

from __future__ import annotations

import enum
import io
import json
import struct
from dataclasses import dataclass, field
from typing import Any, Iterable

import fastavro
import pyarrow as pa

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
_RECORD_KEY = "_hoodie_record_key"
# The content version of data and delete blocks: hudi-rs refuses any other.
BLOCK_VERSION = 3
# Hudi's command block type for a rollback (the only command there is).
ROLLBACK_COMMAND = "0"


class BlockType(enum.IntEnum):
    COMMAND = 0
    DELETE = 1
    CORRUPTED = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5


class HeaderKey(enum.IntEnum):
    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3


class LogFormatError(ValueError):
    """Bytes that are not a log file, or a block this module cannot decode."""


# A delete block's content is one Avro datum of Hudi's HoodieDeleteRecordList: an array of
# (recordKey: [null, string], partitionPath: [null, string], orderingVal: a union of null, int,
# long, float, double, bytes, string, decimal, date, time-millis, time-micros, timestamp-millis,
# timestamp-micros, in that order). The branch a writer picks is the type a reader compares with
# the precombine field; several branches share one Avro type, so only the index tells them apart.
_ORDERING_BRANCHES = {"int": 1, "long": 2, "float": 3, "double": 4, "string": 6, "date": 8,
                      "timestamp-millis": 11, "timestamp-micros": 12}


@dataclass(frozen=True)
class LogBlock:
    """One block of a log file: its type, header entries and raw content."""

    block_type: BlockType
    header: dict[HeaderKey, str]
    content: bytes = b""
    footer: dict[HeaderKey, str] = field(default_factory=dict)

    @property
    def instant_time(self) -> str:
        return self.header[HeaderKey.INSTANT_TIME]

    @property
    def is_rollback(self) -> bool:
        return (self.block_type == BlockType.COMMAND
                and self.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == ROLLBACK_COMMAND)

    def to_bytes(self) -> bytes:
        """The block as it is appended to a log file."""
        body = b"".join([
            struct.pack(">ii", LOG_FORMAT_VERSION, int(self.block_type)),
            _metadata_bytes(self.header),
            struct.pack(">q", len(self.content)), self.content,
            _metadata_bytes(self.footer),
        ])
        # The block length counts the reverse pointer too; the reverse pointer counts the magic and
        # the block length field but not itself.
        size_before_pointer = len(MAGIC) + 8 + len(body)
        return MAGIC + struct.pack(">q", len(body) + 8) + body + struct.pack(">q", size_before_pointer)


def _metadata_bytes(entries: dict[HeaderKey, str]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for key, value in entries.items():
        raw = value.encode("utf-8")
        out.append(struct.pack(">ii", int(key), len(raw)))
        out.append(raw)
    return b"".join(out)


def _read_metadata(buf: io.BytesIO) -> dict[HeaderKey, str]:
    (count,) = struct.unpack(">i", _read_exact(buf, 4))
    out = {}
    for _ in range(count):
        key, length = struct.unpack(">ii", _read_exact(buf, 8))
        value = _read_exact(buf, length).decode("utf-8")
        try:
            out[HeaderKey(key)] = value
        except ValueError:
            pass  # a header key of a later Hudi (record positions, block identifier, ...): not ours to use
    return out


def _read_exact(buf: io.BytesIO, n: int) -> bytes:
    data = buf.read(n)
    if len(data) != n:
        raise LogFormatError(f"log block cut short: wanted {n} bytes, found {len(data)}")
    return data


def read_blocks(data: bytes) -> list[LogBlock]:
    """Every block of a log file's bytes, in order; LogFormatError on bytes that are not one."""
    buf = io.BytesIO(data)
    blocks: list[LogBlock] = []
    while True:
        magic = buf.read(len(MAGIC))
        if not magic:
            return blocks
        if magic != MAGIC:
            raise LogFormatError(f"no log block magic at byte {buf.tell() - len(magic)}")
        (length,) = struct.unpack(">q", _read_exact(buf, 8))
        end = buf.tell() + length
        version, block_type = struct.unpack(">ii", _read_exact(buf, 8))
        if version != LOG_FORMAT_VERSION:
            raise LogFormatError(f"log format version {version}; only {LOG_FORMAT_VERSION} is read")
        header = _read_metadata(buf)
        (content_length,) = struct.unpack(">q", _read_exact(buf, 8))
        content = _read_exact(buf, content_length)
        footer = _read_metadata(buf)
        buf.seek(end)
        blocks.append(LogBlock(BlockType(block_type), header, content, footer))


# ---- data blocks --------------------------------------------------------------------------------

def avro_data_block(table: pa.Table, writer_schema: str, instant_time: str) -> LogBlock:
    """The rows of `table` (meta columns first, named as in `writer_schema`, an Avro record schema
    in JSON) as an Avro data block of `instant_time`."""
    parsed = fastavro.parse_schema(json.loads(writer_schema))
    names = [f["name"] for f in json.loads(writer_schema)["fields"]]
    out = io.BytesIO()
    out.write(struct.pack(">ii", BLOCK_VERSION, table.num_rows))
    record = io.BytesIO()
    for row in table.select(names).to_pylist():
        record.seek(0)
        record.truncate()
        fastavro.schemaless_writer(record, parsed, row)
        encoded = record.getvalue()
        out.write(struct.pack(">i", len(encoded)))
        out.write(encoded)
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: writer_schema}
    return LogBlock(BlockType.AVRO_DATA, header, out.getvalue())


def data_block_records(block: LogBlock, arrow_schema: pa.Schema) -> pa.Table:
    """An Avro data block's records as an Arrow table of `arrow_schema` (columns by name)."""
    if block.block_type != BlockType.AVRO_DATA:
        raise LogFormatError(f"not an Avro data block: {block.block_type.name}")
    writer = fastavro.parse_schema(json.loads(block.header[HeaderKey.SCHEMA]))
    buf = io.BytesIO(block.content)
    version, count = struct.unpack(">ii", _read_exact(buf, 8))
    if version != BLOCK_VERSION:
        raise LogFormatError(f"data block version {version}; only {BLOCK_VERSION} is read")
    rows = []
    for _ in range(count):
        (length,) = struct.unpack(">i", _read_exact(buf, 4))
        rows.append(fastavro.schemaless_reader(io.BytesIO(_read_exact(buf, length)), writer, None))
    return pa.Table.from_pylist(rows, schema=arrow_schema)


def data_block_keys(block: LogBlock) -> list[str]:
    """The record keys of an Avro data block, decoding only that field."""
    writer = json.loads(block.header[HeaderKey.SCHEMA])
    reader = fastavro.parse_schema({"type": "record", "name": writer["name"], "namespace": writer.get("namespace", ""),
                                    "fields": [f for f in writer["fields"] if f["name"] == _RECORD_KEY]})
    parsed = fastavro.parse_schema(writer)
    buf = io.BytesIO(block.content)
    _, count = struct.unpack(">ii", _read_exact(buf, 8))
    keys = []
    for _ in range(count):
        (length,) = struct.unpack(">i", _read_exact(buf, 4))
        record = fastavro.schemaless_reader(io.BytesIO(_read_exact(buf, length)), parsed, reader)
        assert isinstance(record, dict)  # the reader schema is a record
        keys.append(record[_RECORD_KEY])
    return keys


def block_keys(blocks: Iterable[LogBlock]) -> set[str]:
    """Every record key the data and delete blocks name (what an index must find in a file slice's logs)."""
    keys: set[str] = set()
    for block in blocks:
        if block.block_type == BlockType.AVRO_DATA:
            keys.update(data_block_keys(block))
        elif block.block_type == BlockType.DELETE:
            keys.update(k for k, _, _ in deleted_records(block) if k is not None)
    return keys


def key_states(blocks: Iterable[LogBlock]) -> dict[str, bool]:
    """Each key these blocks name, and whether its last word (in log order) keeps it (a data block)
    or removes it (a delete block) from the file slice."""
    alive: dict[str, bool] = {}
    for block in blocks:
        if block.block_type == BlockType.AVRO_DATA:
            alive.update((k, True) for k in data_block_keys(block))
        elif block.block_type == BlockType.DELETE:
            alive.update((k, False) for k, _, _ in deleted_records(block) if k is not None)
    return alive


def keys_deleted_last(blocks: Iterable[LogBlock]) -> list[str]:
    """The keys whose last word in these blocks (in log order) is a delete: gone from the file slice,
    though its base file may still hold them."""
    return sorted(k for k, live in key_states(blocks).items() if not live)


def live_blocks(blocks: Iterable[LogBlock]) -> list[LogBlock]:
    """The data and delete blocks that count: without command blocks, and without the blocks of
    instants a rollback command block names (as Hudi's log scanner does)."""
    blocks = list(blocks)
    rolled_back = {b.header.get(HeaderKey.TARGET_INSTANT_TIME) for b in blocks if b.is_rollback}
    return [b for b in blocks if b.block_type != BlockType.COMMAND and b.instant_time not in rolled_back]


# ---- delete blocks ------------------------------------------------------------------------------

def ordering_branch(arrow_type: pa.DataType) -> int:
    """The branch of the delete record's ordering-value union that holds values of `arrow_type`."""
    if pa.types.is_timestamp(arrow_type):
        return _ORDERING_BRANCHES["timestamp-micros" if arrow_type.unit in ("us", "ns") else "timestamp-millis"]
    if pa.types.is_date(arrow_type):
        return _ORDERING_BRANCHES["date"]
    if pa.types.is_int64(arrow_type):
        return _ORDERING_BRANCHES["long"]
    if pa.types.is_integer(arrow_type):
        return _ORDERING_BRANCHES["int"]
    if pa.types.is_float32(arrow_type):
        return _ORDERING_BRANCHES["float"]
    if pa.types.is_floating(arrow_type):
        return _ORDERING_BRANCHES["double"]
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return _ORDERING_BRANCHES["string"]
    raise LogFormatError(f"no delete-block ordering type for {arrow_type}")


def delete_block(keys: Iterable[str], partition_path: str, ordering_values: Iterable[Any],
                 ordering_type: pa.DataType, instant_time: str) -> LogBlock:
    """A delete block of `instant_time`: one (record key, partition path, ordering value) per key.

    The ordering value is written in the union branch of `ordering_type` (the precombine
    field's type), so that a reader compares it with the records' own values. Encoded by hand:
    the union holds several branches of one Avro type (long, timestamp-micros, ...), and only
    the branch index tells them apart.
    """
    branch = ordering_branch(ordering_type)
    records = [(k, v) for k, v in zip(keys, ordering_values)]
    out = io.BytesIO()
    if records:
        _write_long(out, len(records))
        for key, value in records:
            _write_long(out, 1)
            _write_string(out, key)
            _write_long(out, 1)
            _write_string(out, partition_path)
            _write_long(out, branch)
            _write_ordering(out, branch, value)
    _write_long(out, 0)  # end of the array
    raw = out.getvalue()
    content = struct.pack(">ii", BLOCK_VERSION, len(raw)) + raw
    return LogBlock(BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant_time}, content)


def deleted_records(block: LogBlock) -> list[tuple[str | None, str | None, Any]]:
    """A delete block's (record key, partition path, ordering value) entries (Hudi's Avro allows a null
    key or path); timestamps as microseconds since the epoch, dates as days."""
    if block.block_type != BlockType.DELETE:
        raise LogFormatError(f"not a delete block: {block.block_type.name}")
    buf = io.BytesIO(block.content)
    version, length = struct.unpack(">ii", _read_exact(buf, 8))
    if version != BLOCK_VERSION:
        raise LogFormatError(f"delete block version {version}; only {BLOCK_VERSION} is read")
    datum = io.BytesIO(_read_exact(buf, length))
    out: list[tuple[str | None, str | None, Any]] = []
    while True:
        count = _read_long(datum)
        if count == 0:
            return out
        if count < 0:  # a block of -count items, preceded by its byte size
            count = -count
            _read_long(datum)
        for _ in range(count):
            key = _read_string(datum) if _read_long(datum) == 1 else None
            partition = _read_string(datum) if _read_long(datum) == 1 else None
            branch = _read_long(datum)
            out.append((key, partition, _read_ordering(datum, branch)))


_INT_BRANCHES = {1, 2, 8, 9, 10, 11, 12}


def _write_ordering(out: io.BytesIO, branch: int, value: Any) -> None:
    if branch in _INT_BRANCHES:
        _write_long(out, int(value))
    elif branch == 3:
        out.write(struct.pack("<f", value))
    elif branch == 4:
        out.write(struct.pack("<d", value))
    elif branch == 6:
        _write_string(out, value)
    elif branch != 0:
        raise LogFormatError(f"ordering branch {branch} is not written by labformat")


def _read_ordering(buf: io.BytesIO, branch: int) -> Any:
    if branch == 0:
        return None
    if branch in _INT_BRANCHES:
        return _read_long(buf)
    if branch == 3:
        return struct.unpack("<f", _read_exact(buf, 4))[0]
    if branch == 4:
        return struct.unpack("<d", _read_exact(buf, 8))[0]
    if branch in (5, 6, 7):
        raw = _read_exact(buf, _read_long(buf))
        return raw.decode("utf-8") if branch == 6 else raw
    raise LogFormatError(f"unknown ordering branch {branch}")


def _write_long(out: io.BytesIO, n: int) -> None:
    """Avro's long: zig-zag, then 7 bits a byte, low bits first."""
    z = (n << 1) ^ (n >> 63)
    while z & ~0x7F:
        out.write(bytes([(z & 0x7F) | 0x80]))
        z >>= 7
    out.write(bytes([z]))


def _read_long(buf: io.BytesIO) -> int:
    shift = z = 0
    while True:
        b = _read_exact(buf, 1)[0]
        z |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (z >> 1) ^ -(z & 1)


def _write_string(out: io.BytesIO, text: str) -> None:
    raw = text.encode("utf-8")
    _write_long(out, len(raw))
    out.write(raw)


def _read_string(buf: io.BytesIO) -> str:
    return _read_exact(buf, _read_long(buf)).decode("utf-8")


# ---- command blocks -----------------------------------------------------------------------------

def rollback_block(instant_time: str, target_instant_time: str) -> LogBlock:
    """A rollback command block: readers drop the blocks of `target_instant_time` in this file slice."""
    return LogBlock(BlockType.COMMAND, {HeaderKey.INSTANT_TIME: instant_time,
                                        HeaderKey.TARGET_INSTANT_TIME: target_instant_time,
                                        HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND})
