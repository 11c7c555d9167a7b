"""Issue 28: a table that protects itself: its properties, its files' bytes, its writers' view of it, and the storage under it.

Each test names the case of issue 28 it covers. The table is damaged the way a failing machine or a
careless hand would (a truncated file, a flipped bit, a swapped log, a full disk, a read-only
folder), and labformat must say so with a LabformatError naming the problem, never answer with
different rows.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import labformat as lf
from labformat.errors import StorageError, TableChangedError
from tests.helpers import hudi_snapshot, snapshot, telemetry, tree

pytestmark = pytest.mark.spark


def _values(df) -> dict[str, float]:
    return dict((r.record_key, r.battery_pct) for r in df.select("record_key", "battery_pct").collect())


def _corrections(spark, keys, battery: float, seconds: int = 10_000):
    rows = [(k, battery, seconds) for k in keys]
    return (spark.createDataFrame(rows, "record_key string, battery_pct double, s long")
            .join(telemetry(spark, 40).drop("battery_pct"), "record_key")
            .withColumn("updated_at", F.timestamp_seconds(F.lit(1705300000) + F.col("s")))
            .select("record_key", "drone_id", "day", "battery_pct", "signal_dbm", "updated_at"))


@pytest.fixture
def mor(spark, tmp_path):
    """A merge-on-read table, partitioned by day: 40 rows, then one upsert of 4 keys (log files)."""
    path = tmp_path / "mor"
    t = lf.Table.create(spark, path, partition_field="day", table_type="MERGE_ON_READ")
    t.bulk_insert(telemetry(spark, 40))
    keys = sorted(_values(t.read()))[:4]
    t.upsert(_corrections(spark, keys, 77.0))
    assert any(s.has_logs for s in t.file_slices())
    return t, path


# ---- case 2: hoodie.properties carries Hudi's checksum and a backup --------------------------------

def test_properties_carry_hudis_checksum_last_and_a_backup(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day", options={"table_name": "trips"})
    text = (tmp_path / "t/.hoodie/hoodie.properties").read_text()
    assert text.splitlines()[-1] == "hoodie.table.checksum=3761586722"  # CRC32 of ".trips", as Hudi computes it
    assert (tmp_path / "t/.hoodie/hoodie.properties.backup").read_text() == text
    t.bulk_insert(telemetry(spark, 10))
    # hudi-rs opens the table with the checksum in place and reads its rows.
    assert len(hudi_snapshot(tmp_path / "t")) == 10


@pytest.mark.parametrize("cut", [0.9, 0.6, 0.3])
def test_a_truncated_properties_file_is_read_from_the_backup_or_refused(spark, tmp_path, cut):
    """Case 2: cut short anywhere, hoodie.properties fails its check; the backup stands in, and without
    one the table is corrupt (it never opens with its partition field lost)."""
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    t.bulk_insert(telemetry(spark, 20))
    props = tmp_path / "t/.hoodie/hoodie.properties"
    data = props.read_bytes()
    props.write_bytes(data[:int(len(data) * cut)])
    reopened = lf.Table.open(spark, tmp_path / "t")
    assert reopened.partition_field == "day"
    reopened.upsert(telemetry(spark, 5))  # existing keys: updated in place, not stored twice
    assert reopened.read().count() == 20
    (tmp_path / "t/.hoodie/hoodie.properties.backup").unlink()
    with pytest.raises(lf.CorruptTableError, match="checksum|cut short|missing"):
        lf.Table.open(spark, tmp_path / "t")


def test_a_properties_file_whose_checksum_does_not_match_is_refused(spark, tmp_path):
    lf.Table.create(spark, tmp_path / "t")
    for name in ("hoodie.properties", "hoodie.properties.backup"):
        path = tmp_path / "t/.hoodie" / name
        path.write_text(path.read_text().replace("hoodie.table.name=t\n", "hoodie.table.name=u\n"))
    with pytest.raises(lf.CorruptTableError, match="does not match"):
        lf.Table.open(spark, tmp_path / "t")


# ---- case 5: a Table kept across its table being created again ---------------------------------------

def test_a_stale_table_object_never_writes_with_the_old_tables_settings(spark, tmp_path):
    path = tmp_path / "t"
    stale = lf.Table.create(spark, path, partition_field="day")
    stale.bulk_insert(telemetry(spark, 10))
    shutil.rmtree(path)
    fresh = lf.Table.create(spark, path)  # same name, no partition field now
    fresh.bulk_insert(telemetry(spark, 10))
    before = tree(path)
    with pytest.raises(TableChangedError, match="Table.open"):
        stale.upsert(telemetry(spark, 3))
    with pytest.raises(TableChangedError):
        stale.read()
    assert tree(path) == before
    assert len(hudi_snapshot(path)) == 10 and lf.Table.open(spark, path).read().count() == 10


# ---- case 3, 15, 16: damaged files are named, never read as different rows ---------------------------

def _log_files(t: lf.Table) -> list[str]:
    return [p for s in t.file_slices() for p in s.log_paths]


@pytest.mark.parametrize("damage", ["emptied", "truncated", "swapped"])
def test_a_damaged_log_file_is_named_before_anything_is_read(spark, mor, damage):
    """Case 3: a log file whose size is not the one its commit recorded fails the read, naming it."""
    t, path = mor
    if damage == "swapped":  # one more log, of one record: smaller than the first upsert's
        t.upsert(_corrections(spark, sorted(_values(t.read()))[-1:], 78.0))
    logs = _log_files(t)
    target = path / logs[0]
    if damage == "emptied":
        target.write_bytes(b"")
    elif damage == "truncated":
        target.write_bytes(target.read_bytes()[:-7])
    else:  # another log file's bytes under this name
        other = next(p for p in path.rglob(".*.log.*") if p != target and p.stat().st_size != target.stat().st_size)
        target.write_bytes(other.read_bytes())
    for read in (lambda: t.read(), lambda: t.query("battery_pct > 0"), lambda: t.compact()):
        with pytest.raises(lf.CorruptTableError, match=logs[0].rsplit("/", 1)[-1]):
            read()


def _flip(path, offset: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def test_a_garbled_log_file_of_the_same_size_is_named(spark, mor):
    """Case 16: a log block garbled in place fails the merge with CorruptTableError naming the file."""
    t, path = mor
    log = _log_files(t)[0]
    data = bytearray((path / log).read_bytes())
    middle = len(data) // 2
    data[middle:middle + 40] = b"\xff" * 40
    (path / log).write_bytes(bytes(data))
    with pytest.raises(lf.CorruptTableError, match=log.rsplit("/", 1)[-1]):
        t.query("battery_pct > 0")
    with pytest.raises(lf.CorruptTableError, match=log.rsplit("/", 1)[-1]):
        t.compact()


def _data_page_ranges(file) -> list[tuple[int, int]]:
    """(start, end) of each column chunk's pages (page headers and data) of a parquet file."""
    meta = pq.read_metadata(file)
    out = []
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            chunk = meta.row_group(g).column(c)
            start = chunk.dictionary_page_offset or chunk.data_page_offset
            out.append((start, start + chunk.total_compressed_size))
    return out


