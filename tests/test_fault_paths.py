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
from tests.helpers import hudi_snapshot, tree

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

# (case, partition value, hive-style folders, expected): refused values are refused by both
# writes; a hive-style folder `p=..` is an ordinary folder inside the table, so it is kept.
PARTITION_PATH_CASES = [
    ("escape_two_up", "../../escape", False, REFUSED),
    ("parent", "..", False, REFUSED),
    ("timeline_folder", ".hoodie", False, REFUSED),
    ("inside_timeline", ".hoodie/metadata", False, REFUSED),
    ("empty", "", False, REFUSED),
    ("dot", ".", False, REFUSED),
    ("empty_segment", "a//b", False, REFUSED),
    ("absolute", "/tmp/escape", False, REFUSED),
    ("hive_escape_three_up", "../../../escape", True, REFUSED),
    ("hive_nested_parent", "a/../../..", True, REFUSED),
    ("hive_parent", "..", True, KEPT),
    ("hive_timeline_name", ".hoodie", True, KEPT),
    ("hive_empty", "", True, KEPT),
    ("hive_dot", ".", True, KEPT),
    ("nested_folders", "2024/01/15", False, KEPT),
    ("three_dots", "...", False, KEPT),
]


def _nothing_outside(tmp_path, path):
    outside = {name for name in tree(tmp_path) if not name.startswith(os.path.join("a", "b", "t") + os.sep)}
    assert outside == set()
    stray = [name for name in os.listdir(path / ".hoodie") if name.endswith(".parquet")]
    assert stray == []


@pytest.mark.parametrize("operation", ["bulk_insert", "upsert"])
@pytest.mark.parametrize("hive_style", [False, True], ids=["plain", "hive"])
def test_partition_values_that_leave_the_table_are_refused(spark, tmp_path, operation, hive_style):
    # Every refused value of the table against one table of its style: a refusal changes nothing, so
    # each attempt meets the same table (one table, not one per value, keeps the suite's time).
    path = tmp_path / "a" / "b" / "t"
    table = _partitioned(spark, path, hive_style)
    table.bulk_insert(_rows(spark, ("k0", "x", 1)))
    before, rows_before = _data_files(path), _read_back(table)
    write = getattr(table, operation)
    cases = [(case, value) for case, value, hive, expected in PARTITION_PATH_CASES if hive == hive_style and expected == REFUSED]
    assert cases
    for case, value in cases:
        with pytest.raises(lf.InvalidInputError, match="partition"):
            write(_rows(spark, ("k1", value, 1)))
        assert _data_files(path) == before and _read_back(table) == rows_before, case
        _nothing_outside(tmp_path, path)


KEPT_CASES = [c for c in PARTITION_PATH_CASES if c[3] == KEPT]


@pytest.mark.parametrize("operation", ["bulk_insert", "upsert"])
@pytest.mark.parametrize("case,value,hive_style,expected", KEPT_CASES, ids=[c[0] for c in KEPT_CASES])
def test_partition_values_inside_the_table_are_kept(spark, tmp_path, operation, case, value, hive_style, expected):
    path = tmp_path / "a" / "b" / "t"
    table = _partitioned(spark, path, hive_style)
    table.bulk_insert(_rows(spark, ("k0", "x", 1)))
    rows_before = _read_back(table)
    getattr(table, operation)(_rows(spark, ("k1", value, 1)))
    assert _read_back(table) == sorted(rows_before + [("k1", value, 1)])
    _nothing_outside(tmp_path, path)


def test_storage_refuses_a_path_that_leads_outside_the_table(tmp_path):
    storage = Storage(tmp_path / "t")
    for rel in ("../x", "a/../../x", "..", "/etc/passwd"):
        with pytest.raises(lf.LabformatError, match="outside the table"):
            storage.write_bytes(rel, b"no")
        with pytest.raises(lf.LabformatError, match="outside the table"):
            storage.uri(rel)
    assert tree(tmp_path) == {}
    assert storage.full_path("a/../b") == f"{storage.root}/a/../b"  # stays inside: allowed


