"""Spark's filters as predicates: the trees Catalyst gives, bad filters, and data skipping checked against Spark itself."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.errors import InvalidInputError
from labformat.model.column_stats import ColumnStats
from labformat.read.catalyst import to_predicate
from labformat.read.connect_filter import connect_predicate
from labformat.expressions.data_skipping import ROWS_CANNOT_MATCH, ROWS_MIGHT_MATCH, might_match
from labformat.expressions.predicates import (
    ALWAYS_FALSE,
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
    columns_referenced,
    key_equality_values,
    negation_normal_form,
)

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def x(op: Op, v) -> Comparison:
    return Comparison("x", op, v)


# ---- parsing through Spark -----------------------------------------------------------------

DRONE = "ts timestamp, drone_id string, x int, day date, amount decimal(10,2), y double, flag boolean, note string"


def parse(spark, condition):
    return negation_normal_form(to_predicate(spark, condition, DRONE))


@pytest.mark.spark
def test_sql_string_and_column_give_the_same_tree(spark):
    """The brief's example, from SQL and from a Column: timestamps compared to strings become UTC datetimes."""
    sql = "ts >= '2024-01-15 10:00:00' AND drone_id IN ('drone0001','drone0002')"
    column = (F.col("ts") >= F.lit("2024-01-15 10:00:00")) & F.col("drone_id").isin("drone0001", "drone0002")
    expected = all_of(IsNotNull("ts"), Comparison("ts", Op.GE, dt.datetime(2024, 1, 15, 10, tzinfo=UTC)),
                      In("drone_id", ("drone0001", "drone0002")))
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert parse(spark, sql) == expected
    assert parse(spark, column) == expected


@pytest.mark.spark
@pytest.mark.parametrize("condition, expected", [
    ("x BETWEEN 3 AND 5", all_of(IsNotNull("x"), x(Op.GE, 3), x(Op.LE, 5))),
    ("7 > x", all_of(IsNotNull("x"), x(Op.LT, 7))),
    ("x > 2.5", all_of(IsNotNull("x"), x(Op.GT, 2))),  # Spark unwraps the cast of the int column
    ("x = 2.5", ALWAYS_FALSE),
    ("x IS NULL", IsNull("x")),
    ("NOT (x IS NULL)", IsNotNull("x")),
    ("NOT (x < 5)", all_of(IsNotNull("x"), x(Op.GE, 5))),
    ("x IN (1, 2, NULL)", any_of(In("x", (1, 2)), x(Op.EQ, None))),
    ("NOT (x IN (1, 2, NULL))", ALWAYS_FALSE),
    ("x <=> 4", all_of(x(Op.EQ, 4), IsNotNull("x"))),
    ("x <=> NULL", IsNull("x")),
    ("day = '2024-01-31'", all_of(IsNotNull("day"), Comparison("day", Op.EQ, dt.date(2024, 1, 31)))),
    ("day BETWEEN '2024-01-01' AND '2024-01-31'", all_of(
        IsNotNull("day"), Comparison("day", Op.GE, dt.date(2024, 1, 1)), Comparison("day", Op.LE, dt.date(2024, 1, 31)))),
    ("amount > 3.5", all_of(IsNotNull("amount"), Comparison("amount", Op.GT, Decimal("3.50")))),
    ("y < 2", all_of(IsNotNull("y"), Comparison("y", Op.LT, 2.0))),
    ("flag", all_of(IsNotNull("flag"), Comparison("flag", Op.EQ, True))),
    ("NOT flag", all_of(IsNotNull("flag"), Comparison("flag", Op.NE, True))),
    ("drone_id LIKE 'drone00%'", all_of(IsNotNull("drone_id"), StartsWith("drone_id", "drone00"))),
    ("x > 3 OR true", ALWAYS_TRUE),
])
def test_sql_conditions(spark, condition, expected):
    assert parse(spark, condition) == expected


@pytest.mark.spark
def test_long_in_list_becomes_inset_and_is_read_back(spark):
    """Spark turns IN with more than 10 literals into InSet over internal values (UTF8String)."""
    ids = [f"drone{i:04d}" for i in range(15)]
    p = parse(spark, F.col("drone_id").isin(ids))
    assert isinstance(p, In) and p.column == "drone_id" and set(p.values) == set(ids)
    assert key_equality_values(p, "drone_id") == set(ids)


