"""`.hoodie/hoodie.properties`: the table's identity and fixed settings, in Java properties format."""

from __future__ import annotations

from typing import Iterator
import zlib

from labformat.errors import CorruptTableError
from labformat.model.enums import TableType

PROPERTIES_PATH = ".hoodie/hoodie.properties"
# Hudi's copy of the file, read when hoodie.properties is missing or fails its checksum.
BACKUP_PATH = ".hoodie/hoodie.properties.backup"
TABLE_CHECKSUM = "hoodie.table.checksum"
DATABASE_NAME = "hoodie.database.name"
# The first comment line of every file labformat writes since it writes the checksum: such a file
# without a checksum line (always the last) was cut short. Comments come first, so they survive.
_HEADER = "#Properties saved by labformat; hoodie.table.checksum is the last line"

TABLE_NAME = "hoodie.table.name"
TABLE_TYPE = "hoodie.table.type"
TABLE_VERSION = "hoodie.table.version"
TIMELINE_LAYOUT_VERSION = "hoodie.timeline.layout.version"
RECORD_KEY_FIELDS = "hoodie.table.recordkey.fields"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
PARTITION_FIELDS = "hoodie.table.partition.fields"
HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"

# What a version-6 table must say about itself (its type is one of TABLE_TYPES).
REQUIRED = {TABLE_TYPE: TableType.COPY_ON_WRITE.value, TABLE_VERSION: "6", TIMELINE_LAYOUT_VERSION: "1"}
TABLE_TYPES = tuple(t.value for t in TableType)


# Java's escapes for characters that end a key or a line, or that start a comment (Properties.store).
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
            "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}
_UNESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def control_characters(text: str) -> list[str]:
    """The control characters in `text` (newline, carriage return, tab, NUL, DEL, ...), as reprs;
    a table's name and field names must have none."""
    return sorted({repr(c) for c in text if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0})


def _escape(text: str, is_key: bool) -> str:
    """`text` as `java.util.Properties.store` writes it: escapes for `\\`, `=`, `:`, `#`, `!`, tab,
    newline, CR and form feed, `\\ ` for a key's spaces and a value's leading space, and `\\uXXXX`
    for every character outside printable ASCII. The file is then ASCII, and no value can start
    a line of its own."""
    out = []
    for i, c in enumerate(text):
        if c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif not " " <= c <= "~":
            out.extend(f"\\u{unit:04X}" for unit in _utf16_units(c))
        else:
            out.append(c)
    return "".join(out)


def _utf16_units(c: str) -> list[int]:
    data = c.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def table_checksum(props: dict[str, str]) -> str:
    """Hudi's `hoodie.table.checksum`: the CRC32 of `<database name>.<table name>` (the database name
    empty when unset) in UTF-8, as an unsigned decimal number (HoodieTableConfig.generateChecksum)."""
    return str(zlib.crc32(f"{props.get(DATABASE_NAME, '')}.{props[TABLE_NAME]}".encode("utf-8")))


def format_properties(props: dict[str, str]) -> str:
    """The file's text: each key and value escaped as Java's `Properties.store` does, and Hudi's table
    checksum as the last line, so that a file cut short anywhere lacks it."""
    body = {k: v for k, v in props.items() if k != TABLE_CHECKSUM}
    body[TABLE_CHECKSUM] = table_checksum(body)
    lines = [_HEADER, "#labformat table (Apache Hudi table version 6)"]
    lines += [f"{_escape(key, True)}={_escape(value, False)}" for key, value in body.items()]
    return "\n".join(lines) + "\n"


def check_checksum(text: str, props: dict[str, str], where: str = PROPERTIES_PATH) -> None:
    """CorruptTableError unless the file's checksum holds: present and Hudi's value, the last line of a
    file labformat wrote. A file without one that labformat did not write (Hudi's before version 5,
    labformat's before it wrote one) is taken as it is."""
    stored = props.get(TABLE_CHECKSUM)
    if stored is None:
        if text.startswith(_HEADER):
            raise CorruptTableError(f"{where}: no {TABLE_CHECKSUM} line; the file was cut short")
        return
    if TABLE_NAME in props and stored.strip() != table_checksum(props):
        raise CorruptTableError(f"{where}: {TABLE_CHECKSUM}={stored!r} does not match the table name "
                                f"{props.get(TABLE_NAME)!r} (expected {table_checksum(props)}); the file is damaged")
    if text.startswith(_HEADER):
        last = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("#", "!"))]
        if not last or not last[-1].startswith(f"{TABLE_CHECKSUM}="):
            raise CorruptTableError(f"{where}: {TABLE_CHECKSUM} is not the last line; the file is damaged")


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, logical line) pairs as `Properties.load` sees them: comments and blank lines
    dropped, a line ending in an odd number of backslashes continued on the next one (whose
    leading whitespace is dropped)."""
    physical = text.splitlines()
    i = 0
    while i < len(physical):
        number, line = i + 1, physical[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1] + (physical[i].lstrip(" \t\f") if i < len(physical) else "")
            i += 1
        yield number, line


def _unescape(text: str, where: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        c = text[i + 1]
        if c == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise CorruptTableError(f"{where}: malformed \\uXXXX escape {text[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_UNESCAPES.get(c, c))
            i += 2
    # Surrogate pairs written as two \\u escapes become one character again.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def _split_key_value(line: str) -> tuple[str, str] | None:
    """(raw key, raw value) of a logical line: the key ends at the first unescaped `=`, `:` or
    whitespace; None when no `=` or `:` follows the key (labformat never writes such a line)."""
    i = 0
    while i < len(line) and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if not rest or rest[0] not in "=:":
        return None
    return key, rest[1:].lstrip(" \t\f")


def load_properties(text: str, where: str = PROPERTIES_PATH) -> dict[str, str]:
    """Parse the file as Java's `Properties.load` does; whatever table it describes."""
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        pair = _split_key_value(line)
        if pair is None:
            raise CorruptTableError(f"{where}: line {number} is not key=value: {line!r}")
        props[_unescape(pair[0], where)] = _unescape(pair[1], where)
    return props


def parse_properties(text: str, where: str = PROPERTIES_PATH) -> dict[str, str]:
    """Parse the file as Java's `Properties.load` does, and check it describes a table labformat can
    work with, its checksum included."""
    props = load_properties(text, where)
    check_checksum(text, props, where)
    for key, expected in REQUIRED.items():
        if key not in props:
            raise CorruptTableError(f"{where}: missing {key}")
        if key == TABLE_TYPE and props[key] in TABLE_TYPES:
            continue
        if props[key] != expected:
            raise CorruptTableError(f"{where}: {key}={props[key]!r}, labformat reads only {expected!r}")
    for key in (TABLE_NAME, RECORD_KEY_FIELDS, PRECOMBINE_FIELD):
        if not props.get(key):
            raise CorruptTableError(f"{where}: missing {key}")
    return props