def test_bit_rot_in_base_file_pages_is_never_read_back_as_other_values(spark, tmp_path):
    """Case 7: 24 single-bit flips inside the data pages of a base file (page checksums written and
    verified): each query either fails with CorruptTableError naming the file or returns the rows as
    they were; never different values in silence."""
    path = tmp_path / "t"
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 400, partitions=1))
    expected = snapshot(t.read().drop("_hoodie_file_name"))
    base = path / t.file_slices()[0].path
    pristine = base.read_bytes()
    ranges = _data_page_ranges(base)
    rng = random.Random(28)
    outcomes = {"error": 0, "same": 0}
    for _ in range(24):
        start, end = rng.choice(ranges)
        base.write_bytes(pristine)
        _flip(base, rng.randrange(start, end), rng.randrange(8))
        try:
            df, _ = t.query("signal_dbm >= 0")
            got = snapshot(df.drop("_hoodie_file_name"))
        except lf.CorruptTableError as exc:
            assert base.name in str(exc)
            outcomes["error"] += 1
            continue
        assert got.equals(expected), "a flipped bit was read back as different values"
        outcomes["same"] += 1
    assert outcomes["error"] >= 20, outcomes  # a flip in a checksummed page is always caught


def test_a_base_file_garbled_inside_a_page_fails_an_upsert_with_its_name(spark, tmp_path):
    """Case 15: the merge task reads a damaged base file: CorruptTableError naming it, the table's
    rows unchanged (the write is rolled back)."""
    path = tmp_path / "t"
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 200, partitions=1))
    expected = snapshot(t.read())
    base = path / t.file_slices()[0].path
    start, end = _data_page_ranges(base)[-1]  # the last column: the exact check reads keys only
    _flip(base, (start + end) // 2)
    with pytest.raises(lf.CorruptTableError, match=base.name):
        t.upsert(telemetry(spark, 5))
    assert not t.active_timeline.pending()
    _flip(base, (start + end) // 2)  # undo: the table reads as before, nothing was committed
    assert snapshot(t.read()).equals(expected)


# ---- case 14: a clean under a running read ----------------------------------------------------------

def test_a_clean_during_a_query_is_reported_as_such(spark, tmp_path):
    """A scan planned on W1's files: W2 rewrites every file group and a clean retaining 1 keeps W1's slices
    (the last before W2, which a query begun on W1 still reads, as Hudi keeps them); after W3 and another
    such clean they are gone, and the scan says a clean deleted them."""
    path = tmp_path / "t"
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 30))
    plan = t.scan("signal_dbm >= 0")  # planned on the first commit's files
    t.upsert(telemetry(spark, 30))  # rewrites every file group
    assert t.clean({"cleaner_commits_retained": 1}).instant is None  # nothing W1's snapshot reads may go
    assert plan.measure().rows_returned == 30
    t.upsert(telemetry(spark, 30))
    assert t.clean({"cleaner_commits_retained": 1}).details.files_deleted > 0
    with pytest.raises(lf.CleanedInstantError, match="hoodie.cleaner.commits.retained"):
        plan.measure()