@pytest.mark.spark
def test_what_cannot_be_modelled_is_unknown(spark):
    """Functions of columns, LIKE '%x', column vs column: Unknown parts that remember their columns."""
    for condition, columns in [("x + 1 > 3", {"x"}), ("drone_id LIKE '%7'", {"drone_id"}), ("x > y", {"x", "y"}),
                               ("upper(note) = 'A'", {"note"}), ("x > rand()", {"x"})]:
        p = parse(spark, condition)
        assert any(isinstance(c, Unknown) for c in (p.children if isinstance(p, And) else (p,))), (condition, p)
        assert columns_referenced(p) == columns
    # A subquery turns the optimized plan into a join: the analyzed condition is used, folding `1 + 2` itself.
    p = parse(spark, "x IN (SELECT 1) OR x > 1 + 2")
    assert isinstance(p, Or) and isinstance(p.children[0], Unknown) and p.children[1] == x(Op.GT, 3)


@pytest.mark.spark
def test_bad_filters_are_invalid_input(spark):
    for condition in ["nope > 1", "ts = '2024-13-45'", "x + 1"]:
        with pytest.raises(InvalidInputError):
            to_predicate(spark, condition, DRONE)
    with pytest.raises(InvalidInputError):
        to_predicate(spark, 42, DRONE)


# ---- soundness against Spark itself --------------------------------------------------------

SCHEMA = T.StructType([
    T.StructField("file_id", T.IntegerType()),
    T.StructField("i", T.IntegerType()),
    T.StructField("y", T.DoubleType()),
    T.StructField("s", T.StringType()),
    T.StructField("t", T.TimestampType()),
])
ARROW = {"i": pa.int32(), "y": pa.float64(), "s": pa.string(), "t": pa.timestamp("us", tz="UTC")}
TIMES = [dt.datetime(2024, 1, 15, h, m, tzinfo=UTC) for h, m in ((0, 0), (9, 59), (10, 0), (10, 30), (23, 59))]
DOMAIN = {
    "i": [-3, -1, 0, 1, 2, 4, 7],
    "y": [-2.5, -0.0, 0.0, 1.0, 3.5, math.inf, -math.inf, math.nan],
    "s": ["", "a", "ab", "abc", "b", "ba", "zz", "é"],
    "t": TIMES,
}
# Literals: the column's own values, a few outside them, and values of another type Spark must cast.
LITERALS = {
    "i": DOMAIN["i"] + [-9, 9, 2.5, -0.5],
    "y": DOMAIN["y"] + [-9.0, 9.0, 2],
    "s": DOMAIN["s"] + ["aa", "c", "z"],
    "t": TIMES + [dt.datetime(2023, 12, 31, tzinfo=UTC), "2024-01-15 10:00:00", "2024-01-15"],
}
COLUMNS = list(DOMAIN)
OPS = ["==", "!=", "<", "<=", ">", ">=", "<=>"]

rows = st.lists(
    st.fixed_dictionaries({c: st.sampled_from(v + [None]) for c, v in DOMAIN.items()}),  # some nulls, not half
    min_size=1, max_size=30,
)


@st.composite
def leaves(draw, pool):
    """One comparison-like leaf; literals come half from the table's own values, so bounds get hit exactly."""
    column = draw(st.sampled_from(COLUMNS))
    own = [st.sampled_from(pool[column])] if pool[column] else []
    value = st.one_of(*own, st.sampled_from(LITERALS[column]))
    literal = st.one_of(*own, st.sampled_from(LITERALS[column] + [None]))
    kind = draw(st.sampled_from(["cmp"] * 6 + ["in"] * 2 + ["between"] * 2 +
                                ["null", "notnull", "prefix", "prefix", "unknown", "const"]))
    if kind == "cmp":
        return ("cmp", column, draw(st.sampled_from(OPS)), draw(literal))
    if kind == "in":
        return ("in", column, tuple(draw(st.lists(literal, max_size=4))))
    if kind == "between":
        return ("between", column, draw(value), draw(value))
    if kind == "prefix":
        word = draw(st.one_of(*[st.sampled_from(pool["s"])] * bool(pool["s"]), st.sampled_from(["z", "é", "b"])))
        return ("prefix", word[:draw(st.integers(0, 2))])
    if kind == "unknown":
        return ("unknown", draw(st.sampled_from(["i+1>2", "i>y", "len(s)=1"])))
    if kind == "const":
        return ("const", draw(st.sampled_from([True, False, None])))
    return (kind, column)


