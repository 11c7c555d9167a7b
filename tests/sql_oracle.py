"""A row-at-a-time reference for predicates: SQL three-valued logic in Spark's order, and generated rows, trees and stats.

The pure tests check `labformat.expressions.predicates` and `labformat.expressions.data_skipping` against
`evaluate`, which judges one row at a time and shares no code with them. Spark itself is the
reference in tests/test_catalyst.py; this one needs no JVM, so it can run thousands of cases.
"""

from __future__ import annotations

import datetime as dt
import math
import zlib
from typing import Any

from hypothesis import strategies as st

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
)

UTC = dt.timezone.utc
TIMES = [dt.datetime(2024, 1, 15, h, m, tzinfo=UTC) for h, m in ((0, 0), (9, 59), (10, 0), (10, 30), (23, 59))]
# Few values per column, so generated literals hit a file's min and max exactly.
DOMAIN: dict[str, list] = {
    "i": [-3, -1, 0, 1, 2, 4, 7],
    "y": [-2.5, -0.0, 0.0, 1.0, 3.5, math.inf, -math.inf, math.nan],
    "s": ["", "a", "ab", "abc", "b", "ba", "zz", "é", "\U0001f600"],
    "t": TIMES,
    "b": [False, True],
}
# Literals: the column's own values and a few outside them (2.5 against an int column too).
LITERALS: dict[str, list] = {
    "i": DOMAIN["i"] + [-9, 9, 2.5, -0.5],
    "y": DOMAIN["y"] + [-9.0, 9.0, 2],
    "s": DOMAIN["s"] + ["aa", "c", "z", "abcd"],
    "t": TIMES + [dt.datetime(2023, 12, 31, tzinfo=UTC), dt.datetime(2024, 1, 16, tzinfo=UTC)],
    "b": [False, True],
}
COLUMNS = list(DOMAIN)
PREFIXES = ["", "a", "ab", "abc", "b", "z", "é", "\U0001f600"]
UNKNOWNS = ["f(i) > 1", "i > y", "length(s) = 1"]


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def spark_compare(a: Any, b: Any) -> int:
    """-1, 0 or 1 as Spark orders two non-null values of a column: NaN is above every number and equals NaN."""
    a_nan, b_nan = _is_nan(a), _is_nan(b)
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    return int(a > b) - int(a < b)


_HOLDS = {
    Op.EQ: lambda c: c == 0, Op.NE: lambda c: c != 0, Op.LT: lambda c: c < 0,
    Op.LE: lambda c: c <= 0, Op.GT: lambda c: c > 0, Op.GE: lambda c: c >= 0,
}


def _unknown_truth(description: str, row: dict) -> bool | None:
    """Some truth value per row that a stats test cannot foresee; a negated Unknown is the negation of its inner one."""
    if description.startswith("NOT (") and description.endswith(")"):
        inner = _unknown_truth(description[5:-1], row)
        return None if inner is None else not inner
    return (True, False, None)[zlib.crc32(f"{description}/{row['row_id']}".encode()) % 3]


def evaluate(p: Predicate, row: dict) -> bool | None:
    """TRUE, FALSE or NULL (None) for one row, in SQL three-valued logic (Kleene's)."""
    if isinstance(p, And):
        values = [evaluate(c, row) for c in p.children]
        return False if False in values else None if None in values else True
    if isinstance(p, Or):
        values = [evaluate(c, row) for c in p.children]
        return True if True in values else None if None in values else False
    if isinstance(p, Not):
        value = evaluate(p.child, row)
        return None if value is None else not value
    if isinstance(p, Constant):
        return p.value
    if isinstance(p, Unknown):
        return _unknown_truth(p.description, row)
    value = row[p.column]
    if isinstance(p, In) and not p.values:
        return False  # Spark: `x IN ()` is FALSE, even for a NULL x
    if isinstance(p, IsNull):
        return value is None
    if isinstance(p, IsNotNull):
        return value is not None
    if value is None:
        return None
    if isinstance(p, Comparison):
        return None if p.value is None else _HOLDS[p.op](spark_compare(value, p.value))
    if isinstance(p, In):
        return any(spark_compare(value, v) == 0 for v in p.values)
    if isinstance(p, StartsWith):
        return value.startswith(p.prefix) != p.negated
    raise TypeError(f"not a predicate: {p!r}")


# ---- generated rows, trees and stats ---------------------------------------------------------

rows = st.lists(
    st.fixed_dictionaries({c: st.sampled_from(v + [None]) for c, v in DOMAIN.items()}),
    min_size=1, max_size=12,
).map(lambda rs: [dict(r, row_id=n) for n, r in enumerate(rs)])


