"""How a Spark task reports bad input: a marker in its exception's text, turned back into InvalidInputError on the driver."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from labformat.errors import InvalidInputError

# A task's exception reaches the driver only as text inside a Spark exception; this marker is
# how the driver tells bad input (the caller's fault, table unchanged) from a failure of ours.
INVALID_INPUT_MARKER = "LABFORMAT_INVALID_INPUT:"


def check_record_keys(table: pa.Table, record_key: str) -> None:
    """Fail the task on null or blank record keys (checked here, in the write pass, to avoid a
    separate scan of the input)."""
    keys = pc.cast(table.column(record_key), pa.string())
    bad = pc.or_kleene(pc.is_null(keys), pc.equal(pc.utf8_trim_whitespace(keys), ""))
    if pc.any(bad).as_py():
        raise ValueError(f"{INVALID_INPUT_MARKER} null or empty record keys in column {record_key!r}")


def raise_invalid_input_from(exc: BaseException) -> None:
    """Re-raise a task's bad-input failure (it arrives wrapped in a Spark exception) as InvalidInputError."""
    text = str(exc)
    if INVALID_INPUT_MARKER in text:
        detail = text.split(INVALID_INPUT_MARKER, 1)[1].splitlines()[0].strip()
        raise InvalidInputError(f"input rejected, table unchanged: {detail}") from None