def predicates(table):
    """Spec trees of up to 6 leaves over `table`'s values, joined by and/or/not."""
    pool = {c: sorted({r[c] for r in table if r[c] is not None}, key=spark_order) for c in COLUMNS}
    return st.recursive(
        leaves(pool),
        lambda inner: st.one_of(
            st.tuples(st.just("and"), inner, inner), st.tuples(st.just("or"), inner, inner),
            st.tuples(st.just("not"), inner)),
        max_leaves=6,
    )


def lit(column, value, fn=F):
    spark_type = {"i": "int", "y": "double", "s": "string", "t": "timestamp"}[column]
    return fn.lit(None).cast(spark_type) if value is None else fn.lit(value)


def build(spec, fn=F):
    """A spec tuple as a Spark Column (built at test time: Columns need the JVM); with `fn` the
    Spark Connect functions module, a Connect Column (built without a session: only its expression
    tree is read)."""
    kind = spec[0]
    if kind == "cmp":
        _, column, op, value = spec
        c, v = fn.col(column), lit(column, value, fn)
        return {"==": c == v, "!=": c != v, "<": c < v, "<=": c <= v, ">": c > v, ">=": c >= v,
                "<=>": c.eqNullSafe(v)}[op]
    if kind == "in":
        return fn.col(spec[1]).isin([lit(spec[1], v, fn) for v in spec[2]])
    if kind == "between":
        return fn.col(spec[1]).between(lit(spec[1], spec[2], fn), lit(spec[1], spec[3], fn))
    if kind == "null":
        return fn.col(spec[1]).isNull()
    if kind == "notnull":
        return fn.col(spec[1]).isNotNull()
    if kind == "prefix":
        return fn.col("s").startswith(spec[1]) if spec[1] else fn.col("s").like("%")
    if kind == "unknown":
        return {"i+1>2": fn.col("i") + 1 > 2, "i>y": fn.col("i") > fn.col("y"),
                "len(s)=1": fn.length("s") == 1}[spec[1]]
    if kind == "const":
        return fn.lit(spec[1]).cast("boolean")
    if kind == "and":
        return build(spec[1], fn) & build(spec[2], fn)
    if kind == "or":
        return build(spec[1], fn) | build(spec[2], fn)
    return ~build(spec[1], fn)


def build_connect(spec):
    from pyspark.sql.connect import functions as CF

    return build(spec, CF)


def build_sql(spec):
    """The same spec as a SQL string, or None where SQL has no spelling of it (an empty IN list, a
    prefix holding LIKE's wildcards)."""
    def value(column, v):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" if isinstance(v, str) and column == "t" \
            else sql_literal(column, v)

    kind = spec[0]
    if kind == "cmp":
        _, column, op, v = spec
        return f"{column} {'=' if op == '==' else op} {value(column, v)}"
    if kind == "in":
        return f"{spec[1]} IN ({', '.join(value(spec[1], v) for v in spec[2])})" if spec[2] else None
    if kind == "between":
        return f"{spec[1]} BETWEEN {value(spec[1], spec[2])} AND {value(spec[1], spec[3])}"
    if kind in ("null", "notnull"):
        return f"{spec[1]} IS {'NOT ' if kind == 'notnull' else ''}NULL"
    if kind == "prefix":
        return None if any(c in spec[1] for c in "%_\\") else f"s LIKE {sql_literal('s', spec[1] + '%')}"
    if kind == "unknown":
        return {"i+1>2": "i + 1 > 2", "i>y": "i > y", "len(s)=1": "length(s) = 1"}[spec[1]]
    if kind == "const":
        return f"CAST({'NULL' if spec[1] is None else spec[1]} AS BOOLEAN)"
    parts = [build_sql(p) for p in spec[1:]]
    if None in parts:
        return None
    if kind in ("and", "or"):
        return f"({parts[0]}) {kind.upper()} ({parts[1]})"
    return f"NOT ({parts[0]})"


