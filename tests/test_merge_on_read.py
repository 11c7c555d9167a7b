"""Merge-on-read tables: delta commits append log files, reads merge them, and hudi-rs reads every table alike.

Each table is tiny and named after its history in the test's docstring; every end state is
checked against a pandas model, labformat's own read and Apache Hudi's reader (hudi-rs).
"""

from __future__ import annotations

import json
import shutil
import tempfile

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

import labformat as lf
from labformat.errors import CleanedInstantError, ConfigError, InstantNotFoundError
from labformat.fileformat.log_file import BlockType, read_blocks
from labformat.model.commit import LOG_KEYS_IN_BASE_KEY
from labformat.model.log_file import LogFile
from tests import crash_writer
from tests.helpers import DATA_COLUMNS, assert_same_rows, kill_points, snapshot, telemetry

pytestmark = pytest.mark.spark
MOR = "MERGE_ON_READ"


def hudi_read(path, storage_options: dict | None = None, **options) -> pd.DataFrame:
    """hudi-rs's snapshot (or `as_of`, or `read_optimized`) as pandas, sorted by key."""
    import hudi
    import pyarrow as pa

    table = hudi.HudiTableBuilder.from_base_uri(str(path)).with_storage_options(storage_options or {}).build()
    read = hudi.HudiReadOptions()
    if "as_of" in options:
        read = read.with_as_of_timestamp(options["as_of"])
    if options.get("read_optimized"):
        read = read.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    batches = table.read(read)
    if not batches:
        return pd.DataFrame(columns=DATA_COLUMNS)
    return pa.Table.from_batches(batches).to_pandas().sort_values("record_key").reset_index(drop=True)


def values(pdf: pd.DataFrame) -> dict[str, float]:
    return dict(zip(pdf["record_key"], pdf["battery_pct"]))


def corrections(spark, keys: list[str], battery: float, seconds: int = 10_000):
    """Updates of `keys`: a new battery_pct and a later updated_at (the precombine field)."""
    rows = [(k, battery, seconds) for k in keys]
    return (spark.createDataFrame(rows, "record_key string, battery_pct double, s long")
            .join(telemetry(spark, 40).drop("battery_pct"), "record_key")
            .withColumn("updated_at", F.timestamp_seconds(F.lit(1705300000) + F.col("s")))
            .select(*DATA_COLUMNS))


def assert_agrees_with_hudi(t: lf.Table, path, expected: dict[str, float], **as_of) -> None:
    """labformat's read and hudi-rs's read both hold exactly `expected` (key -> battery_pct)."""
    ours = snapshot(t.read(**as_of))
    assert values(ours) == expected
    theirs = hudi_read(path, t.storage.storage_options(), **as_of)
    assert values(theirs) == expected
    assert_same_rows(theirs, ours, DATA_COLUMNS)


def test_create_stores_the_table_type(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "m", partition_field="day", table_type=MOR)
    assert t.table_type == MOR and lf.Table.open(spark, tmp_path / "m").table_type == MOR
    assert "hoodie.table.type=MERGE_ON_READ" in (tmp_path / "m/.hoodie/hoodie.properties").read_text()
    assert lf.Table.create(spark, tmp_path / "c").table_type == "COPY_ON_WRITE"  # the default
    with pytest.raises(ConfigError, match="table_type"):
        lf.Table.create(spark, tmp_path / "x", table_type="MERGE_ON_WRITE")
    assert not (tmp_path / "x/.hoodie/hoodie.properties").exists()


@pytest.fixture
def mor(spark, tmp_path):
    """v6 MOR, 1 bulk insert of 40 rows over 2 partitions (a delta commit of base files only)."""
    path = tmp_path / "mor"
    t = lf.Table.create(spark, path, partition_field="day", table_type=MOR)
    first = t.bulk_insert(telemetry(spark, 40))
    return t, path, first


@pytest.fixture
def mor_home(spark, home):
    """`mor`'s table, on each storage backend in turn: (table, its TableHome, the bulk insert)."""
    t = lf.Table.create(spark, home.uri("mor"), partition_field="day", table_type=MOR,
                        storage_options=home.storage_options)
    return t, home, t.bulk_insert(telemetry(spark, 40))


def test_bulk_insert_on_mor_is_a_delta_commit_of_base_files(spark, mor):
    t, path, first = mor
    assert [i.action.value for i in t.timeline()] == ["deltacommit"]
    assert (path / f".hoodie/{first.instant}.deltacommit").exists()
    assert all(not s.has_logs for s in t.file_slices()) and first.log_files_written == 0
    assert_agrees_with_hudi(t, path, {k: v for k, v in values(snapshot(t.read())).items()})


