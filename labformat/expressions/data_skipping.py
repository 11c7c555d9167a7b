"""Data skipping: can a base file, by its column stats, hold a row that makes a predicate TRUE?

`might_match` answers `ROWS_CANNOT_MATCH` only when no row of the file can make the filter
TRUE, and `ROWS_MIGHT_MATCH` otherwise: skipping must never lose a row; it may keep a useless
file. Values are compared in Spark's order (NaN above every number, NaN = NaN), so stats
written by parquet, which leave NaN out of min/max, still prove only what they may.

Pure Python: no Spark, no JVM; tested on hand-made and generated stats.
"""

from __future__ import annotations

import datetime as dt
import enum
import numbers
from typing import Any, Mapping

from labformat.model.column_stats import ColumnStats
from labformat.expressions.predicates import (
    And,
    Comparison,
    Constant,
    In,
    IsNotNull,
    IsNull,
    Not,
    Op,
    Or,
    Predicate,
    StartsWith,
    Unknown,
    negation_normal_form,
)

__all__ = ["Match", "ROWS_CANNOT_MATCH", "ROWS_MIGHT_MATCH", "might_match"]


class Match(enum.Enum):
    """The answer of the skipping test for one file. Not a bool on purpose: compare it to a constant."""

    ROWS_CANNOT_MATCH = "rows cannot match"
    ROWS_MIGHT_MATCH = "rows might match"

    def __bool__(self) -> bool:
        # `if might_match(...)` would be always true and silently prune nothing.
        raise TypeError("compare a Match with ROWS_MIGHT_MATCH or ROWS_CANNOT_MATCH instead of testing its truth")


ROWS_CANNOT_MATCH = Match.ROWS_CANNOT_MATCH
ROWS_MIGHT_MATCH = Match.ROWS_MIGHT_MATCH


def might_match(predicate: Predicate, stats: Mapping[str, ColumnStats]) -> Match:
    """`ROWS_CANNOT_MATCH` only if no row of the file described by `stats` can make `predicate` TRUE.

    `stats` maps a column name to that column's `ColumnStats` in one file. A column without
    stats, and every `Unknown` part, might match.
    """
    return ROWS_MIGHT_MATCH if _might_be_true(negation_normal_form(predicate), stats) else ROWS_CANNOT_MATCH


def _might_be_true(p: Predicate, stats: Mapping[str, ColumnStats]) -> bool:
    """Can some row make `p` (in negation normal form) TRUE? False only with proof."""
    if isinstance(p, And):
        return all(_might_be_true(c, stats) for c in p.children)
    if isinstance(p, Or):
        return any(_might_be_true(c, stats) for c in p.children)
    if isinstance(p, Constant):
        return p.value is True
    if isinstance(p, Unknown):
        return True
    if isinstance(p, Not):  # not reached after negation_normal_form; kept so the function is total
        return _might_be_true(negation_normal_form(p), stats)
    if isinstance(p, Comparison) and p.value is None:
        return False  # x <op> NULL is NULL for every row
    s = stats.get(p.column)
    if s is None:
        return True
    if isinstance(p, IsNull):
        return s.null_count is None or s.null_count > 0
    if not s.may_hold_non_null():
        return False  # all rows NULL: IS NOT NULL is FALSE, every other leaf is NULL
    if isinstance(p, IsNotNull):
        return True
    if isinstance(p, Comparison):
        return _value_might_satisfy(s, p.op, p.value)
    if isinstance(p, In):
        return any(_value_might_satisfy(s, Op.EQ, v) for v in p.values)
    if isinstance(p, StartsWith):
        return _prefix_might_satisfy(s, p.prefix, p.negated)
    raise TypeError(f"not a predicate: {p!r}")


_NAN_KEY = (1, 0.0)


def _is_floating(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral)


def _is_nan(v: Any) -> bool:
    return _is_floating(v) and v != v


def _sort_key(v: Any) -> tuple[Any, ...]:
    """Spark's order as a Python key: NaN above every number; naive datetimes read as UTC."""
    if _is_floating(v):
        return _NAN_KEY if v != v else (0, float(v))
    if isinstance(v, dt.datetime) and v.tzinfo is None:
        return (0, v.replace(tzinfo=dt.timezone.utc))
    return (0, v)


def _holds(a: tuple[Any, ...], op: Op, b: tuple[Any, ...]) -> bool:
    if op is Op.EQ:
        return a == b
    if op is Op.NE:
        return a != b
    if op is Op.LT:
        return a < b
    if op is Op.LE:
        return a <= b
    if op is Op.GT:
        return a > b
    return a >= b


def _value_might_satisfy(s: ColumnStats, op: Op, value: Any) -> bool:
    """Might some non-null value x of the file, min <= x <= max or NaN, make `x <op> value` TRUE?"""
    if s.min is None or s.max is None or _is_nan(s.min):
        return True  # no bounds; a NaN minimum only comes from stats that put NaN in the wrong place
    try:
        lo, hi, v = _sort_key(s.min), _sort_key(s.max), _sort_key(value)
        if op is Op.EQ:
            in_range = lo <= v <= hi
        elif op is Op.NE:
            in_range = not (lo == v == hi)  # only a file holding nothing but `value` fails
        elif op in (Op.LT, Op.LE):
            in_range = _holds(lo, op, v)
        else:
            in_range = _holds(hi, op, v)
        nan_may_be_present = s.nan_count != 0 and (_is_floating(s.min) or _is_floating(s.max))
        return in_range or (nan_may_be_present and _holds(_NAN_KEY, op, v))
    except TypeError:
        return True  # stats and literal of types Python cannot order: no proof, keep the file


def _prefix_might_satisfy(s: ColumnStats, prefix: str, negated: bool) -> bool:
    """Truncation to len(prefix) is monotone, so every value's head lies in [min[:n], max[:n]]."""
    if not isinstance(s.min, str) or not isinstance(s.max, str):
        return True
    n = len(prefix)
    lo, hi = s.min[:n], s.max[:n]
    if negated:
        return not (lo == prefix == hi)
    return lo <= prefix <= hi