# ---- case 9: query and scan honour query_type ---------------------------------------------------------

def test_read_optimized_queries_read_base_files_only(spark, mor):
    t, path = mor
    updated = {k: v for k, v in _values(t.read()).items() if v == 77.0}
    df, report = t.query(F.col("record_key").isin(list(updated)), options={"query_type": "READ_OPTIMIZED"})
    assert report.details.query_type == "READ_OPTIMIZED" and report.details.log_files_read == 0
    assert 77.0 not in set(_values(df).values()) and len(_values(df)) == len(updated)
    plan = t.scan("battery_pct >= 0", options={"query_type": "READ_OPTIMIZED"})
    assert not any(s.has_logs for s in plan.file_slices)
    assert _values(plan.to_dataframe()) == _values(t.read(options={"query_type": "READ_OPTIMIZED"}))
    _, snapshot_report = t.query(F.col("record_key").isin(list(updated)))
    assert snapshot_report.details.log_files_read >= 1


# ---- case 4: timestamp record keys do not depend on the session time zone ----------------------------

def test_a_timestamp_record_key_is_the_same_in_every_session_time_zone(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", record_key="ts", precombine_field="u")
    rows = spark.range(5).select(F.timestamp_seconds(F.lit(1705300000) + F.col("id") * 3600).alias("ts"),
                                 F.col("id").alias("u"), F.lit(1.0).alias("v"))
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        t.bulk_insert(rows)
        keys = sorted(r._hoodie_record_key for r in t.read().collect())
        spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
        t.upsert(rows.withColumn("v", F.lit(2.0)).withColumn("u", F.col("u") + 10))
        spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
        t.upsert(rows.limit(2).withColumn("v", F.lit(3.0)).withColumn("u", F.col("u") + 20))
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    stored = t.read().collect()
    assert sorted(r._hoodie_record_key for r in stored) == keys  # updated in place: the same 5 keys
    assert sorted(r.v for r in stored) == [2.0, 2.0, 2.0, 3.0, 3.0]
    assert keys[0] == "2024-01-15 06:26:40"  # UTC, as Spark renders a timestamp


# ---- cases 11, 12, 22, 23: Table.create refuses what no table can be -------------------------------

def test_create_refuses_a_file_a_folder_with_files_and_a_folder_inside_a_table(spark, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(lf.InvalidInputError, match="is a file"):
        lf.Table.create(spark, tmp_path / "file")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "data.parquet").write_bytes(b"PAR1")
    with pytest.raises(lf.InvalidInputError, match="holds 1 file"):
        lf.Table.create(spark, tmp_path / "busy")
    outer = lf.Table.create(spark, tmp_path / "outer", partition_field="day")
    outer.bulk_insert(telemetry(spark, 4))
    before = tree(tmp_path / "outer")
    with pytest.raises(lf.InvalidInputError, match="inside the table"):
        lf.Table.create(spark, tmp_path / "outer" / "2024-01-15" / "inner")
    assert tree(tmp_path / "outer") == before
    (tmp_path / "empty").mkdir()
    lf.Table.create(spark, tmp_path / "empty")  # an empty folder is fine


@pytest.mark.parametrize("field,value", [("record_key", "a.b"), ("record_key", "_hoodie_record_key"),
                                         ("precombine_field", "my col"), ("partition_field", "_lf_part"),
                                         ("partition_field", "tëst")])
def test_create_refuses_a_field_no_write_can_fill(spark, tmp_path, field, value):
    with pytest.raises(lf.InvalidInputError, match="no write could ever fill it"):
        lf.Table.create(spark, tmp_path / "t", **{field: value})
    assert not (tmp_path / "t").exists()


def test_create_refuses_two_different_table_types(spark, tmp_path):
    with pytest.raises(lf.ConfigError, match="disagree"):
        lf.Table.create(spark, tmp_path / "t", table_type="COPY_ON_WRITE", options={"table_type": "MERGE_ON_READ"})
    with pytest.raises(lf.ConfigError, match="disagree"):
        lf.Table.create(spark, tmp_path / "t", table_type="MERGE_ON_READ",
                        options={"hoodie.table.type": "COPY_ON_WRITE"})
    assert not (tmp_path / "t").exists()
    t = lf.Table.create(spark, tmp_path / "t", table_type="MERGE_ON_READ", options={"table_type": "merge_on_read"})
    assert t.table_type == "MERGE_ON_READ"


# ---- case 13 and 20: the storage refuses ----------------------------------------------------------------

def _can_mount_tmpfs(folder) -> bool:
    folder.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if done.returncode == 0:
        subprocess.run(["umount", str(folder)], check=True)
    return done.returncode == 0


def test_a_full_disk_fails_the_write_with_a_storage_error_and_leaves_no_temp_file(spark, tmp_path):
    """Case 13: the table's folder is a tmpfs that fills up mid-write: StorageError (no raw OSError),
    no temp file left, and the rows committed before read back whole."""
    disk = tmp_path / "disk"
    if not _can_mount_tmpfs(disk):
        pytest.skip("this machine cannot mount a tmpfs (not root): the full disk cannot be made")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    try:
        t = lf.Table.create(spark, disk / "t", partition_field="day")
        t.bulk_insert(telemetry(spark, 40), {"bloom_num_entries": 1000})
        expected = _values(t.read())
        # Hex digests: text parquet cannot compress much, far more than the disk holds.
        digest = F.sha2(F.col("id").cast("string"), 512)
        big = telemetry(spark, 30_000).withColumn("id", F.monotonically_increasing_id()).select(
            F.concat(F.lit("big"), F.col("id")).alias("record_key"), F.concat(digest, digest, digest).alias("drone_id"),
            "day", "battery_pct", "signal_dbm", "updated_at")
        with pytest.raises(StorageError, match="No space left on device"):
            t.upsert(big)
        leaked = [p for p in (disk / "t").rglob("*.tmp")]
        assert leaked == []
        assert _values(lf.Table.open(spark, disk / "t").read()) == expected
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_read_only_timeline_fails_the_write_with_a_storage_error(spark, tmp_path):
    """Case 20: `.hoodie` made immutable (chattr +i): StorageError naming the refusal, table unchanged."""
    path = tmp_path / "t"
    t = lf.Table.create(spark, path, partition_field="day")
    t.bulk_insert(telemetry(spark, 20))
    before = tree(path)
    if subprocess.run(["chattr", "+i", str(path / ".hoodie")], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here: no read-only folder can be made as root")
    try:
        with pytest.raises(StorageError, match="Operation not permitted|Permission denied|Read-only"):
            t.upsert(telemetry(spark, 5, start=100))
    finally:
        subprocess.run(["chattr", "-i", str(path / ".hoodie")], check=True)
    assert tree(path) == before


# ---- case 6 and 10: partition paths Hudi's readers cannot read back ----------------------------------

@pytest.mark.parametrize("operation", ["bulk_insert", "upsert"])
@pytest.mark.parametrize("existing,incoming", [("a", "a/b"), ("a/b", "a"), (None, ("x", "x/y"))])
def test_a_partition_path_nesting_in_another_is_refused(spark, tmp_path, operation, existing, incoming):
    path = tmp_path / "t"
    t = lf.Table.create(spark, path, record_key="k", precombine_field="u", partition_field="p")
    if existing is not None:
        t.bulk_insert(spark.createDataFrame([("k0", existing, 1)], "k string, p string, u long"))
    values = incoming if isinstance(incoming, tuple) else (incoming,)
    rows = spark.createDataFrame([(f"k{i + 1}", v, 1) for i, v in enumerate(values)], "k string, p string, u long")
    data_before = {n: b for n, b in tree(path).items() if not n.startswith(".hoodie")}
    with pytest.raises(lf.InvalidInputError, match="nest"):
        getattr(t, operation)(rows)
    assert {n: b for n, b in tree(path).items() if not n.startswith(".hoodie")} == data_before
    assert t.read().count() == (1 if existing is not None else 0)


@pytest.mark.parametrize("operation", ["bulk_insert", "upsert"])
@pytest.mark.parametrize("value", ["a\tb", "a\nb", "a\x01", "a\x7f"])
def test_a_partition_value_with_a_control_character_is_refused(spark, tmp_path, operation, value):
    path = tmp_path / "t"
    t = lf.Table.create(spark, path, record_key="k", precombine_field="u", partition_field="p")
    t.bulk_insert(spark.createDataFrame([("k0", "plain", 1)], "k string, p string, u long"))
    with pytest.raises(lf.InvalidInputError, match="control character"):
        getattr(t, operation)(spark.createDataFrame([("k1", value, 1)], "k string, p string, u long"))
    assert [r.k for r in t.read().collect()] == ["k0"]
    assert list(hudi_snapshot(path, key="k").k) == ["k0"]