def test_updates_append_log_files_inserts_write_base_files(spark, mor):
    """v6 MOR 1 bulk insert, 1 upsert (2 updates in two file groups, 1 insert): 2 log files, 1 new base file."""
    t, path, first = mor
    base = values(snapshot(t.read()))
    keys = sorted(base)[:2]
    slices_before = {s.file_id: s for s in t.file_slices()}
    batch = corrections(spark, keys, 77.0).unionByName(telemetry(spark, 1, start=900, prefix="2024011520"))
    # No small files: the insert opens a new file group (else it would go to a slice without logs,
    # possibly one of the two updated, which would then be merged into a new base file).
    report = t.upsert(batch, {"small_file_limit": 0})
    assert report.rows_updated == 2 and report.rows_inserted == 1
    assert report.log_files_written == len({s.file_id for s in t.file_slices() if s.has_logs}) >= 1
    assert report.files_rewritten == 0 and report.files_created == 1
    # The commit lists each log file as Hudi does: path, baseFile, logFiles, logVersion.
    body = json.loads((path / f".hoodie/{report.instant}.deltacommit").read_text())
    stats = [s for ss in body["partitionToWriteStats"].values() for s in ss]
    logs = [s for s in stats if "logFiles" in s]
    assert len(logs) == report.log_files_written
    for s in logs:
        log = LogFile.parse(s["path"])
        slice_before = slices_before[s["fileId"]]
        assert s["baseFile"] == slice_before.base_file.name and s["logFiles"] == [log.name]
        assert log.base_instant_time == first.instant == s["prevCommit"] and log.version == s["logVersion"] == 1
        blocks = read_blocks((path / s["path"]).read_bytes())
        assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA] and blocks[0].instant_time == report.instant
    # Base files are untouched: the same file slices, now with logs.
    after = {s.file_id: s for s in t.file_slices()}
    assert all(after[f].path == s.path for f, s in slices_before.items())
    expected = {**base, **{k: 77.0 for k in keys}, "202401152009_drone0000": 450.0}
    assert_agrees_with_hudi(t, path, expected)
    # Read-optimized: base files only, the updates still in logs are not there.
    ro = snapshot(t.read(options={"query_type": "READ_OPTIMIZED"}))
    assert values(ro) == {**base, "202401152009_drone0000": 450.0}
    assert values(hudi_read(path, read_optimized=True)) == values(ro)
    # Time travel: as of the bulk insert, the logs of the later delta commit are not read.
    assert_agrees_with_hudi(t, path, base, as_of=first.instant)


def test_inserts_fill_a_small_file_without_logs_by_merging_its_base_file(spark, mor):
    """v6 MOR 1 bulk insert, 1 upsert (1 update, 1 insert, small files on), 1 upsert (1 insert): inserts go to
    the smallest slice without logs, merged into a new base file; a slice with logs never takes them."""
    t, path, _ = mor
    expected = values(snapshot(t.read()))
    key = sorted(expected)[0]
    r1 = t.upsert(corrections(spark, [key], 8.0).unionByName(telemetry(spark, 1, start=901, prefix="2024011520")))
    assert r1.rows_inserted == 1 and r1.files_created == 0 and r1.files_rewritten == 1
    with_logs = {s.file_id for s in t.file_slices() if s.has_logs}
    r2 = t.upsert(telemetry(spark, 1, start=903, prefix="2024011520"))
    assert r2.files_rewritten == 1 and r2.files[0].file_id not in with_logs and r2.log_files_written == 0
    expected.update({key: 8.0, "202401152009_drone0001": 450.5, "202401152009_drone0003": 451.5})
    assert_agrees_with_hudi(t, path, expected)


def test_keys_updated_twice_across_delta_commits_are_found_by_the_bloom_index(spark, mor):
    """v6 MOR 1 bulk insert, 3 upserts of the same 2 keys, 1 delete: no key is ever duplicated."""
    t, path, _ = mor
    expected = values(snapshot(t.read()))
    keys = sorted(expected)[:2]
    for n, battery in enumerate((10.0, 20.0, 30.0)):
        report = t.upsert(corrections(spark, keys, battery, seconds=10_000 + n))
        # Found every time, in the file group that holds them: updates, never inserts.
        assert report.rows_updated == 2 and report.rows_inserted == 0, report.summary()
        assert report.funnel.keys_matched == 2 and report.files_created == 0
        expected.update({k: battery for k in keys})
        assert_agrees_with_hudi(t, path, expected)
    versions = sorted(LogFile.parse(p).version for s in t.file_slices() for p in s.log_paths)
    assert versions and max(versions) == 3  # one log file per delta commit, versions counting up
    report = t.delete(telemetry(spark, 40).where(F.col("record_key") == keys[0]).select("record_key", "day"))
    assert report.rows_deleted == 1 and report.log_files_written == 1
    del expected[keys[0]]
    assert_agrees_with_hudi(t, path, expected)