def layout(table, sort_by, files):
    """Rows into `files` contiguous base files, sorted by one column first (nulls last) or as they come."""
    if sort_by is not None:
        table = sorted(table, key=lambda r: spark_order(r[sort_by]))
    size = max(1, -(-len(table) // files))
    return [dict(r, file_id=n // size) for n, r in enumerate(table)]


def spark_order(value):
    """Sort key in Spark's order with nulls last: NaN above every double."""
    if value is None:
        return (2, 0)
    if isinstance(value, float) and math.isnan(value):
        return (1, 0)
    return (0, value)


def sql_literal(column, value):
    """`value` as a typed Spark SQL literal of `column`'s type."""
    spark_type = {"file_id": "INT", "i": "INT", "y": "DOUBLE", "s": "STRING", "t": "TIMESTAMP"}[column]
    if value is None:
        return f"CAST(NULL AS {spark_type})"
    if column == "t":
        return f"TIMESTAMP_MICROS({(value - EPOCH) // dt.timedelta(microseconds=1)})"
    if column == "s":
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if column == "y":
        text = "NaN" if math.isnan(value) else "Infinity" if value == math.inf else "-Infinity" if value == -math.inf \
            else repr(value)
        return f"CAST('{text}' AS DOUBLE)"
    return f"CAST({value} AS INT)"


def local_table(spark, laid_out):
    """The rows as an inline VALUES table: a LocalRelation, so Spark evaluates a projection over it on the
    driver (ConvertToLocalRelation) and collect() needs no job; 60 examples stay fast."""
    names = SCHEMA.fieldNames()
    values = ", ".join("(" + ", ".join(sql_literal(n, r[n]) for n in names) + ")" for r in laid_out)
    return spark.sql(f"SELECT * FROM VALUES {values} AS rows({', '.join(names)})")


def file_stats(rows_of_file, nan_counts_known=True):
    """Per-column stats of one file, as a footer would hold them (pyarrow: min/max skip nulls and NaNs)."""
    stats = {}
    for column, arrow_type in ARROW.items():
        values = pa.array([r[column] for r in rows_of_file], arrow_type)
        bounds = pc.min_max(values)
        nan_count = None
        if column == "y" and nan_counts_known:
            nan_count = pc.sum(pc.is_nan(values)).as_py() or 0
        stats[column] = ColumnStats(bounds["min"].as_py(), bounds["max"].as_py(), values.null_count, len(values),
                                    nan_count)
    return stats


@pytest.mark.spark
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(table=rows, sort_by=st.sampled_from([None, "i", "y", "s", "t"]), files=st.integers(1, 8),
       nan_counts_known=st.booleans(), data=st.data())
def test_might_match_never_skips_a_file_spark_returns_rows_from(spark, table, sort_by, files, nan_counts_known,
                                                                data):
    """For every file holding a row the filter is TRUE on (Spark decides), might_match says ROWS_MIGHT_MATCH.

    Each Spark-parsed predicate is also checked negated, and paired with the next one by AND
    and OR, built on our side: Spark's optimizer already pushes most NOTs down itself, so this
    is what exercises our own three-valued negation. And every TRUE row's i and s lie in
    key_equality_values when that is a set.
    """
    specs = data.draw(st.lists(predicates(table), min_size=1, max_size=6), label="specs")
    laid_out = layout(table, sort_by, files)
    data_schema = T.StructType(SCHEMA.fields[1:])
    built = [build(spec) for spec in specs]
    parsed = [(to_predicate(spark, c, data_schema), c) for c in built]
    checks = []  # (what to report, our predicate, Spark's column)
    for k, (p, c) in enumerate(parsed):
        checks += [(specs[k], p, c), (("not", specs[k]), Not(p), ~c)]
        if k + 1 < len(parsed):
            (q, d), pair = parsed[k + 1], (specs[k], specs[k + 1])
            checks += [(("and-not", *pair), all_of(p, Not(q)), c & ~d), (("or", *pair), any_of(p, q), c | d)]
        # What a Spark Connect session models of the same filter, as a Column and as SQL (its
        # constants evaluated by this session, as the Connect server would); two per example, as
        # each SQL filter's constants cost a query.
        if k >= 2:
            continue
        checks.append((("connect column", specs[k]), connect_predicate(spark, build_connect(specs[k]), data_schema), c))
        sql = build_sql(specs[k])
        if sql is not None:
            checks.append((("connect sql", sql), connect_predicate(spark, sql, data_schema), c))
    # One query for all checks: a 0/1 flag per row and check (when(NULL) is 0, as a filter drops it).
    flags = local_table(spark, laid_out).select(
        "file_id", "i", "y", "s", F.unix_micros("t").alias("t"),
        *[F.when(c, 1).otherwise(0).alias(f"p{k}") for k, (_, _, c) in enumerate(checks)]).collect()
    as_micros = [dict(r, t=None if r["t"] is None else (r["t"] - EPOCH) // dt.timedelta(microseconds=1))
                 for r in laid_out]
    assert [repr([r[c] for c in SCHEMA.fieldNames()]) for r in flags] == \
        [repr([r[c] for c in SCHEMA.fieldNames()]) for r in as_micros]  # the VALUES table is the table
    by_file = {}
    for r in laid_out:
        by_file.setdefault(r["file_id"], []).append(r)
    stats = {f: file_stats(rs, nan_counts_known) for f, rs in by_file.items()}
    for k, (spec, predicate, _) in enumerate(checks):
        true_rows = [r for r in flags if r[f"p{k}"] == 1]
        for file_id in {r["file_id"] for r in true_rows}:
            assert might_match(predicate, stats[file_id]) is ROWS_MIGHT_MATCH, (spec, str(predicate), file_id)
        pruned = sum(might_match(predicate, s) is ROWS_CANNOT_MATCH for s in stats.values())
        event(f"files pruned: {'none' if pruned == 0 else 'all' if pruned == len(stats) else 'some'}")
        for key in ("i", "s"):
            allowed = key_equality_values(predicate, key)
            if allowed is not None:
                assert {r[key] for r in true_rows} <= allowed, (spec, str(predicate), key)


@pytest.mark.spark
def test_spark_agrees_nan_is_above_every_double(spark):
    """One file of y = [1.0, NaN]: Spark returns its NaN row for y > 5, y = NaN, NOT (y < 5); so must we."""
    rows_ = [{"file_id": 0, "i": None, "y": 1.0, "s": None, "t": None},
             {"file_id": 0, "i": None, "y": math.nan, "s": None, "t": None}]
    data_schema = T.StructType(SCHEMA.fields[1:])
    for known in (True, False):
        stats = file_stats(rows_, nan_counts_known=known)
        assert (stats["y"].min, stats["y"].max) == (1.0, 1.0)  # pyarrow leaves the NaN out of min/max
        for condition in ["y > 5", "y = double('NaN')", "NOT (y < 5)", "y >= double('NaN')", "y IN (7, double('NaN'))"]:
            assert local_table(spark, rows_).filter(condition).count() == 1, condition
            assert might_match(to_predicate(spark, condition, data_schema), stats) is ROWS_MIGHT_MATCH, condition
        assert local_table(spark, rows_).filter("y < 0").count() == 0
        assert might_match(to_predicate(spark, "y < 0", data_schema), stats) is ROWS_CANNOT_MATCH


@pytest.mark.spark
def test_sorted_int_column_point_lookup_leaves_one_file(spark):
    """100 sorted ids in 10 files of 10: `id = 42` keeps exactly file 4; `id BETWEEN 15 AND 34` keeps 1, 2, 3."""
    files = [{"id": ColumnStats(min=10 * f, max=10 * f + 9, null_count=0, value_count=10)} for f in range(10)]

    def kept(condition):
        p = to_predicate(spark, condition, "id bigint, v string")
        return [f for f, s in enumerate(files) if might_match(p, s) is ROWS_MIGHT_MATCH]

    assert kept("id = 42") == [4]
    assert kept(F.col("id").between(15, 34)) == [1, 2, 3]
    assert kept("id IN (3, 97) OR v = 'x'") == list(range(10))  # v has no stats
    assert kept("id IN (3, 97) AND v = 'x'") == [0, 9]
    assert kept("NOT (id >= 5)") == [0]
