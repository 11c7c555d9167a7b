"""The predicate tree without Spark: negation normal form keeps every row's truth, and what key lookups read off it."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from labformat.expressions.predicates import (
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    And,
    Comparison,
    In,
    IsNull,
    Not,
    Op,
    Or,
    StartsWith,
    Unknown,
    all_of,
    any_of,
    columns_referenced,
    key_equality_values,
    negation_normal_form,
)
from tests.sql_oracle import COLUMNS, evaluate, predicates, rows, spark_compare


def x(op: Op, v) -> Comparison:
    return Comparison("x", op, v)


def test_the_tree_reads_as_sql():
    p = all_of(x(Op.GE, 3), any_of(In("s", ("a", "b")), IsNull("s")), Not(StartsWith("s", "ab")),
               Comparison("t", Op.LT, dt.date(2024, 1, 31)))
    assert str(p) == "x >= 3 AND (s IN ('a', 'b') OR s IS NULL) AND NOT s LIKE 'ab%' AND t < '2024-01-31'"
    assert str(And(())) == "TRUE" and str(Or(())) == "FALSE" and str(x(Op.EQ, None)) == "x = NULL"


def test_all_of_and_any_of_flatten():
    a, b, c = x(Op.EQ, 1), x(Op.EQ, 2), x(Op.EQ, 3)
    assert all_of(all_of(a, b), c) == And((a, b, c)) and all_of(a) == a
    assert any_of(a, any_of(b, c)) == Or((a, b, c)) and any_of(a) == a


def test_columns_and_key_equality_values():
    """Equality sets intersect through AND, unite through OR only when both sides constrain."""
    k = "record_key"
    p = all_of(In(k, ("a", "b", "c")), Comparison(k, Op.EQ, "b"), x(Op.GT, 3))
    assert key_equality_values(p, k) == {"b"}
    assert key_equality_values(any_of(Comparison(k, Op.EQ, "a"), In(k, ("c", "d"))), k) == {"a", "c", "d"}
    assert key_equality_values(any_of(Comparison(k, Op.EQ, "a"), x(Op.EQ, 1)), k) is None
    assert key_equality_values(x(Op.GT, 3), k) is None
    assert key_equality_values(Not(Comparison(k, Op.NE, "z")), k) == {"z"}
    assert key_equality_values(Not(In(k, ("a",))), k) is None
    assert key_equality_values(all_of(Comparison(k, Op.EQ, "a"), Comparison(k, Op.EQ, "b")), k) == set()
    assert key_equality_values(ALWAYS_FALSE, k) == set()
    assert columns_referenced(all_of(p, Unknown("f(y)", frozenset({"y"})), ALWAYS_TRUE)) == {k, "x", "y"}


def _has_not(p) -> bool:
    if isinstance(p, Not):
        return True
    return isinstance(p, (And, Or)) and any(_has_not(c) for c in p.children)


@settings(max_examples=400, deadline=None)
@given(table=rows, data=st.data())
def test_negation_normal_form_keeps_every_rows_truth_value(table, data):
    """TRUE stays TRUE, FALSE stays FALSE and NULL stays NULL, row by row; no NOT is left."""
    predicate = data.draw(predicates(table), label="predicate")
    nnf = negation_normal_form(predicate)
    assert not _has_not(nnf), str(nnf)
    for row in table:
        assert evaluate(nnf, row) is evaluate(predicate, row), (str(predicate), str(nnf), row)
        assert evaluate(negation_normal_form(Not(predicate)), row) is evaluate(Not(predicate), row)


@settings(max_examples=400, deadline=None)
@given(table=rows, data=st.data())
def test_key_equality_values_hold_every_value_of_a_true_row(table, data):
    """Where the predicate is TRUE, the column's value is one of key_equality_values (when that is a set)."""
    predicate = data.draw(predicates(table), label="predicate")
    for column in COLUMNS:
        allowed = key_equality_values(predicate, column)
        if allowed is None:
            continue
        for row in table:
            if evaluate(predicate, row) is True:
                assert any(spark_compare(row[column], v) == 0 for v in allowed if row[column] is not None), \
                    (str(predicate), column, row, allowed)
