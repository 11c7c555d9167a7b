"""Schema evolution on write, as Apache Hudi evolves a table's schema: added columns, safe promotions, reconciled drops.

A table starts as (k string, p string, u int, v float); later batches add a column, widen u to long
and v to double, or leave a column out. Every step is read back by labformat and by hudi-rs,
on copy-on-write and merge-on-read, and time travel reads each instant in its own schema.
"""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import types as T

import labformat as lf
from tests.helpers import hudi_snapshot

pytestmark = pytest.mark.spark

FIRST = "k string, p string, u int, v float"


def _rows(spark, ddl: str, *rows):
    return spark.createDataFrame(list(rows), ddl)


def _ours(t: lf.Table, columns, **kwargs) -> list[tuple]:
    return sorted(tuple(r) for r in t.read(**kwargs).select(*columns).collect())


def _theirs(path, columns, **as_of) -> list[tuple]:
    pdf = hudi_snapshot(path, key="k", **as_of)
    pdf = pdf.astype(object).where(pd.notna(pdf), None)
    return sorted(tuple(r) for r in pdf[list(columns)].itertuples(index=False))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_column_added_and_types_widened_read_back_through_labformat_and_hudi_rs(spark, tmp_path, table_type):
    path = tmp_path / "t"
    t = lf.Table.create(spark, path, record_key="k", precombine_field="u", partition_field="p", table_type=table_type)
    first = t.bulk_insert(_rows(spark, FIRST, ("a", "x", 1, 0.5), ("b", "x", 1, 1.5), ("c", "y", 1, 2.5)))
    # A batch that adds a column w and widens u (int -> long) and v (float -> double).
    report = t.upsert(_rows(spark, "k string, p string, u long, v double, w string",
                            ("a", "x", 2, 10.25, "new"), ("d", "y", 2, 4.0, None)))
    assert set(report.details.schema_changes) == {"u: int -> bigint", "v: float -> double", "w: added (string)"}
    schema = t.schema()
    assert [(f.name, f.dataType) for f in schema.fields] == [
        ("k", T.StringType()), ("p", T.StringType()), ("u", T.LongType()), ("v", T.DoubleType()),
        ("w", T.StringType())]
    expected = [("a", "x", 2, 10.25, "new"), ("b", "x", 1, 1.5, None), ("c", "y", 1, 2.5, None),
                ("d", "y", 2, 4.0, None)]
    columns = ["k", "p", "u", "v", "w"]
    assert _ours(t, columns) == expected
    assert _theirs(path, columns) == expected
    df, scan = t.query("w IS NULL AND u = 1")
    assert sorted(r.k for r in df.collect()) == ["b", "c"] and scan.rows_returned == 2
    # A later batch in the old, narrower types is cast up to the table's; its missing w is refused...
    with pytest.raises(lf.SchemaMismatchError, match="reconcile"):
        t.upsert(_rows(spark, FIRST, ("b", "x", 3, 7.5)))
    # ...unless reconciled: then w is kept, written as null.
    reconciled = t.upsert(_rows(spark, FIRST, ("b", "x", 3, 7.5)), {"hoodie.datasource.write.reconcile.schema": True})
    assert reconciled.details.schema_changes == ("w: kept, written as null",)
    expected[1] = ("b", "x", 3, 7.5, None)
    assert _ours(t, columns) == expected and _theirs(path, columns) == expected
    # Time travel reads the first commit in the first schema.
    assert [f.name for f in t.schema(as_of=first.instant).fields] == ["k", "p", "u", "v"]
    assert _ours(t, ["k", "u"], as_of=first.instant) == [("a", 1), ("b", 1), ("c", 1)]
    # Table services rewrite old and new files in the schema now.
    if table_type == "MERGE_ON_READ":
        assert t.compact().instant is not None
    t.cluster({"clustering_small_file_limit": "64MB", "clustering_target_file_max_bytes": "64MB"})
    assert _ours(t, columns) == expected and _theirs(path, columns) == expected


@pytest.mark.parametrize("incoming, message", [
    ("k string, p string, u string, v float", "'u' is string, the table has int"),
    ("k string, p string, u int, v boolean", "'v' is boolean, the table has float"),
    ("k string, p string, u int, V float", "only in case"),
])
def test_an_incompatible_change_is_refused_and_the_table_left_as_it_was(spark, tmp_path, incoming, message):
    t = lf.Table.create(spark, tmp_path / "t", record_key="k", precombine_field="u", partition_field="p")
    t.bulk_insert(_rows(spark, FIRST, ("a", "x", 1, 0.5)))
    before = t.timeline()
    with pytest.raises(lf.SchemaMismatchError, match=message):
        t.upsert(spark.createDataFrame([("a", "x", "1", 0.5)] if "u string" in incoming else
                                       [("a", "x", 1, True)] if "v boolean" in incoming else [("a", "x", 1, 0.5)],
                                       incoming))
    assert t.timeline() == before
    assert [f.name for f in t.schema().fields] == ["k", "p", "u", "v"]


def test_a_narrower_decimal_is_cast_up_and_a_wider_one_widens(spark, tmp_path):
    from decimal import Decimal

    path = tmp_path / "t"
    t = lf.Table.create(spark, path, record_key="k", precombine_field="u")
    t.bulk_insert(spark.createDataFrame([("a", 1, Decimal("1.50"))], "k string, u int, d decimal(6,2)"))
    t.upsert(spark.createDataFrame([("b", 1, Decimal("2.5"))], "k string, u int, d decimal(4,1)"))
    assert t.schema()["d"].dataType == T.DecimalType(6, 2)
    t.upsert(spark.createDataFrame([("c", 1, Decimal("123456.125"))], "k string, u int, d decimal(9,3)"))
    assert t.schema()["d"].dataType == T.DecimalType(9, 3)
    expected = [("a", Decimal("1.500")), ("b", Decimal("2.500")), ("c", Decimal("123456.125"))]
    assert _ours(t, ["k", "d"]) == expected
    assert _theirs(path, ["k", "d"]) == expected
