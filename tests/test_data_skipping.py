"""Data skipping without Spark: might_match on hand-made stats, and its soundness on generated rows and stats."""

from __future__ import annotations

import datetime as dt
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from labformat.model.column_stats import ColumnStats
from labformat.expressions.data_skipping import ROWS_CANNOT_MATCH, ROWS_MIGHT_MATCH, might_match
from labformat.expressions.predicates import (
    ALWAYS_FALSE,
    ALWAYS_NULL,
    ALWAYS_TRUE,
    And,
    Comparison,
    In,
    IsNotNull,
    IsNull,
    Not,
    Op,
    Or,
    StartsWith,
    Unknown,
    all_of,
    any_of,
    negation_normal_form,
)
from tests.sql_oracle import evaluate, file_stats, predicates, rows

UTC = dt.timezone.utc
CANNOT, MIGHT = ROWS_CANNOT_MATCH, ROWS_MIGHT_MATCH

# One file: x in [10, 20] with 2 nulls among 10 rows; s in ['b', 'd']; an all-null column; a double with NaNs.
FILE = {
    "x": ColumnStats(min=10, max=20, null_count=2, value_count=10),
    "s": ColumnStats(min="b", max="d", null_count=0, value_count=10),
    "gone": ColumnStats(min=None, max=None, null_count=10, value_count=10),
    "y": ColumnStats(min=-1.0, max=1.0, null_count=0, value_count=10, nan_count=3),
    "z": ColumnStats(min=-1.0, max=1.0, null_count=0, value_count=10, nan_count=0),
    "pfx": ColumnStats(min="abc", max="abz", null_count=0, value_count=10),
}


def x(op: Op, v) -> Comparison:
    return Comparison("x", op, v)


# ---- hand-made stats -------------------------------------------------------------------------


@pytest.mark.parametrize("predicate, expected", [
    (x(Op.EQ, 15), MIGHT), (x(Op.EQ, 10), MIGHT), (x(Op.EQ, 20), MIGHT), (x(Op.EQ, 9), CANNOT), (x(Op.EQ, 21), CANNOT),
    (x(Op.LT, 10), CANNOT), (x(Op.LT, 11), MIGHT), (x(Op.LE, 10), MIGHT), (x(Op.LE, 9), CANNOT),
    (x(Op.GT, 20), CANNOT), (x(Op.GT, 19), MIGHT), (x(Op.GE, 20), MIGHT), (x(Op.GE, 21), CANNOT),
    (x(Op.NE, 15), MIGHT), (x(Op.EQ, 15.5), MIGHT), (x(Op.GT, 19.5), MIGHT), (x(Op.GT, 20.0), CANNOT),
    (x(Op.EQ, None), CANNOT), (x(Op.NE, None), CANNOT),
    (In("x", (1, 2, 30)), CANNOT), (In("x", (1, 12)), MIGHT), (In("x", ()), CANNOT),
    (IsNull("x"), MIGHT), (IsNotNull("x"), MIGHT), (IsNull("s"), CANNOT), (IsNotNull("gone"), CANNOT),
    (IsNull("gone"), MIGHT), (Comparison("gone", Op.NE, 1), CANNOT), (In("gone", (1,)), CANNOT),
    (Comparison("s", Op.EQ, "c"), MIGHT), (Comparison("s", Op.EQ, "a"), CANNOT), (Comparison("s", Op.GT, "d"), CANNOT),
    (Comparison("s", Op.GE, "cz"), MIGHT),
    (StartsWith("pfx", "ab"), MIGHT), (StartsWith("pfx", "abd"), MIGHT), (StartsWith("pfx", "ac"), CANNOT),
    (StartsWith("pfx", "aa"), CANNOT), (StartsWith("pfx", "ab", negated=True), CANNOT),
    (StartsWith("pfx", "abc", negated=True), MIGHT), (StartsWith("pfx", ""), MIGHT),
    (Comparison("nostats", Op.EQ, 1), MIGHT), (Unknown("f(x) > 1", frozenset({"x"})), MIGHT),
    (ALWAYS_TRUE, MIGHT), (ALWAYS_FALSE, CANNOT), (ALWAYS_NULL, CANNOT),
])
def test_leaf(predicate, expected):
    assert might_match(predicate, FILE) is expected