def test_an_update_with_an_older_precombine_value_wins_on_merge_on_read_as_on_copy_on_write(spark, mor):
    """v6 MOR 1 bulk insert, 1 upsert with a precombine value older than the stored one: commit-time
    ordering (the payload class every new table names) lets the later write win, as a copy-on-write
    upsert does; hudi-rs agrees, before and after compaction."""
    t, path, _ = mor
    assert "OverwriteWithLatestAvroPayload" in (path / ".hoodie/hoodie.properties").read_text()
    expected = values(snapshot(t.read()))
    key = sorted(expected)[5]
    t.upsert(corrections(spark, [key], 1.0, seconds=-10_000))
    expected[key] = 1.0
    assert_agrees_with_hudi(t, path, expected)
    t.compact()
    assert_agrees_with_hudi(t, path, expected)


def test_a_key_deleted_then_reinserted_with_a_lower_precombine_value_stays(spark, mor):
    """v6 MOR 1 bulk insert, 1 delete, 1 upsert of the same key with a precombine value below the deleted
    record's: the re-insert is the key's latest write, so it stays (issue 28 case 1: it was dropped, and
    compaction made the loss permanent); hudi-rs agrees, before and after compaction."""
    t, path, _ = mor
    expected = values(snapshot(t.read()))
    key = sorted(expected)[7]
    t.delete(telemetry(spark, 40).where(F.col("record_key") == key).select("record_key", "day"))
    t.upsert(corrections(spark, [key], 2.0, seconds=-10_000))
    expected[key] = 2.0
    assert_agrees_with_hudi(t, path, expected)
    t.compact()
    assert not any(s.has_logs for s in t.file_slices())
    assert_agrees_with_hudi(t, path, expected)


def test_delete_writes_a_delete_block_and_a_reinsert_after_it_comes_back(spark, mor):
    """v6 MOR 1 bulk insert, 1 delete of 3 keys, 1 upsert bringing one back with a later precombine value."""
    t, path, first = mor
    expected = values(snapshot(t.read()))
    gone = sorted(expected)[10:13]
    keys_df = telemetry(spark, 40).where(F.col("record_key").isin(gone)).select("record_key", "day")
    report = t.delete(keys_df)
    assert report.rows_deleted == 3 and report.log_files_written >= 1 and report.files_rewritten == 0
    for f in report.files:
        assert [b.block_type for b in read_blocks((path / f.path).read_bytes())] == [BlockType.DELETE]
    for k in gone:
        del expected[k]
    assert_agrees_with_hudi(t, path, expected)
    t.upsert(corrections(spark, gone[:1], 5.0, seconds=20_000))
    expected[gone[0]] = 5.0
    assert_agrees_with_hudi(t, path, expected)
    assert_agrees_with_hudi(t, path, dict(values(snapshot(t.read(as_of=first.instant)))), as_of=first.instant)
    with pytest.raises(InstantNotFoundError):
        t.read(as_of="20000101000000000")


def test_query_never_prunes_a_file_slice_by_stats_its_logs_do_not_cover(spark, mor):
    """v6 MOR 1 bulk insert, 1 upsert setting battery_pct=999 (above every base file's max): the query
    for it finds the row, since slices with logs are kept, and the report says so."""
    t, path, _ = mor
    key = sorted(values(snapshot(t.read())))[3]
    t.upsert(corrections(spark, [key], 999.0))
    df, report = t.query("battery_pct > 900")
    assert report.rows_returned == 1 and snapshot(df)["record_key"].tolist() == [key]
    assert "log files of updates only judged on their base file's record keys" in str(report.stats_source)
    assert report.details.log_files_read >= 1 and report.details.file_slices_merged >= 1
    # Base-only slices are still pruned: the slice with the log is all that is read.
    assert report.funnel.after_column_stats == report.details.file_slices_merged < report.funnel.files_in_snapshot
    df, report = t.query(F.col("record_key") == key)
    assert report.rows_returned == 1 and snapshot(df)["battery_pct"].tolist() == [999.0]


