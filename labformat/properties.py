"""`.hoodie/hoodie.properties`: the table's identity and fixed settings, in Java properties format."""

from __future__ import annotations

from labformat.errors import CorruptTableError

PROPERTIES_PATH = ".hoodie/hoodie.properties"

TABLE_NAME = "hoodie.table.name"
TABLE_TYPE = "hoodie.table.type"
TABLE_VERSION = "hoodie.table.version"
TIMELINE_LAYOUT_VERSION = "hoodie.timeline.layout.version"
RECORD_KEY_FIELDS = "hoodie.table.recordkey.fields"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
PARTITION_FIELDS = "hoodie.table.partition.fields"
HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"

# What a version-6 copy-on-write table must say about itself.
REQUIRED = {TABLE_TYPE: "COPY_ON_WRITE", TABLE_VERSION: "6", TIMELINE_LAYOUT_VERSION: "1"}


def format_properties(props: dict[str, str]) -> str:
    lines = ["#Properties saved on labformat", "#labformat copy-on-write table (Apache Hudi table version 6)"]
    lines += [f"{key}={value}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


def parse_properties(text: str, where: str = PROPERTIES_PATH) -> dict[str, str]:
    """Parse the file and check it describes a table labformat can work with."""
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        if "=" not in line:
            raise CorruptTableError(f"{where}: line {number} is not key=value: {raw!r}")
        key, value = line.split("=", 1)
        props[key.strip()] = value.strip().replace("\\:", ":").replace("\\=", "=")
    for key, expected in REQUIRED.items():
        if key not in props:
            raise CorruptTableError(f"{where}: missing {key}")
        if props[key] != expected:
            raise CorruptTableError(f"{where}: {key}={props[key]!r}, labformat reads only {expected!r}")
    for key in (TABLE_NAME, RECORD_KEY_FIELDS, PRECOMBINE_FIELD):
        if not props.get(key):
            raise CorruptTableError(f"{where}: missing {key}")
    return props
