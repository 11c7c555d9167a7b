"""The fault catalogue: bad input and damaged tables, one line each, with the LabformatError (or handled outcome) expected."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from pyspark.sql import functions as F

from labformat import Table
from labformat.errors import (
    ConfigError,
    CorruptTableError,
    InstantNotFoundError,
    InvalidInputError,
    LabformatError,
)
from tests.helpers import telemetry, tree

pytestmark = pytest.mark.spark

ROWS = 20  # the "written" table: telemetry rows 0..19, partitioned by day (two partitions)


def _nothing(table: Table) -> None:
    pass


@dataclass(frozen=True)
class Fault:
    """One case: `setup` damages the table's folder, `act` makes the call that meets the fault.

    `expect` is the LabformatError subclass the call raises, the table then left exactly as it was
    (every file and its bytes), or, for a fault labformat handles, a check `(table, result)`.
    """

    name: str
    act: Callable[[Table, Any], Any]  # (table, spark) -> result
    expect: type[LabformatError] | Callable[[Table, Any], None]
    setup: Callable[[Table], None] = _nothing
    table: str = "written"  # "written": ROWS rows committed; "new": created, never written
    match: str | None = None  # a word the error message must name


# ---- inputs, setups and checks the cases share ------------------------------------------------

def _rows(spark, n: int = 5, start: int = 100):
    """n telemetry rows; start=100 gives keys the written table does not hold, start=0 keys it does."""
    return telemetry(spark, n, partitions=1, start=start)


def bulk_insert(make, **options):
    return lambda t, s: t.bulk_insert(make(s), options or None)


def upsert(make):
    return lambda t, s: t.upsert(make(s))


def with_column(name: str, column: Callable[[], Any]):
    """The input: five new rows plus one column (built lazily: Spark columns need a live session)."""
    return lambda s: _rows(s).withColumn(name, column())


def timeline_file(name_of: Callable[[Table], str], data: bytes):
    """A setup writing `.hoodie/<name>`; `name_of(table)` gives the name."""
    def setup(table: Table) -> None:
        with open(os.path.join(table.path, ".hoodie", name_of(table)), "wb") as fh:
            fh.write(data)
    return setup


def next_time(suffix: str) -> Callable[[Table], str]:
    return lambda t: f"{t.active_timeline.new_instant_time()}{suffix}"


def both(*setups):
    def setup(table: Table) -> None:
        for s in setups:
            s(table)
    return setup


def _base_file(table: Table) -> str:
    return os.path.join(table.path, table.file_slices()[0].path)


def remove_base_file(table: Table) -> None:
    os.remove(_base_file(table))


def truncate_base_file(table: Table) -> None:
    path = _base_file(table)
    os.truncate(path, os.path.getsize(path) // 2)


def committed_past_it(table: Table, report) -> None:
    """Handled: the write committed, no instant is left pending, and every row is there."""
    assert report.instant is not None
    assert not table.active_timeline.pending(), table.active_timeline.pending()
    assert table.read().count() == ROWS + 5


def spark_null_precombine(s):
    return _rows(s, 1, start=0).withColumn("updated_at", F.lit(None).cast("timestamp"))


def pandas_rows(s):
    return _rows(s).toPandas()


def columns_twice(first: str, second: str):
    """Five new rows with a column `first` and a column `second` (two names Spark takes for one)."""
    return lambda s: _rows(s).withColumn(first, F.lit(1)).selectExpr("*", f"1 AS `{second}`")


def null_key(value):
    return lambda s: _rows(s, 1).withColumn("record_key", F.lit(value).cast("string"))


def delete_keys(make, **options):
    return lambda t, s: t.delete(make(s).select("record_key", "day"), options or None)


def commit_field(field: str, value):
    """A setup giving the first write stat of the latest commit a `field` of the wrong type."""
    def setup(table: Table) -> None:
        import json

        instant = table.timeline()[-1]
        path = os.path.join(table.path, ".hoodie", instant.file_name)
        body = json.load(open(path))
        stats = next(iter(body["partitionToWriteStats"].values()))
        stats[0][field] = value
        with open(path, "w") as fh:
            json.dump(body, fh)
    return setup


def _index_files(table: Table) -> list[str]:
    folder = os.path.join(table.path, ".hoodie", "metadata", "record_index")
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".parquet"))


def keep_record_index(table: Table) -> None:
    table.rebuild_metadata({"record_index_enable": True})


def index_file_replaced_by_another(table: Table) -> None:
    keep_record_index(table)
    first, second = _index_files(table)[:2]
    shutil.copyfile(first, second)


def index_file_bit_flipped(table: Table) -> None:
    keep_record_index(table)
    path = _index_files(table)[0]
    with open(path, "r+b") as fh:
        data = bytearray(fh.read())
        data[len(data) // 3] ^= 0x10
        fh.seek(0)
        fh.write(data)


def index_manifest_unchecked(table: Table) -> None:
    import json

    keep_record_index(table)
    folder = os.path.join(table.path, ".hoodie", "metadata", "record_index")
    (name,) = [n for n in os.listdir(folder) if n.endswith(".json")]
    body = json.load(open(os.path.join(folder, name)))
    del body["checksum"]
    with open(os.path.join(folder, name), "w") as fh:
        json.dump(body, fh)


def key_moved_by_simple(table: Table) -> None:
    keep_record_index(table)
    table.upsert(_rows(table.spark, 1, start=0).withColumn("day", F.lit("2024-01-17")), {"index_type": "SIMPLE"})


def index_rebuilt(table: Table, report) -> None:
    """Handled: the index was built again from the base files, and the upsert updated the rows in place."""
    assert "built from" in str(report.details.lookup_source), report.details.lookup_source
    assert (report.rows_updated, report.rows_inserted) == (ROWS, 0)
    assert table.read().count() == ROWS


def record_index_upsert(t, s):
    """Every key again (so every shard of the index is read) through RECORD_INDEX."""
    return t.upsert(_rows(s, ROWS, start=0), {"index_type": "RECORD_INDEX"})


# ---- the catalogue ------------------------------------------------------------------------------

FAULTS = [
    # issue 16 case 6: writes blocked by a raw error
    Fault("empty rollback plan", bulk_insert(_rows), committed_past_it, timeline_file(next_time(".rollback.requested"), b"")),
    Fault("garbled rollback plan", bulk_insert(_rows), committed_past_it, timeline_file(next_time(".rollback.requested"), b"{not json")),
    Fault("rollback plan without its instant", upsert(_rows), committed_past_it, timeline_file(next_time(".rollback.requested"), b"{}")),
    Fault("garbled rollback plan beside a failed write", upsert(_rows), committed_past_it,
          both(timeline_file(next_time(".commit.requested"), b"{}"), timeline_file(next_time(".rollback.requested"), b"{"))),
    Fault("pending instant in year 9999", bulk_insert(_rows), CorruptTableError,
          timeline_file(lambda t: "99991231235959999.commit.requested", b"{}"), match="99991231235959999"),
    Fault("completed instant in year 9999", bulk_insert(_rows), CorruptTableError,
          timeline_file(lambda t: "99991231235959999.rollback", b"{}"), match="99991231235959999"),
    Fault("instant time that is no date", upsert(_rows), CorruptTableError,
          timeline_file(lambda t: "99999999999999999.rollback", b"{}"), match="99999999999999999"),
    # case 7: raw errors instead of LabformatError
    Fault("array column on a new table", bulk_insert(with_column("tags", lambda: F.array(F.lit("a")))), InvalidInputError, table="new", match="tags"),
    Fault("map column on a new table", bulk_insert(with_column("m", lambda: F.create_map(F.lit("k"), F.lit(1)))), InvalidInputError, table="new", match="'m'"),
    Fault("struct column on a new table", bulk_insert(with_column("s", lambda: F.struct(F.lit(1).alias("x")))), InvalidInputError, table="new", match="'s'"),
    Fault("null-typed column on a new table", bulk_insert(with_column("nothing", lambda: F.lit(None))), InvalidInputError, table="new", match="nothing"),
    Fault("map column on upsert", upsert(with_column("m", lambda: F.create_map(F.lit("k"), F.lit(1)))), InvalidInputError, table="new", match="'m'"),
    Fault("dotted column name", bulk_insert(with_column("a.b", lambda: F.lit(1))), InvalidInputError, table="new", match="a.b"),
    # Found beyond the list: hudi-rs cannot read a table whose schema has a name Avro refuses.
    Fault("dashed column name", bulk_insert(with_column("drone-id", lambda: F.lit(1))), InvalidInputError, table="new", match="drone-id"),
    Fault("column name with a space on upsert", upsert(with_column("my col", lambda: F.lit(1))), InvalidInputError, match="my col"),
    Fault("non-ASCII column name", bulk_insert(with_column("tëst", lambda: F.lit(1))), InvalidInputError, table="new", match="tëst"),
    Fault("column name starting with a digit", bulk_insert(with_column("1st", lambda: F.lit(1))), InvalidInputError, table="new", match="1st"),
    Fault("column named _lf_key on upsert", upsert(with_column("_lf_key", lambda: F.lit("x"))), InvalidInputError, table="new", match="_lf_key"),
    Fault("column with the helper prefix", bulk_insert(with_column("_lf_mine", lambda: F.lit(1))), InvalidInputError, table="new", match="_lf_mine"),
    Fault("missing base file on read", lambda t, s: t.read().count(), CorruptTableError, remove_base_file, match=".parquet"),
    Fault("truncated base file on read", lambda t, s: t.read().count(), CorruptTableError, truncate_base_file, match=".parquet"),
    Fault("missing base file on query", lambda t, s: t.query("signal_dbm >= 0"), CorruptTableError, remove_base_file, match=".parquet"),
    Fault("truncated base file on query", lambda t, s: t.query("signal_dbm >= 0"), CorruptTableError, truncate_base_file, match=".parquet"),
    Fault("pandas DataFrame to bulk_insert", bulk_insert(pandas_rows), InvalidInputError, match="Spark DataFrame"),
    Fault("pandas DataFrame to upsert", upsert(pandas_rows), InvalidInputError, match="Spark DataFrame"),
    Fault("pandas DataFrame to delete", lambda t, s: t.delete(pandas_rows(s)), InvalidInputError, match="Spark DataFrame"),
    Fault("None to bulk_insert", lambda t, s: t.bulk_insert(None), InvalidInputError, match="Spark DataFrame"),
    Fault("None to upsert", lambda t, s: t.upsert(None), InvalidInputError, match="Spark DataFrame"),
    Fault("None to delete", lambda t, s: t.delete(None), InvalidInputError, match="Spark DataFrame"),
    Fault("write options as a list", lambda t, s: t.bulk_insert(_rows(s), [("max_file_size", 4096)]), ConfigError, match="list"),
    Fault("read options as a list", lambda t, s: t.query("signal_dbm >= 0", options=["data_skipping"]), ConfigError, match="list"),
    Fault("Table.open(None)", lambda t, s: Table.open(s, None), InvalidInputError, match="None"),
    Fault("Table.create(spark, None)", lambda t, s: Table.create(s, None), InvalidInputError, match="None"),
    # case 8: silent acceptance
    Fault("null precombine value on upsert", upsert(spark_null_precombine), InvalidInputError, match="updated_at"),
    Fault("user column _hoodie_record_key", bulk_insert(with_column("_hoodie_record_key", lambda: F.lit("k"))), InvalidInputError, match="_hoodie_record_key"),
    Fault("user column _hoodie_commit_time on upsert", upsert(with_column("_hoodie_commit_time", lambda: F.lit("0"))), InvalidInputError, match="_hoodie_commit_time"),
    Fault("fractional max_file_size", bulk_insert(_rows, max_file_size=1024.5), ConfigError, match="1024.5"),
    Fault("schema as of a non-instant", lambda t, s: t.schema(as_of="abc"), InstantNotFoundError, match="abc"),
    # issue 28 case 17: a commit whose write stat has a path or file id of the wrong type
    Fault("commit with a numeric path, read", lambda t, s: t.read(), CorruptTableError, commit_field("path", 7), match="path"),
    Fault("commit with a numeric file id, upsert", upsert(_rows), CorruptTableError, commit_field("fileId", 7), match="fileId"),
    Fault("commit with a list as partition path, query", lambda t, s: t.query("signal_dbm >= 0"), CorruptTableError,
          commit_field("partitionPath", ["a"]), match="partitionPath"),
    # case 18: a column twice in the input
    Fault("column v twice on a first upsert", upsert(columns_twice("v", "v")), InvalidInputError, table="new",
          match="twice"),
    Fault("columns v and V on a first bulk insert", bulk_insert(columns_twice("v", "V")), InvalidInputError,
          table="new", match="twice"),
    Fault("columns v and V on an upsert", upsert(columns_twice("v", "V")), InvalidInputError, match="twice"),
    Fault("record key twice on delete", lambda t, s: t.delete(_rows(s).selectExpr("record_key", "day", "record_key")),
          InvalidInputError, match="record_key"),
    # case 19: null and empty record keys refused before any instant, by every index
    Fault("SIMPLE null record key on upsert", lambda t, s: t.upsert(null_key(None)(s), {"index_type": "SIMPLE"}),
          InvalidInputError, match="record key"),
    Fault("SIMPLE null record key on delete", delete_keys(null_key(None), index_type="SIMPLE"), InvalidInputError,
          match="record key"),
    Fault("SIMPLE empty record key on delete", delete_keys(null_key(" "), index_type="SIMPLE"), InvalidInputError,
          match="record key"),
    Fault("BLOOM empty record key on delete", delete_keys(null_key("")), InvalidInputError, match="record key"),
    # case 21: options that are no option
    Fault("option key that is no string", lambda t, s: t.upsert(_rows(s), {1: "x"}), ConfigError, match="int"),
    Fault("size 5ib", bulk_insert(_rows, max_file_size="5ib"), ConfigError, match="5ib"),
    # case 6 and 10, upsert side (before any instant); the bulk insert side is in test_integrity.py
    Fault("partition value nesting in an existing partition", upsert(lambda s: _rows(s).withColumn(
        "day", F.lit("2024-01-15/late"))), InvalidInputError, match="nest"),
    Fault("partition value with a tab", upsert(lambda s: _rows(s).withColumn("day", F.lit("2024\t01"))),
          InvalidInputError, match="control character"),
    # issue 48 cases 5-7: the record index is verified where it is read, and refuses a key stored twice
    Fault("record index file replaced by another's", record_index_upsert, index_rebuilt, index_file_replaced_by_another),
    Fault("record index file with a flipped bit", record_index_upsert, index_rebuilt, index_file_bit_flipped),
    Fault("record index manifest without its checksum", record_index_upsert, index_rebuilt, index_manifest_unchecked),
    Fault("RECORD_INDEX after a SIMPLE write stored a key twice", record_index_upsert, ConfigError, key_moved_by_simple,
          match="more than one file group"),
]


@pytest.fixture(scope="module")
def pristine(spark, tmp_path_factory):
    """The tables every case starts from (copied per case): one never written, one with ROWS rows."""
    root = tmp_path_factory.mktemp("fault-tables")
    Table.create(spark, str(root / "new"), partition_field="day")
    written = Table.create(spark, str(root / "written"), partition_field="day")
    written.bulk_insert(telemetry(spark, ROWS, partitions=2))
    return {"new": root / "new", "written": root / "written"}


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_fault(fault: Fault, spark, pristine, tmp_path):
    """The call raises the expected LabformatError and leaves every file of the table as it was
    (or, for a handled fault, the outcome passes its check)."""
    path = tmp_path / "t"
    shutil.copytree(pristine[fault.table], path)
    table = Table.open(spark, str(path))
    fault.setup(table)
    if not isinstance(fault.expect, type):
        fault.expect(table, fault.act(table, spark))
        return
    before = tree(path)
    with pytest.raises(fault.expect) as raised:
        fault.act(table, spark)
    if fault.match is not None:
        assert fault.match in str(raised.value), str(raised.value)
    after = tree(path)
    assert sorted(after) == sorted(before), "files added or removed"
    assert [p for p in before if after[p] != before[p]] == [], "files changed"