def test_logs_of_updates_leave_a_file_slice_keyed_by_its_base_file(spark, tmp_path):
    """v6 MOR 1 bulk insert of 40 rows into 4 base files (unpartitioned), 2 upserts of 1 key: the
    delta commits say their logs hold base-file keys only, so the second upsert range-prunes
    and never opens the log, and record-key queries prune the slice with logs like any other.
    The same table with that mark removed (as Hudi writes its logs): the log's keys are read,
    and the slice is kept by every query."""
    path = tmp_path / "mor"
    t = lf.Table.create(spark, path, table_type=MOR)
    t.bulk_insert(telemetry(spark, 40, partitions=4))
    assert len(t.file_slices()) == 4
    expected = values(snapshot(t.read()))
    key = sorted(expected)[0]
    first = t.upsert(corrections(spark, [key], 8.0))
    body = json.loads((path / f".hoodie/{first.instant}.deltacommit").read_text())
    assert body["extraMetadata"][LOG_KEYS_IN_BASE_KEY] == "true"
    (logged,) = [s for s in t.file_slices() if s.has_logs]
    assert logged.keyed_by_base_file
    rows_in_base = pq.read_metadata(path / logged.path).num_rows

    second = t.upsert(corrections(spark, [key], 9.0, seconds=10_001))
    assert second.funnel.after_range_pruning == 1  # only the slice whose base range holds the key
    assert second.funnel.keys_read_by_exact_check == rows_in_base  # the base file's keys, no log
    assert second.funnel.log_files_read == 0
    expected[key] = 9.0
    assert_agrees_with_hudi(t, path, expected)
    _, by_key = t.query(F.col("record_key") == key)
    _, outside = t.query(F.col("record_key") > sorted(expected)[-1])
    assert by_key.rows_returned == 1 and by_key.funnel.after_column_stats == 1
    assert outside.rows_returned == 0 and outside.funnel.after_column_stats == 0
    assert "judged on their base file's record keys" in str(by_key.stats_source)

    for instant in (first.instant, second.instant):  # as if Apache Hudi had written these logs
        commit = path / f".hoodie/{instant}.deltacommit"
        body = json.loads(commit.read_text())
        del body["extraMetadata"][LOG_KEYS_IN_BASE_KEY]
        commit.write_text(json.dumps(body))
    unmarked = lf.Table.open(spark, path)
    assert not [s for s in unmarked.file_slices() if s.has_logs][0].keyed_by_base_file
    third = unmarked.upsert(corrections(spark, [key], 10.0, seconds=10_002))
    assert third.funnel.keys_read_by_exact_check == rows_in_base + 1  # the logs' one key too
    assert third.funnel.log_files_read == 2
    _, outside = unmarked.query(F.col("record_key") > sorted(expected)[-1])
    assert outside.funnel.after_column_stats == 1 and "kept without pruning" in str(outside.stats_source)
    expected[key] = 10.0
    assert_agrees_with_hudi(unmarked, path, expected)


def test_copy_on_write_tables_write_commits_and_no_log_files(spark, tmp_path):
    path = tmp_path / "cow"
    t = lf.Table.create(spark, path, partition_field="day")
    t.bulk_insert(telemetry(spark, 40))
    report = t.upsert(corrections(spark, ["202401150900_drone0001"], 3.0))
    assert [i.action.value for i in t.timeline()] == ["commit", "commit"]
    assert report.log_files_written == 0 and report.files_rewritten == 1
    assert not [p for p in path.rglob(".*.log.*")]


# ---- inline compaction (hoodie.compact.inline) ------------------------------------------------------

INLINE = "hoodie.compact.inline"
EVERY = "hoodie.compact.inline.max.delta.commits"


def test_inline_compaction_runs_once_max_delta_commits_have_completed(spark, mor):
    """v6 MOR 1 bulk insert, then upserts with inline compaction every 2 delta commits (write options):
    the first upsert is the 2nd delta commit, so its writer compacts; the next one is the 1st since."""
    t, path, _ = mor
    expected = values(snapshot(t.read()))
    keys = sorted(expected)[:4]
    options = {INLINE: "true", EVERY: 2}
    report = t.upsert(corrections(spark, keys[:2], 21.0), options)
    compaction = report.compaction
    assert report.log_files_written >= 1 and report.details.delta_commits_since_compaction == 2
    assert compaction is not None and compaction.instant > report.instant
    assert compaction.details.file_slices_compacted == report.log_files_written == compaction.files_rewritten
    assert report.summary()["compaction_instant"] == compaction.instant
    assert [i.action.value for i in t.timeline()] == ["deltacommit", "deltacommit", "commit"]
    assert (path / f".hoodie/{compaction.instant}.compaction.requested").exists()
    assert (path / f".hoodie/{compaction.instant}.commit").exists()
    assert not any(s.has_logs for s in t.file_slices())
    expected.update({k: 21.0 for k in keys[:2]})
    assert_agrees_with_hudi(t, path, expected)
    # The 1st delta commit since the compaction: its logs stay.
    later = t.upsert(corrections(spark, keys[2:], 22.0, seconds=10_001), options)
    assert later.compaction is None and later.details.delta_commits_since_compaction == 1
    assert any(s.has_logs for s in t.file_slices())
    expected.update({k: 22.0 for k in keys[2:]})
    assert_agrees_with_hudi(t, path, expected)
    # A delete is a delta commit too: the 2nd since, so its writer compacts.
    gone = t.delete(telemetry(spark, 40).where(F.col("record_key") == keys[0]).select("record_key", "day"), options)
    assert gone.compaction is not None and not any(s.has_logs for s in t.file_slices())
    del expected[keys[0]]
    assert_agrees_with_hudi(t, path, expected)
    # Off by default: no compaction, whatever the count.
    assert t.upsert(corrections(spark, keys[1:2], 23.0, seconds=10_002)).compaction is None
    assert t.upsert(corrections(spark, keys[1:2], 24.0, seconds=10_003)).compaction is None
    assert [i.action.value for i in t.timeline()][-2:] == ["deltacommit", "deltacommit"]