def test_not_equal_prunes_only_a_file_of_one_value():
    """x != 7 cannot match a file whose every non-null x is 7; nulls give NULL, not TRUE."""
    sevens = {"x": ColumnStats(min=7, max=7, null_count=3, value_count=5)}
    assert might_match(x(Op.NE, 7), sevens) is CANNOT
    assert might_match(x(Op.NE, 8), sevens) is MIGHT
    assert might_match(x(Op.NE, 10), FILE) is MIGHT and might_match(x(Op.NE, 20), FILE) is MIGHT  # 11..19 remain
    assert might_match(Not(In("x", (7, 9))), sevens) is CANNOT
    assert might_match(Not(In("x", (8, 9))), sevens) is MIGHT


def test_nan_satisfies_greater_than_everything():
    """Spark orders NaN above every double and NaN = NaN is TRUE: a file with NaNs meets y > 10 and y = NaN."""
    nan = math.nan
    assert might_match(Comparison("y", Op.GT, 10.0), FILE) is MIGHT  # nan_count 3
    assert might_match(Comparison("z", Op.GT, 10.0), FILE) is CANNOT  # nan_count 0
    assert might_match(Comparison("y", Op.EQ, nan), FILE) is MIGHT
    assert might_match(Comparison("z", Op.EQ, nan), FILE) is CANNOT
    assert might_match(Comparison("z", Op.LT, nan), FILE) is MIGHT  # every number < NaN
    assert might_match(Comparison("y", Op.LT, -5.0), FILE) is CANNOT  # NaN < -5 is FALSE
    unknown_nans = {"w": ColumnStats(min=-1.0, max=1.0, null_count=0, value_count=10)}
    assert might_match(Comparison("w", Op.GE, 3.0), unknown_nans) is MIGHT
    assert might_match(Comparison("w", Op.LE, -3.0), unknown_nans) is CANNOT
    all_nan = {"w": ColumnStats(min=nan, max=nan, null_count=0, value_count=4, nan_count=4)}
    assert might_match(Comparison("w", Op.LT, 0.0), all_nan) is MIGHT  # NaN bounds prove nothing


def test_not_is_pushed_down_exactly():
    """NOT (x < 10) is x >= 10; NOT (x IS NULL) is x IS NOT NULL; NOT Unknown stays unknown."""
    assert might_match(Not(x(Op.LT, 25)), FILE) is CANNOT  # x >= 25
    assert might_match(Not(x(Op.LT, 20)), FILE) is MIGHT
    assert might_match(Not(x(Op.GE, 10)), FILE) is CANNOT  # x < 10
    assert might_match(Not(IsNull("gone")), FILE) is CANNOT
    assert might_match(Not(IsNotNull("gone")), FILE) is MIGHT
    assert might_match(Not(Not(x(Op.EQ, 5))), FILE) is CANNOT
    assert might_match(Not(Unknown("f(x)")), FILE) is MIGHT
    assert might_match(Not(ALWAYS_NULL), FILE) is CANNOT  # NOT NULL is NULL
    assert might_match(Not(ALWAYS_FALSE), FILE) is MIGHT
    assert negation_normal_form(Not(And((x(Op.LT, 1), In("x", (3, 4)))))) == Or(
        (x(Op.GE, 1), And((x(Op.NE, 3), x(Op.NE, 4)))))