def test_partitionpath_urlencode_is_declared_and_only_false_is_accepted(spark, tmp_path):
    with pytest.raises(lf.ConfigError, match="not supported"):
        lf.Table.create(spark, tmp_path / "t", options={"hoodie.datasource.write.partitionpath.urlencode": "true"})
    assert not (tmp_path / "t" / ".hoodie").exists()
    lf.Table.create(spark, tmp_path / "u", options={"partitionpath_urlencode": False})


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
    # Apache Hudi's own reader (hudi-rs) finds the same rows under the same folders.
    theirs = hudi_snapshot(tmp_path / folder, key="k")
    assert list(zip(theirs.k, theirs.p, theirs.u)) == expected


# ---- case 4: the string 'default' and null share a folder; pruning keeps both -------------------

# (case, condition, hive-style folders, keys expected)
DEFAULT_FOLDER_CASES = [
    ("equals_default", "p = 'default'", False, ["k_str"]),
    ("is_null", "p IS NULL", False, ["k_null"]),
    ("in_default", "p IN ('default', 'x')", False, ["k_str", "k_x"]),
    ("not_default", "p <> 'default'", False, ["k_x"]),
    ("hive_equals_default", "p = 'default'", True, ["k_str"]),
    ("hive_is_null", "p IS NULL", True, ["k_null"]),
]


@pytest.mark.parametrize("case,condition,hive_style,keys", DEFAULT_FOLDER_CASES,
                         ids=[c[0] for c in DEFAULT_FOLDER_CASES])
def test_default_string_and_null_are_both_found(spark, tmp_path, case, condition, hive_style, keys):
    table = _partitioned(spark, tmp_path / "t", hive_style)
    table.bulk_insert(_rows(spark, ("k_str", "default", 1), ("k_null", None, 1), ("k_x", "x", 1)))
    for skipping in (True, False):
        df, report = table.query(condition, options={"data_skipping": skipping})
        assert sorted(r.k for r in df.collect()) == keys, skipping
        assert report.rows_returned == len(keys)


def test_an_integer_partition_columns_default_folder_is_all_null(spark, tmp_path):
    table = lf.Table.create(spark, tmp_path / "t", record_key="k", precombine_field="u", partition_field="n")
    table.bulk_insert(spark.createDataFrame([("a", 1, 1), ("b", None, 1)], "k string, n int, u long"))
    _, equal = table.query("n = 1")
    assert equal.rows_returned == 1 and equal.funnel.after_partition_pruning == 1
    _, null = table.query("n IS NULL")
    assert null.rows_returned == 1 and null.funnel.after_partition_pruning == 1


# ---- case 5: hoodie.properties: no value can add a key ------------------------------------------

# (case, Table.create arguments, expected message)
BAD_NAME_CASES = [
    ("newline_in_partition_field", {"partition_field": "p\nhoodie.table.recordkey.fields=ts"}, "control character"),
    ("cr_in_record_key", {"record_key": "k\rhoodie.table.type=MERGE_ON_READ"}, "control character"),
    ("nul_in_precombine", {"precombine_field": "u\x00"}, "control character"),
    ("tab_in_precombine", {"precombine_field": "u\t"}, "control character"),
    ("newline_in_table_name", {"options": {"table_name": "t\nhoodie.table.precombine.field=k"}}, "control character"),
    ("comma_in_record_key", {"record_key": "a,b"}, "comma"),
]


@pytest.mark.parametrize("case,arguments,message", BAD_NAME_CASES, ids=[c[0] for c in BAD_NAME_CASES])
def test_names_that_would_rewrite_properties_are_refused(spark, tmp_path, case, arguments, message):
    with pytest.raises(lf.InvalidInputError, match=message):
        lf.Table.create(spark, tmp_path / "t", **arguments)
    assert tree(tmp_path) == {} and not (tmp_path / "t" / ".hoodie").exists()