def test_inline_compaction_from_the_table_properties_waits_for_its_count(spark, tmp_path):
    """v6 MOR created with inline compaction every 3 delta commits: after 2 (bulk insert, upsert) none ran
    and the logs stay; the 3rd compacts; a write may turn it off for itself."""
    path = tmp_path / "mor3"
    t = lf.Table.create(spark, path, partition_field="day", table_type=MOR, options={INLINE: True, EVERY: 3})
    props = (path / ".hoodie/hoodie.properties").read_text()
    assert f"{INLINE}=true" in props and f"{EVERY}=3" in props
    reopened = lf.Table.open(spark, path)
    assert (reopened.config.compact_inline, reopened.config.compact_inline_max_delta_commits) == (True, 3)
    t.bulk_insert(telemetry(spark, 40))
    expected = values(snapshot(t.read()))
    keys = sorted(expected)[:3]
    second = reopened.upsert(corrections(spark, keys[:1], 31.0))
    assert second.compaction is None and second.details.delta_commits_since_compaction == 2
    assert [i.action.value for i in t.timeline()] == ["deltacommit", "deltacommit"]
    assert any(s.has_logs for s in t.file_slices())
    expected[keys[0]] = 31.0
    assert_agrees_with_hudi(t, path, expected)
    # The write's own option wins over the table's: this 3rd delta commit compacts nothing.
    third = t.upsert(corrections(spark, keys[1:2], 32.0), {INLINE: False})
    assert third.compaction is None and third.details.delta_commits_since_compaction is None
    fourth = t.upsert(corrections(spark, keys[2:], 33.0))
    assert fourth.details.delta_commits_since_compaction == 4 and fourth.compaction is not None
    assert not any(s.has_logs for s in t.file_slices())
    expected.update({keys[1]: 32.0, keys[2]: 33.0})
    assert_agrees_with_hudi(t, path, expected)
    # Default values are not written into a new table's properties.
    plain = lf.Table.create(spark, tmp_path / "plain", table_type=MOR, options={INLINE: False})
    assert "hoodie.compact.inline" not in (tmp_path / "plain/.hoodie/hoodie.properties").read_text()
    assert plain.config.compact_inline_max_delta_commits == 5


def test_inline_compaction_is_refused_on_copy_on_write_and_bad_counts(spark, tmp_path):
    from tests.helpers import tree

    with pytest.raises(ConfigError, match="MERGE_ON_READ"):
        lf.Table.create(spark, tmp_path / "c", options={INLINE: True})
    assert not (tmp_path / "c/.hoodie/hoodie.properties").exists()
    with pytest.raises(ConfigError, match="must be >= 1"):
        lf.Table.create(spark, tmp_path / "m", table_type=MOR, options={EVERY: 0})
    cow = lf.Table.create(spark, tmp_path / "cow")
    cow.bulk_insert(telemetry(spark, 20))
    before = tree(tmp_path / "cow")
    for write in (lambda o: cow.upsert(corrections(spark, ["202401150900_drone0001"], 3.0), o),
                  lambda o: cow.bulk_insert(telemetry(spark, 5, start=100), o)):
        with pytest.raises(ConfigError, match="COPY_ON_WRITE"):
            write({INLINE: "true"})
    assert tree(tmp_path / "cow") == before
    assert cow.upsert(corrections(spark, ["202401150900_drone0001"], 3.0), {INLINE: False}).compaction is None


def test_a_failed_inline_compaction_leaves_the_delta_commit_and_says_so(spark, mor, monkeypatch):
    from labformat.write import compaction

    t, path, _ = mor
    key = sorted(values(snapshot(t.read())))[0]

    def broken(self, run, plan, instant):
        raise RuntimeError("disk full")

    monkeypatch.setattr(compaction.Compaction, "write", broken)
    with pytest.raises(RuntimeError, match="disk full") as failed:
        t.upsert(corrections(spark, [key], 41.0), {INLINE: True, EVERY: 1})
    assert any("committed as deltacommit" in note for note in failed.value.__notes__)
    # The compaction failed in its tasks: its instant was rolled back; the delta commit stays.
    assert [i.action.value for i in t.timeline()] == ["deltacommit", "deltacommit", "rollback"]
    assert values(snapshot(t.read()))[key] == 41.0


def crash(path, operation: str, point: str, options: dict | None = None) -> None:
    """Run tests/crash_writer.py's `operation` on the table in a process of its own, killed at `point`
    (`options`: the writer's, short-lived heartbeat and lock included; crash_writer's own by default)."""
    crash_writer.crash(path, point, operation, options)


@pytest.mark.slow
@pytest.mark.parametrize(("home", "point"), kill_points(["after_write", "before_publish"], every_point_locally=False),
                         indirect=["home"])
