"""The lab's standard query conditions, translated for the peers: SQL for delta-rs, pyarrow filters, Iceberg row filters.

`labformat.workload.standard_queries` writes each query as Spark SQL: comparisons of a
column with a quoted literal, joined by AND (`ts >= '2024-01-28 10:00:00' AND ts < '...'`).
`parse_condition` reads exactly that form into `Term`s and refuses anything else, so the
peers always run the very conditions labformat runs. Timestamp literals are UTC, the time
zone every labformat Spark session uses.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

_TERM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=|>=|<=|>|<)\s*'([^']*)'\s*$")
_AND = re.compile(r"\s+AND\s+", re.IGNORECASE)


class Term(NamedTuple):
    """One comparison `column op 'literal'`."""

    column: str
    op: str
    literal: str


def parse_condition(condition: str) -> tuple[Term, ...]:
    """`"a >= 'x' AND b = 'y'"` -> (Term('a', '>=', 'x'), Term('b', '=', 'y')); ValueError on any other form."""
    terms = []
    for part in _AND.split(condition):
        match = _TERM.match(part)
        if not match:
            raise ValueError(f"cannot translate {part!r} of condition {condition!r} for the peers: "
                             "only `column op 'literal'` terms joined by AND are supported")
        terms.append(Term(*match.groups()))
    return tuple(terms)


def _utc(literal: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(literal)
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)


def sql_condition(terms: tuple[Term, ...], schema: pa.Schema) -> str:
    """The terms as SQL for delta-rs' query engine (DataFusion); timestamp literals with an explicit UTC offset."""
    parts = []
    for term in terms:
        timestamp = pa.types.is_timestamp(schema.field(term.column).type)
        literal = _utc(term.literal).isoformat() if timestamp else term.literal
        parts.append(f"{term.column} {term.op} '{literal}'")
    return " AND ".join(parts)


_ARROW_OPS = {"=": pc.equal, ">=": pc.greater_equal, "<=": pc.less_equal, ">": pc.greater, "<": pc.less}


def arrow_filter(terms: tuple[Term, ...], schema: pa.Schema) -> pc.Expression:
    """The terms as one pyarrow dataset expression; literals take the column's type from `schema`."""
    expression = None
    for term in terms:
        kind = schema.field(term.column).type
        raw = _utc(term.literal) if pa.types.is_timestamp(kind) else term.literal
        value = pa.scalar(raw).cast(kind)
        part = _ARROW_OPS[term.op](pc.field(term.column), value)
        expression = part if expression is None else expression & part
    return expression


def iceberg_filter(terms: tuple[Term, ...], schema: pa.Schema):
    """The terms as one pyiceberg row filter; timestamp literals as ISO strings with a UTC offset."""
    from pyiceberg.expressions import (And, EqualTo, GreaterThan, GreaterThanOrEqual, LessThan,
                                       LessThanOrEqual)

    ops = {"=": EqualTo, ">=": GreaterThanOrEqual, "<=": LessThanOrEqual, ">": GreaterThan, "<": LessThan}
    parts = []
    for term in terms:
        timestamp = pa.types.is_timestamp(schema.field(term.column).type)
        parts.append(ops[term.op](term.column, _utc(term.literal).isoformat() if timestamp else term.literal))
    return parts[0] if len(parts) == 1 else And(*parts)
