"""The fault catalogue: bad input and damaged tables, one line each, with the LabformatError (or handled outcome) expected."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
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
    task_errors,
)
from tests.helpers import telemetry, tree

pytestmark = pytest.mark.spark

ROWS = 20  # the "written" table: telemetry rows 0..19, partitioned by day (two partitions)
BUCKET_NUM = 4  # the "bucket" table: the same rows in a BUCKET table of 4 buckets


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
    table: str = "written"  # "written": ROWS rows committed; "new": created, never written; "bucket": BUCKET_NUM
    # buckets; "cdc": "written" recording changes
    match: str | None = None  # a word the error message must name
    keeps_table: bool = False  # a handled fault whose outcome also leaves every file as it was


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


def damage_base_file(table: Table) -> None:
    """Flip bytes of a base file's first data page (its size and footer kept): the driver's size check
    passes, and only reading the page can tell (most of a small file is its footer's bloom filter)."""
    import pyarrow.parquet as pq

    path = _base_file(table)
    column = pq.ParquetFile(path).metadata.row_group(0).column(0)
    end = (column.dictionary_page_offset or column.data_page_offset) + column.total_compressed_size
    with open(path, "r+b") as fh:
        fh.seek(end - 8)
        chunk = fh.read(8)
        fh.seek(end - 8)
        fh.write(bytes(b ^ 0xFF for b in chunk))


def remove_change_file(table: Table) -> None:
    os.remove(next((p for p in sorted((Path(table.path) / ".hoodie" / "cdc").glob("*.parquet")))))


def collected(frame: Callable[[Table], Any]):
    """The act: a lazy DataFrame of the table, collected by the caller inside `task_errors()`."""
    def act(table: Table, spark) -> Any:
        df = frame(table)
        with task_errors():
            return df.collect()
    return act


CDC = {"incremental_format": "cdc"}


def committed_past_it(table: Table, report) -> None:
    """Handled: the write committed, no instant is left pending, and every row is there."""
    assert report.instant is not None
    assert not table.active_timeline.pending(), table.active_timeline.pending()
    assert table.read().count() == ROWS + 5


def nothing_written(table: Table, report) -> None:
    """Handled: an empty write, no instant (the test also checks that no file changed)."""
    assert report.instant is None and report.rows_written == 0, report


def no_partitions(s):
    """Telemetry's columns over an RDD of no partitions: what `createDataFrame(sc.emptyRDD(), schema)` gives."""
    return s.createDataFrame(s.sparkContext.emptyRDD(), _rows(s).schema)


def binary_keys(s):
    """Five new rows whose record keys are bytes that are no UTF-8 (0xff first), each its own."""
    return _rows(s).withColumn("record_key", F.concat(F.unhex(F.lit("FF")), F.col("record_key").cast("binary")))


def leftover_of_a_rollback(table: Table) -> None:
    """A base file written under an instant a completed rollback names, after that rollback (issue 48
    case 17: a writer rolled back while frozen, resumed, then killed before its commit)."""
    import json

    from labformat.model.instant import next_instant_time

    rolled_back = table.active_timeline.new_instant_time()
    rollback = next_instant_time(rolled_back)
    with open(os.path.join(table.path, ".hoodie", f"{rollback}.rollback"), "w") as fh:
        json.dump({"startRollbackTime": rollback, "commitsRollback": [rolled_back],
                   "instantsRollback": [{"commitTime": rolled_back, "action": "commit"}]}, fh)
    source = table.file_slices()[0]
    late = os.path.join(table.path, source.partition_path, f"late-0_0-1-0_{rolled_back}.parquet")
    shutil.copyfile(os.path.join(table.path, source.path), late)


def swept_by_clean(table: Table, report) -> None:
    """Handled: the clean deleted the leftover; our reader and hudi-rs read the committed rows only."""
    from tests.helpers import hudi_snapshot

    assert not [f for _, _, files in os.walk(table.path) for f in files if f.startswith("late-0_")]
    assert table.read().count() == ROWS and len(hudi_snapshot(table.path)) == ROWS


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


def bucket_count(n: int):
    """A setup editing hoodie.properties' bucket count to `n` (its checksum covers the table name only, as
    Hudi's does, so the edit reads as valid); the table's file groups name buckets at or past `n`."""
    def setup(table: Table) -> None:
        from labformat.index.bucket import bucket_of_file_id

        assert max(bucket_of_file_id(s.file_id) for s in table.file_slices()) >= n
        path = os.path.join(table.path, ".hoodie", "hoodie.properties")
        text = open(path).read()
        assert f"hoodie.bucket.index.num.buckets={BUCKET_NUM}\n" in text
        with open(path, "w") as fh:
            fh.write(text.replace(f"hoodie.bucket.index.num.buckets={BUCKET_NUM}\n", f"hoodie.bucket.index.num.buckets={n}\n"))
    return setup


def reopened(act):
    """`act` on the table opened again (a setup that edits hoodie.properties changes the table under
    the one opened before it)."""
    return lambda t, s: act(Table.open(s, t.path), s)


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
    Fault("garbled rollback plan", bulk_insert(_rows), committed_past_it,
          timeline_file(next_time(".rollback.requested"), b"{not json")),
    Fault("rollback plan without its instant", upsert(_rows), committed_past_it,
          timeline_file(next_time(".rollback.requested"), b"{}")),
    Fault("garbled rollback plan beside a failed write", upsert(_rows), committed_past_it,
          both(timeline_file(next_time(".commit.requested"), b"{}"), timeline_file(next_time(".rollback.requested"), b"{"))),
    Fault("pending instant in year 9999", bulk_insert(_rows), CorruptTableError,
          timeline_file(lambda t: "99991231235959999.commit.requested", b"{}"), match="99991231235959999"),
    Fault("completed instant in year 9999", bulk_insert(_rows), CorruptTableError,
          timeline_file(lambda t: "99991231235959999.rollback", b"{}"), match="99991231235959999"),
    Fault("instant time that is no date", upsert(_rows), CorruptTableError,
          timeline_file(lambda t: "99999999999999999.rollback", b"{}"), match="99999999999999999"),
    # issue 48 case 17: a rolled-back writer's file that outlived its rollback
    Fault("base file of a rolled-back instant, clean", lambda t, s: t.clean(), swept_by_clean, leftover_of_a_rollback),
    # case 7: raw errors instead of LabformatError
    Fault("array column on a new table", bulk_insert(with_column("tags", lambda: F.array(F.lit("a")))),
          InvalidInputError, table="new", match="tags"),
    Fault("map column on a new table", bulk_insert(with_column("m", lambda: F.create_map(F.lit("k"), F.lit(1)))),
          InvalidInputError, table="new", match="'m'"),
    Fault("struct column on a new table", bulk_insert(with_column("s", lambda: F.struct(F.lit(1).alias("x")))),
          InvalidInputError, table="new", match="'s'"),
    Fault("null-typed column on a new table", bulk_insert(with_column("nothing", lambda: F.lit(None))),
          InvalidInputError, table="new", match="nothing"),
    Fault("map column on upsert", upsert(with_column("m", lambda: F.create_map(F.lit("k"), F.lit(1)))),
          InvalidInputError, table="new", match="'m'"),
    Fault("dotted column name", bulk_insert(with_column("a.b", lambda: F.lit(1))), InvalidInputError, table="new", match="a.b"),
    # Found beyond the list: hudi-rs cannot read a table whose schema has a name Avro refuses.
    Fault("dashed column name", bulk_insert(with_column("drone-id", lambda: F.lit(1))),
          InvalidInputError, table="new", match="drone-id"),
    Fault("column name with a space on upsert", upsert(with_column("my col", lambda: F.lit(1))),
          InvalidInputError, match="my col"),
    Fault("non-ASCII column name", bulk_insert(with_column("tëst", lambda: F.lit(1))),
          InvalidInputError, table="new", match="tëst"),
    Fault("column name starting with a digit", bulk_insert(with_column("1st", lambda: F.lit(1))),
          InvalidInputError, table="new", match="1st"),
    Fault("column named _lf_key on upsert", upsert(with_column("_lf_key", lambda: F.lit("x"))),
          InvalidInputError, table="new", match="_lf_key"),
    Fault("column with the helper prefix", bulk_insert(with_column("_lf_mine", lambda: F.lit(1))),
          InvalidInputError, table="new", match="_lf_mine"),
    Fault("missing base file on read", lambda t, s: t.read().count(), CorruptTableError, remove_base_file, match=".parquet"),
    Fault("truncated base file on read", lambda t, s: t.read().count(), CorruptTableError, truncate_base_file, match=".parquet"),
    Fault("missing base file on query", lambda t, s: t.query("signal_dbm >= 0"), CorruptTableError,
          remove_base_file, match=".parquet"),
    Fault("truncated base file on query", lambda t, s: t.query("signal_dbm >= 0"), CorruptTableError,
          truncate_base_file, match=".parquet"),
    Fault("pandas DataFrame to bulk_insert", bulk_insert(pandas_rows), InvalidInputError, match="Spark DataFrame"),
    Fault("pandas DataFrame to upsert", upsert(pandas_rows), InvalidInputError, match="Spark DataFrame"),
    Fault("pandas DataFrame to delete", lambda t, s: t.delete(pandas_rows(s)), InvalidInputError, match="Spark DataFrame"),
    Fault("None to bulk_insert", lambda t, s: t.bulk_insert(None), InvalidInputError, match="Spark DataFrame"),
    Fault("None to upsert", lambda t, s: t.upsert(None), InvalidInputError, match="Spark DataFrame"),
    Fault("None to delete", lambda t, s: t.delete(None), InvalidInputError, match="Spark DataFrame"),
    Fault("write options as a list", lambda t, s: t.bulk_insert(_rows(s), [("max_file_size", 4096)]), ConfigError, match="list"),
    Fault("read options as a list", lambda t, s: t.query("signal_dbm >= 0", options=["data_skipping"]),
          ConfigError, match="list"),
    Fault("Table.open(None)", lambda t, s: Table.open(s, None), InvalidInputError, match="None"),
    Fault("Table.create(spark, None)", lambda t, s: Table.create(s, None), InvalidInputError, match="None"),
    # case 8: silent acceptance
    Fault("null precombine value on upsert", upsert(spark_null_precombine), InvalidInputError, match="updated_at"),
    Fault("user column _hoodie_record_key", bulk_insert(with_column("_hoodie_record_key", lambda: F.lit("k"))),
          InvalidInputError, match="_hoodie_record_key"),
    Fault("user column _hoodie_commit_time on upsert", upsert(with_column("_hoodie_commit_time", lambda: F.lit("0"))),
          InvalidInputError, match="_hoodie_commit_time"),
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
    # issue 48 case 16: an error inside a lazy DataFrame's task reaches the caller as Spark's exception;
    # task_errors() gives it back as the LabformatError, and query() and changes() raise typed ones
    Fault("damaged base file, read() collected in task_errors()", collected(lambda t: t.read()), CorruptTableError,
          damage_base_file, match=".parquet"),
    Fault("damaged base file, changes() collected in task_errors()", collected(lambda t: t.changes("000")),
          CorruptTableError, damage_base_file, match=".parquet"),
    Fault("damaged base file on query", lambda t, s: t.query("signal_dbm >= 0"), CorruptTableError, damage_base_file,
          match=".parquet"),
    Fault("missing change-record file on a CDC read", lambda t, s: t.changes("000", options=CDC), CorruptTableError,
          remove_change_file, table="cdc", match=".hoodie/cdc/"),
    # case 6 and 10, upsert side (before any instant); the bulk insert side is in test_integrity.py
    Fault("partition value nesting in an existing partition", upsert(lambda s: _rows(s).withColumn(
        "day", F.lit("2024-01-15/late"))), InvalidInputError, match="nest"),
    Fault("partition value with a tab", upsert(lambda s: _rows(s).withColumn("day", F.lit("2024\t01"))),
          InvalidInputError, match="control character"),
    # issue 48 case 12: an input of no partitions is an empty write in every sort mode (no instant)
    *[Fault(f"no input partitions, bulk insert {mode}", bulk_insert(no_partitions, bulk_insert_sort_mode=mode),
            nothing_written, keeps_table=True)
      for mode in ("GLOBAL_SORT", "PARTITION_PATH_REPARTITION", "NONE", "PARTITION_SORT")],
    Fault("no input partitions, bulk insert GLOBAL_SORT into a new table",
          bulk_insert(no_partitions, bulk_insert_sort_mode="GLOBAL_SORT"), nothing_written, table="new",
          keeps_table=True),
    Fault("no input partitions, upsert", upsert(no_partitions), nothing_written, keeps_table=True),
    Fault("no input partitions, delete", delete_keys(no_partitions), nothing_written, keeps_table=True),
    # case 13: binary record keys and partition values, refused before an instant (Hudi's writers
    # disagree on their string: hex in its Avro key generators, the JVM's array name in its row writer)
    Fault("binary record key on bulk insert", bulk_insert(binary_keys), InvalidInputError, table="new",
          match="'record_key'"),
    Fault("binary record key on upsert", upsert(binary_keys), InvalidInputError, table="new", match="'record_key'"),
    Fault("binary record key on delete", delete_keys(binary_keys), InvalidInputError, match="'record_key'"),
    Fault("binary partition value on upsert", upsert(lambda s: _rows(s).withColumn("day", F.unhex(F.lit("FF")))),
          InvalidInputError, table="new", match="'day'"),
    # issue 48 case 8: hoodie.properties edited to fewer buckets than the file groups name (opened after it)
    Fault("bucket count edited from 4 to 2, upsert", reopened(upsert(lambda s: _rows(s, 10, start=0))),
          CorruptTableError, bucket_count(2), table="bucket", match="hoodie.bucket.index.num.buckets=2"),
    Fault("bucket count edited from 4 to 2, bulk insert", reopened(bulk_insert(_rows)),
          CorruptTableError, bucket_count(2), table="bucket", match="hoodie.bucket.index.num.buckets=2"),
    Fault("bucket count edited from 4 to 2, delete", reopened(delete_keys(lambda s: _rows(s, 10, start=0))),
          CorruptTableError, bucket_count(2), table="bucket", match="hoodie.bucket.index.num.buckets=2"),
    Fault("bucket count edited from 4 to 2, bucket join", reopened(lambda t, s: t.join_by_bucket(t)),
          CorruptTableError, bucket_count(2), table="bucket", match="hoodie.bucket.index.num.buckets=2"),
    Fault("bucket count edited from 4 to 2, point query",
          reopened(lambda t, s: t.query("record_key = '202401150900_drone0003'")),
          CorruptTableError, bucket_count(2), table="bucket", match="hoodie.bucket.index.num.buckets=2"),
    # issue 48 cases 5-7: the record index is verified where it is read, and refuses a key stored twice
    Fault("record index file replaced by another's", record_index_upsert, index_rebuilt, index_file_replaced_by_another),
    Fault("record index file with a flipped bit", record_index_upsert, index_rebuilt, index_file_bit_flipped),
    Fault("record index manifest without its checksum", record_index_upsert, index_rebuilt, index_manifest_unchecked),
    Fault("RECORD_INDEX after a SIMPLE write stored a key twice", record_index_upsert, ConfigError, key_moved_by_simple,
          match="more than one file group"),
]


