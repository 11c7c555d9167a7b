"""How a write task refuses bad input: InvalidInputError, raised in the task and carried to the driver as data (`spark.tasks`)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from labformat.errors import InvalidInputError

# How every refusal of a write's input begins: the caller's fault, and the table is left as it was.
INPUT_REJECTED = "input rejected, table unchanged: "


def check_record_keys(table: pa.Table, record_key: str) -> None:
    """Fail the task on null or blank record keys (checked here, in the write pass, to avoid a
    separate scan of the input)."""
    keys = pc.cast(table.column(record_key), pa.string())
    bad = pc.or_kleene(pc.is_null(keys), pc.equal(pc.utf8_trim_whitespace(keys), ""))
    if pc.any(bad).as_py():
        raise InvalidInputError(f"{INPUT_REJECTED}null or empty record keys in column {record_key!r}")