@st.composite
def leaves(draw, table: list[dict]) -> Predicate:
    """One leaf; half its literals and prefixes come from `table`'s own values, so a file's bounds get hit exactly."""
    column = draw(st.sampled_from(COLUMNS))
    own = [v for v in (r[column] for r in table) if v is not None]
    literal = st.one_of(st.sampled_from(own), st.sampled_from(LITERALS[column])) if own \
        else st.sampled_from(LITERALS[column])
    kind = draw(st.sampled_from(["cmp"] * 6 + ["in"] * 2 + ["null", "notnull", "prefix", "prefix", "const",
                                                            "unknown"]))
    if kind == "cmp":
        return Comparison(column, draw(st.sampled_from(list(Op))), draw(st.one_of(literal, st.none())))
    if kind == "in":
        return In(column, tuple(draw(st.lists(literal, max_size=4))))
    if kind == "null":
        return IsNull(column)
    if kind == "notnull":
        return IsNotNull(column)
    if kind == "prefix":
        words = [w for w in (r["s"] for r in table) if w] + PREFIXES
        word = draw(st.sampled_from(words))
        return StartsWith("s", word[:draw(st.integers(0, len(word)))], draw(st.booleans()))
    if kind == "const":
        return Constant(draw(st.sampled_from([True, False, None])))
    return Unknown(draw(st.sampled_from(UNKNOWNS)), frozenset({column}))


def predicates(table: list[dict]) -> st.SearchStrategy[Predicate]:
    """Trees of up to 6 leaves over `table`'s values, built with the raw constructors rather than
    all_of/any_of: nested and empty ANDs and ORs and double negations are trees the code must take."""
    return st.recursive(
        leaves(table),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3).map(lambda cs: And(tuple(cs))),
            st.lists(inner, max_size=3).map(lambda cs: Or(tuple(cs))),
            inner.map(Not),
        ),
        max_leaves=6,
    )


def _widened(draw, column: str, low: Any, high: Any) -> tuple[Any, Any]:
    """Looser bounds of the same type: stats may bound the values loosely, never wrongly."""
    if column == "i":
        return low - draw(st.integers(0, 3)), high + draw(st.integers(0, 3))
    if column == "y":
        return draw(st.sampled_from([low - 1.0, -math.inf])), draw(st.sampled_from([high + 1.0, math.inf]))
    if column == "s":
        return low[:draw(st.integers(0, len(low)))], high + draw(st.sampled_from(["", "a", "\U0001f600"]))
    if column == "t":
        return low - dt.timedelta(hours=draw(st.integers(0, 5))), high + dt.timedelta(hours=draw(st.integers(0, 5)))
    return False, True


@st.composite
def file_stats(draw, file_rows: list[dict]) -> dict[str, ColumnStats]:
    """Column stats one base file might really carry for `file_rows`: min/max leave out nulls and, mostly, NaNs
    (as parquet does), maybe loosened; counts exact or unknown; a column may have no stats at all; timestamps
    maybe naive (read as UTC)."""
    stats = {}
    for column in COLUMNS:
        if draw(st.integers(0, 9)) == 0:
            continue  # this column is not indexed
        values = [r[column] for r in file_rows if r[column] is not None]
        ordered = [v for v in values if not _is_nan(v)]
        low = high = None
        if ordered:
            low, high = ordered[0], ordered[0]
            for v in ordered[1:]:
                low = v if spark_compare(v, low) < 0 else low
                high = v if spark_compare(v, high) > 0 else high
            if draw(st.booleans()):
                low, high = _widened(draw, column, low, high)
        elif values and draw(st.booleans()):
            low = high = math.nan  # an all-NaN column: some writers put NaN in min/max then
        if ordered and len(ordered) < len(values) and draw(st.integers(0, 3)) == 0:
            # A writer that keeps NaN in the bounds: as the top value (Spark's order), or misplaced as the minimum.
            low, high = draw(st.sampled_from([(low, math.nan), (math.nan, high)]))
        if column == "t" and low is not None and draw(st.booleans()):
            low, high = low.replace(tzinfo=None), high.replace(tzinfo=None)
        nans = sum(_is_nan(v) for v in values)
        stats[column] = ColumnStats(
            min=low, max=high,
            null_count=draw(st.sampled_from([len(file_rows) - len(values), None])),
            value_count=draw(st.sampled_from([len(file_rows), None])),
            nan_count=draw(st.sampled_from([nans, None])) if column == "y" else draw(st.sampled_from([0, None])),
        )
    return stats