@pytest.fixture(scope="module")
def pristine(spark, tmp_path_factory):
    """The tables every case starts from (copied per case): one never written, one with ROWS rows, and a
    BUCKET table with the same rows."""
    root = tmp_path_factory.mktemp("fault-tables")
    Table.create(spark, str(root / "new"), partition_field="day")
    written = Table.create(spark, str(root / "written"), partition_field="day")
    written.bulk_insert(telemetry(spark, ROWS, partitions=2))
    bucket = Table.create(spark, str(root / "bucket"), partition_field="day",
                          options={"index_type": "BUCKET", "bucket_num": BUCKET_NUM})
    bucket.bulk_insert(telemetry(spark, ROWS, partitions=2))
    cdc = Table.create(spark, str(root / "cdc"), partition_field="day", options={"cdc_enabled": True})
    cdc.bulk_insert(telemetry(spark, ROWS, partitions=2))
    return {"new": root / "new", "written": root / "written", "bucket": root / "bucket", "cdc": root / "cdc"}


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_fault(fault: Fault, spark, pristine, tmp_path):
    """The call raises the expected LabformatError and leaves every file of the table as it was
    (or, for a handled fault, the outcome passes its check)."""
    path = tmp_path / "t"
    shutil.copytree(pristine[fault.table], path)
    table = Table.open(spark, str(path))
    fault.setup(table)
    before = tree(path)
    if not isinstance(fault.expect, type):
        fault.expect(table, fault.act(table, spark))
        if fault.keeps_table:
            assert tree(path) == before, "files added, removed or changed"
        return
    with pytest.raises(fault.expect) as raised:
        fault.act(table, spark)
    if fault.match is not None:
        assert fault.match in str(raised.value), str(raised.value)
    after = tree(path)
    assert sorted(after) == sorted(before), "files added or removed"
    assert [p for p in before if after[p] != before[p]] == [], "files changed"
