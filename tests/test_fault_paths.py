"""Issue 16, cases 2-5 as tables of cases: partition paths, glob characters, 'default' folders, hoodie.properties."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import labformat as lf
from labformat import config as C
from labformat import properties as P
from labformat.context import TableConfig
from labformat.storage import Storage
from tests.helpers import tree

REFUSED = "refused"  # InvalidInputError, no file outside the table's folder, the table's rows and data files unchanged
KEPT = "kept"  # committed inside the table's folder, read back row for row

_SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("p", T.StringType()),
                        T.StructField("u", T.LongType())])


def _rows(spark, *rows):
    return spark.createDataFrame(list(rows), _SCHEMA)


def _partitioned(spark, path, hive_style=False, **options):
    return lf.Table.create(spark, path, record_key="k", precombine_field="u", partition_field="p",
                           options={"hive_style_partitioning": hive_style, **options})


def _data_files(path):
    return {name: data for name, data in tree(path).items() if not name.startswith(".hoodie")}


def _read_back(table):
    return sorted((r.k, r.p, r.u) for r in table.read().collect())


# ---- case 2: partition values never leave the table's folder nor enter .hoodie -----------------

def test_storage_refuses_a_path_that_leads_outside_the_table(tmp_path):
    storage = Storage(tmp_path / "t")
    for rel in ("../x", "a/../../x", "..", "/etc/passwd"):
        with pytest.raises(lf.LabformatError, match="outside the table"):
            storage.write_bytes(rel, b"no")
        with pytest.raises(lf.LabformatError, match="outside the table"):
            storage.uri(rel)
    assert tree(tmp_path) == {}
    assert storage.full_path("a/../b") == f"{storage.root}/a/../b"  # stays inside: allowed


# ---- case 3: paths handed to Spark are never glob patterns -------------------------------------

# (case, table folder name, partition value, hive-style folders)
GLOB_CASES = [
    ("braces_value", "t", "{a,b}", False),
    ("bracket_value", "t", "[x", False),
    ("star_value", "t", "*", False),
    ("question_value", "t", "a?b", False),
    ("closed_bracket_value", "t", "[ab]", False),
    ("hive_braces_value", "t", "{a,b}", True),
    ("braces_folder", "t{a,b}", "x", False),
    ("bracket_star_folder", "t[x*?", "y", False),
    ("both", "t[1]", "{q}", True),
]


@pytest.mark.parametrize("case,folder,value,hive_style", GLOB_CASES, ids=[c[0] for c in GLOB_CASES])
def test_glob_characters_in_paths_read_back_every_row(spark, tmp_path, case, folder, value, hive_style):
    # SIMPLE: the upsert's index reads the stored keys with Spark too.
    table = _partitioned(spark, tmp_path / folder, hive_style, index_type="SIMPLE")
    table.bulk_insert(_rows(spark, ("k0", value, 1), ("k1", "plain", 1)))
    table.upsert(_rows(spark, ("k0", value, 2), ("k2", value, 1)))
    expected = [("k0", value, 2), ("k1", "plain", 1), ("k2", value, 1)]
    assert _read_back(table) == expected
    assert _read_back(lf.Table.open(spark, tmp_path / folder)) == expected
    df, report = table.query(F.col("p") == value)
    assert sorted(r.k for r in df.collect()) == ["k0", "k2"] and report.rows_returned == 2