def test_writer_killed_during_a_delta_commit_is_rolled_back_with_its_log_files(spark, mor_home, point):
    """v6 MOR 1 bulk insert, 1 upsert killed at `point` (its log files written), 1 upsert by the next
    writer, which rolls the dead one back first: its log files and markers go, hudi-rs agrees."""
    t, home, first = mor_home
    path = home.uri("mor")
    before = values(snapshot(t.read()))
    crash(path, "upsert", point)
    dead_logs = [p for p in home.files("mor") if p.rsplit("/", 1)[-1].startswith(".") and ".log." in p]
    assert dead_logs, "the crash should have left uncommitted log files behind"
    assert [p for p in home.files("mor", ".hoodie/.temp") if p.endswith(".marker.APPEND")]
    reopened = lf.Table.open(spark, path, storage_options=home.storage_options)
    assert [i.time for i in reopened.timeline()] == [first.instant]
    assert_agrees_with_hudi(reopened, path, before)

    key = sorted(before)[0]
    report = reopened.upsert(corrections(spark, [key], 55.0))
    assert len(report.rolled_back) == 1
    assert not set(dead_logs) & set(home.files("mor"))
    assert not [p for p in home.files("mor", ".hoodie/.temp") if p.endswith(".marker.APPEND")]
    assert [i.action.value for i in reopened.timeline()] == ["deltacommit", "rollback", "deltacommit"]
    assert_agrees_with_hudi(reopened, path, {**before, key: 55.0})


@pytest.mark.slow
def test_writer_killed_during_a_compaction_is_rolled_back(spark, mor_home):
    """v6 MOR 1 bulk insert, 1 upsert, 1 compaction killed after writing its base files, 1 upsert by the next
    writer: the compaction's base files and instant files go, the slices keep their logs, hudi-rs agrees."""
    t, home, first = mor_home
    path = home.uri("mor")
    key = sorted(values(snapshot(t.read())))[0]
    t.upsert(corrections(spark, [key], 66.0))
    before = values(snapshot(t.read()))
    parquet_before = {p for p in home.files("mor") if p.endswith(".parquet")}
    crash(path, "compact", "after_write")
    leftovers = {p for p in home.files("mor") if p.endswith(".parquet")} - parquet_before
    assert leftovers and [p for p in home.files("mor", ".hoodie") if p.endswith(".compaction.inflight")]
    reopened = lf.Table.open(spark, path, storage_options=home.storage_options)
    assert_agrees_with_hudi(reopened, path, before)
    report = reopened.upsert(corrections(spark, [key], 67.0, seconds=10_001))
    assert len(report.rolled_back) == 1 and not leftovers & set(home.files("mor"))
    assert not [f for f in reopened.storage.list(".hoodie") if ".compaction." in f.path]
    assert [i.action.value for i in reopened.timeline()] == ["deltacommit", "deltacommit", "rollback", "deltacommit"]
    assert_agrees_with_hudi(reopened, path, {**before, key: 67.0})


def test_compaction_merges_each_slice_with_logs_into_a_new_base_file(spark, mor):
    """v6 MOR 1 bulk insert, 2 upserts, 1 delete, 1 compaction, 1 upsert: the compaction's new slices have no
    logs, the later upsert appends to them, and labformat and hudi-rs agree at every step and as of each."""
    t, path, first = mor
    expected = values(snapshot(t.read()))
    keys = sorted(expected)[:3]
    t.upsert(corrections(spark, keys[:2], 11.0))
    t.upsert(corrections(spark, keys[1:], 12.0, seconds=10_001))
    t.delete(telemetry(spark, 40).where(F.col("record_key") == keys[0]).select("record_key", "day"))
    expected.update({keys[1]: 12.0, keys[2]: 12.0})
    del expected[keys[0]]
    before = t.timeline()[-1].time
    with_logs = [s for s in t.file_slices() if s.has_logs]
    assert with_logs
    report = t.compact()
    assert report.details.file_slices_compacted == len(with_logs) == report.files_rewritten
    assert report.details.log_files_compacted == sum(len(s.log_paths) for s in with_logs) >= 3
    plan = json.loads((path / f".hoodie/{report.instant}.compaction.requested").read_text())
    assert sorted(o["fileId"] for o in plan["operations"]) == sorted(s.file_id for s in with_logs)
    assert (path / f".hoodie/{report.instant}.commit").exists()
    assert [i.action.value for i in t.timeline()][-1] == "commit"
    assert not t.context().timeline.pending()
    assert not any(s.has_logs for s in t.file_slices())
    assert_agrees_with_hudi(t, path, expected)
    # Read-optimized reads the compacted base files: now the same as the snapshot.
    assert values(snapshot(t.read(options={"query_type": "READ_OPTIMIZED"}))) == expected
    assert values(hudi_read(path, read_optimized=True)) == expected
    # Time travel before the compaction reads the old slices with their logs.
    assert_agrees_with_hudi(t, path, expected, as_of=before)
    assert_agrees_with_hudi(t, path, values(snapshot(t.read(as_of=first.instant))), as_of=first.instant)
    # A later update appends the first log file of the compacted slice.
    later = t.upsert(corrections(spark, [keys[2]], 13.0, seconds=10_002))
    log = LogFile.parse(later.files[0].path)
    assert later.log_files_written == 1 and log.base_instant_time == report.instant and log.version == 1
    expected[keys[2]] = 13.0
    assert_agrees_with_hudi(t, path, expected)
    assert t.compact().instant is not None and t.compact().instant is None  # nothing left to compact
    assert_agrees_with_hudi(t, path, expected)
    cow = lf.Table.create(spark, path.parent / "cow")
    with pytest.raises(ConfigError, match="COPY_ON_WRITE"):
        cow.compact()