def test_and_or_not_combine():
    """AND fails if either side fails; OR only if both fail; De Morgan under NOT."""
    no, yes = x(Op.EQ, 5), x(Op.EQ, 15)
    assert might_match(all_of(yes, no), FILE) is CANNOT
    assert might_match(all_of(yes, yes), FILE) is MIGHT
    assert might_match(any_of(no, yes), FILE) is MIGHT
    assert might_match(any_of(no, no), FILE) is CANNOT
    assert might_match(any_of(no, Unknown("?")), FILE) is MIGHT
    assert might_match(all_of(no, Unknown("?")), FILE) is CANNOT
    assert might_match(Not(any_of(x(Op.LT, 100), no)), FILE) is CANNOT  # x >= 100 AND x != 5
    assert might_match(Not(all_of(x(Op.GE, 0), x(Op.LE, 100))), FILE) is CANNOT  # x < 0 OR x > 100


def test_incomparable_or_missing_stats_might_match():
    stats = {"x": ColumnStats(min="a", max="b", null_count=0, value_count=1),
             "t": ColumnStats(min=dt.datetime(2024, 1, 1), max=dt.datetime(2024, 1, 2), null_count=0, value_count=2)}
    assert might_match(x(Op.EQ, 3), stats) is MIGHT  # str vs int: no proof
    day = dt.datetime(2024, 1, 3, tzinfo=UTC)
    assert might_match(Comparison("t", Op.GE, day), stats) is CANNOT  # naive stats are read as UTC
    assert might_match(x(Op.EQ, 3), {"x": ColumnStats()}) is MIGHT


def test_match_is_not_a_bool():
    with pytest.raises(TypeError):
        bool(might_match(ALWAYS_TRUE, {}))


# ---- soundness on generated rows and stats ----------------------------------------------------


def subtrees(p):
    yield p
    for child in getattr(p, "children", ()) or ((p.child,) if isinstance(p, Not) else ()):
        yield from subtrees(child)


@settings(max_examples=500, deadline=None)
@given(file_rows=rows, data=st.data())
def test_might_match_never_prunes_a_file_holding_a_row_the_predicate_is_true_on(file_rows, data):
    """Whatever stats a base file truthfully carries (loose bounds, unknown counts, no NaN in min/max, naive
    timestamps, unindexed columns), a file with a TRUE row is kept; every subtree is checked, negated too."""
    stats = data.draw(file_stats(file_rows), label="stats")
    for predicate in data.draw(st.lists(predicates(file_rows), min_size=1, max_size=4), label="predicates"):
        for p in (q for sub in subtrees(predicate) for q in (sub, Not(sub))):
            answer = might_match(p, stats)
            if any(evaluate(p, r) is True for r in file_rows):
                assert answer is ROWS_MIGHT_MATCH, (str(p), stats)
        event("pruned" if might_match(predicate, stats) is ROWS_CANNOT_MATCH else "kept")


def test_the_generated_cases_prune_files_at_all():
    """The property above would hold for an evaluator that keeps every file; this one does prune."""
    stats = {"i": ColumnStats(min=0, max=4, null_count=0, value_count=3)}
    assert might_match(Comparison("i", Op.GT, 4), stats) is CANNOT


def test_the_evaluator_runs_where_pyspark_and_py4j_cannot_be_imported():
    """The predicate tree and data skipping need no Spark: import and use them with pyspark and py4j blocked.

    The package's own __init__ is skipped (it starts with the Table, which does need Spark).
    """
    package = Path(__file__).resolve().parents[1] / "labformat"
    script = f"""
import sys, types
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("pyspark", "py4j"):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Blocked())
package = types.ModuleType("labformat")
package.__path__ = [{str(package)!r}]
sys.modules["labformat"] = package
from labformat.model.column_stats import ColumnStats
from labformat.expressions.data_skipping import ROWS_CANNOT_MATCH, might_match
from labformat.expressions.predicates import Comparison, Op
assert might_match(Comparison("x", Op.GT, 9), {{"x": ColumnStats(1, 5, 0, 3)}}) is ROWS_CANNOT_MATCH
assert not any(m.partition(".")[0] in ("pyspark", "py4j") for m in sys.modules)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