# (case, value): each survives a write and a parse of hoodie.properties unchanged, and adds no key
ESCAPED_VALUE_CASES = [
    ("equals", "a=b"),
    ("colon", "a:b"),
    ("backslash", "a\\b"),
    ("trailing_backslash", "ab\\"),
    ("leading_spaces", "  ab"),
    ("trailing_space", "ab "),
    ("comment_chars", "#a!b"),
    ("non_ascii", "tëst-名前"),
    ("astral", "drone-\U0001F681"),
    ("newline", "a\nhoodie.table.recordkey.fields=ts"),
    ("unicode_escape_text", "\\u0041"),
]


@pytest.mark.parametrize("case,value", ESCAPED_VALUE_CASES, ids=[c[0] for c in ESCAPED_VALUE_CASES])
def test_properties_values_round_trip_escaped(case, value):
    props = {**P.REQUIRED, P.TABLE_NAME: value, P.RECORD_KEY_FIELDS: "k", P.PRECOMBINE_FIELD: "u", f"x.{value}": "v"}
    text = P.format_properties(props)
    assert text.isascii()
    assert len([line for line in text.splitlines() if not line.startswith("#")]) == len(props) + 1  # + checksum
    parsed = P.parse_properties(text)
    assert parsed.pop(P.TABLE_CHECKSUM) == P.table_checksum(props) and parsed == props


def test_properties_are_parsed_as_java_reads_them():
    text = ("# a comment\n! another\n"
            "hoodie.table.type = COPY_ON_WRITE\n"
            "hoodie.table.version:6\n"
            "hoodie.timeline.layout.version=\\\n    1\n"
            "hoodie.table.name=caf\\u00E9\\=1\n"
            "hoodie.table.recordkey.fields=a\\:b\n"
            "hoodie.table.precombine.field=\\ u\n"
            "key\\ with\\ spaces=x\n")
    props = P.parse_properties(text)
    assert props["hoodie.table.type"] == "COPY_ON_WRITE" and props["hoodie.timeline.layout.version"] == "1"
    assert props["hoodie.table.name"] == "café=1" and props["hoodie.table.recordkey.fields"] == "a:b"
    assert props["hoodie.table.precombine.field"] == " u" and props["key with spaces"] == "x"


def test_a_name_with_java_special_characters_reopens_unchanged(spark, tmp_path):
    name = " tä=b:c\\#"
    lf.Table.create(spark, tmp_path / "t", record_key="k", precombine_field="u", options={"table_name": name})
    reopened = lf.Table.open(spark, tmp_path / "t")
    assert reopened.name == name and reopened.record_key == "k"
    assert (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_bytes().isascii()
    # hudi-rs parses the escaped properties too: it finds the record key field and reads the rows.
    reopened.bulk_insert(spark.createDataFrame([("k1", 1)], "k string, u int"))
    theirs = hudi_snapshot(tmp_path / "t", key="k")
    assert list(theirs.k) == ["k1"] and list(theirs._hoodie_record_key) == ["k1"]


def test_the_config_of_a_bad_name_is_never_built():
    with pytest.raises(lf.InvalidInputError, match="record_key"):
        TableConfig.new(C.resolve({}, [C.Scope.TABLE]), "t", "k\n", "u", None)


# (case, Table.create fields, input columns, missing column named)
FIRST_WRITE_CASES = [
    ("precombine_not_a_column", {"record_key": "k", "precombine_field": "ts"}, "k string, u long", "ts"),
    ("partition_not_a_column", {"record_key": "k", "precombine_field": "u", "partition_field": "day"},
     "k string, u long", "day"),
    ("record_key_not_a_column", {"record_key": "id", "precombine_field": "u"}, "k string, u long", "id"),
]


@pytest.mark.parametrize("operation", ["bulk_insert", "upsert"])
@pytest.mark.parametrize("case,fields,ddl,missing", FIRST_WRITE_CASES, ids=[c[0] for c in FIRST_WRITE_CASES])
def test_the_first_write_must_hold_every_named_field(spark, tmp_path, operation, case, fields, ddl, missing):
    table = lf.Table.create(spark, tmp_path / "t", **fields)
    before = tree(tmp_path / "t")
    with pytest.raises(lf.InvalidInputError, match=missing):
        getattr(table, operation)(spark.createDataFrame([("a", 1)], ddl))
    assert tree(tmp_path / "t") == before