# ---- property test: random delta commits and compactions against a dict model ----------------------

ORACLE_SCHEMA = "record_key string, p string, updated_at long, value long"
ORACLE_KEYS = [f"k{i:03d}" for i in range(30)]
oracle_ops = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.lists(st.tuples(st.sampled_from(ORACLE_KEYS), st.integers(0, 3),
                                                        st.integers(0, 5)), min_size=1, max_size=12)),
        st.tuples(st.just("delete"), st.lists(st.sampled_from(ORACLE_KEYS), min_size=1, max_size=6)),
        st.tuples(st.just("compact")),
        st.tuples(st.just("cluster")),
        st.tuples(st.just("clean")),
    ),
    min_size=2, max_size=5,
)
# Every base file of the oracle's tables is small: clustering puts each partition's together.
ORACLE_CLUSTER = {"clustering_small_file_limit": "64MB", "clustering_target_file_max_bytes": "64MB"}


def oracle_partition(key: str) -> str:
    return "a" if int(key[1:]) % 2 else "b"


def agrees_with_model(t: lf.Table, path, model: dict, **as_of) -> None:
    """labformat's read and hudi-rs's (latest, or `as_of`) both hold exactly the model's rows."""
    expected = pd.DataFrame(sorted(model.values()), columns=["record_key", "p", "updated_at", "value"])
    ours = t.read(**as_of).select(*expected.columns).toPandas().sort_values("record_key").reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, expected, check_dtype=False)
    theirs = hudi_read(path, **as_of)[list(expected.columns)].reset_index(drop=True)
    pd.testing.assert_frame_equal(theirs, expected, check_dtype=False)


@pytest.mark.parametrize("index_type, partitioned, table_type",
                         [("BLOOM", True, MOR), ("SIMPLE", False, MOR), ("BLOOM", False, "COPY_ON_WRITE")])
@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ops=oracle_ops)
# Always once: a clustering, then a clean that deletes the file groups it replaced, then writes on the new ones.
@example(ops=[("upsert", [("k001", 1, 2), ("k002", 0, 1), ("k004", 2, 3)]), ("cluster",), ("delete", ["k002", "k006"]),
              ("clean",), ("upsert", [("k001", 3, 4), ("k008", 1, 1), ("k011", 0, 0)])])
def test_random_writes_and_table_services_match_a_dict_model(spark, index_type, partitioned, table_type, ops):
    """After a bulk insert, random upserts, deletes, compactions (MOR only), clusterings and cleans (retaining
    one commit): labformat's snapshot and hudi-rs's equal the model after every step; after a clean, both
    read the write just before the retained one as the model stood then, and time travel to an older
    one says it was cleaned. Each step's precombine values are above every earlier step's
    (corrections arrive later), so the latest write of a key is its record."""
    path = tempfile.mkdtemp(prefix="lf-mor-oracle-")
    try:
        t = lf.Table.create(spark, path, precombine_field="updated_at", partition_field="p" if partitioned else None,
                            options={"index_type": index_type}, table_type=table_type)
        model = {k: (k, oracle_partition(k), 0, 0) for k in ORACLE_KEYS[::2]}
        bulk = t.bulk_insert(spark.createDataFrame(list(model.values()), ORACLE_SCHEMA)).instant
        states = {bulk: dict(model)}  # completed write -> the model as of it
        options = {"small_file_limit": "2KB"}
        for step, op in enumerate(ops, start=1):
            if op[0] == "upsert":
                rows = [(k, oracle_partition(k), 10 * step + u, v) for k, u, v in op[1]]
                t.upsert(spark.createDataFrame(rows, ORACLE_SCHEMA), options)
                for row in sorted(rows, key=lambda r: (r[2], r[3])):  # the batch's highest (updated_at, value) wins
                    model[row[0]] = row
            elif op[0] == "delete":
                t.delete(spark.createDataFrame([(k, oracle_partition(k)) for k in op[1]], "record_key string, p string"),
                         options)
                for k in op[1]:
                    model.pop(k, None)
            elif op[0] == "compact":
                if table_type == MOR:
                    t.compact()
            elif op[0] == "cluster":
                t.cluster(ORACLE_CLUSTER)
            else:
                report = t.clean({"cleaner_commits_retained": 1})
                if report.instant:
                    # The write just before the one retained reads as it did (both readers); the one
                    # before that is cleaned.
                    *older, readable, _ = [i.time for i in t.active_timeline.completed_writes()]
                    assert report.details.earliest_readable_instant == readable
                    agrees_with_model(t, path, states[readable], as_of=readable)
                    for instant in older[-1:]:
                        with pytest.raises(CleanedInstantError):
                            t.read(as_of=instant)
            agrees_with_model(t, path, model)
            states[t.active_timeline.latest_completed_write().time] = dict(model)
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---- property test: merge-on-read reads exactly what copy-on-write holds -------------------------------

# Each step's precombine values are drawn afresh (0-4), so a later write's value is lower than, equal
# to or higher than the stored record's; a delete followed by a re-insert of the key happens often.
same_as_cow_ops = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.lists(st.tuples(st.sampled_from(ORACLE_KEYS[:12]), st.integers(0, 4),
                                                        st.integers(0, 5)), min_size=1, max_size=8)),
        st.tuples(st.just("delete"), st.lists(st.sampled_from(ORACLE_KEYS[:12]), min_size=1, max_size=4)),
        st.tuples(st.just("compact")),
    ),
    min_size=2, max_size=6,
)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ops=same_as_cow_ops)
# Issue 28 case 1: a key deleted, then re-inserted with a lower, an equal and a higher precombine value.
@example(ops=[("delete", ["k000", "k002", "k004"]),
              ("upsert", [("k000", 0, 1), ("k002", 3, 2), ("k004", 9, 3)]),
              ("compact",), ("upsert", [("k000", 0, 7), ("k006", 0, 8)]), ("delete", ["k006"]),
              ("upsert", [("k006", 0, 9), ("k006", 0, 4)])])
def test_merge_on_read_holds_exactly_what_copy_on_write_holds(spark, ops):
    """The same bulk insert (precombine 3), then random upserts, deletes and compactions, into a merge-on-read
    and a copy-on-write table: after every step both read as the model (the latest write of a key wins,
    the batch's highest precombine value inside one write), and hudi-rs reads both the same."""
    root = tempfile.mkdtemp(prefix="lf-mor-cow-")
    try:
        tables = {kind: lf.Table.create(spark, f"{root}/{kind}", precombine_field="updated_at", partition_field="p",
                                        table_type=kind) for kind in (MOR, "COPY_ON_WRITE")}
        model = {k: (k, oracle_partition(k), 3, 0) for k in ORACLE_KEYS[:12:2]}
        for t in tables.values():
            t.bulk_insert(spark.createDataFrame(list(model.values()), ORACLE_SCHEMA))
        for op in ops:
            for kind, t in tables.items():
                if op[0] == "upsert":
                    t.upsert(spark.createDataFrame([(k, oracle_partition(k), u, v) for k, u, v in op[1]], ORACLE_SCHEMA))
                elif op[0] == "delete":
                    t.delete(spark.createDataFrame([(k, oracle_partition(k)) for k in op[1]], "record_key string, p string"))
                elif kind == MOR:
                    t.compact()
            if op[0] == "upsert":
                batch = {}
                for k, u, v in op[1]:  # step 1: the highest (precombine, value) of the batch per key
                    batch[k] = max(batch.get(k, (u, v)), (u, v))
                model.update({k: (k, oracle_partition(k), u, v) for k, (u, v) in batch.items()})
            elif op[0] == "delete":
                for k in op[1]:
                    model.pop(k, None)
            expected = pd.DataFrame(sorted(model.values()), columns=["record_key", "p", "updated_at", "value"])
            for kind, t in tables.items():
                ours = t.read().select(*expected.columns).toPandas().sort_values("record_key").reset_index(drop=True)
                pd.testing.assert_frame_equal(ours, expected, check_dtype=False, obj=f"{kind} after {op}")
                theirs = hudi_read(f"{root}/{kind}")[list(expected.columns)].reset_index(drop=True)
                pd.testing.assert_frame_equal(theirs, expected, check_dtype=False, obj=f"hudi-rs {kind} after {op}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_update_of_a_table_keyed_by_an_int_column_appends_a_log(spark, tmp_path):
    """An int key is the computed `_lf_key` in the write: the log block's `_hoodie_record_key` comes
    from it (it once failed: `Field "_lf_key" does not exist`)."""
    t = lf.Table.create(spark, tmp_path / "t", record_key="id", precombine_field="v", partition_field=None,
                        table_type="MERGE_ON_READ", options={"index_type": "SIMPLE"})
    t.bulk_insert(spark.createDataFrame([(1, "a", 1), (2, "b", 1)], "id int, name string, v int"))
    t.upsert(spark.createDataFrame([(1, "a", 2)], "id int, name string, v int"))
    assert sum(len(s.log_paths) for s in t.file_slices()) == 1
    assert sorted((r.id, r.v) for r in t.read().collect()) == [(1, 2), (2, 1)]
    keys = sorted(r._hoodie_record_key for r in t.read().select("_hoodie_record_key").collect())
    assert len(keys) == 2 and len(set(keys)) == 2
