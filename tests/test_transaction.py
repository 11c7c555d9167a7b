"""The write transaction every write path shares: empty writes, failed writes, and a writer killed after publishing."""

from __future__ import annotations

import os
import time

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import labformat as lf
from labformat.model.enums import Operation
from labformat.model.instant import Action, State
from labformat.write.transaction import WriteTransaction
from tests.crash_writer import crash
from tests.helpers import ALL_COLUMNS, assert_same_rows, hudi_snapshot, snapshot, telemetry, tree


def timeline_files(path):
    # `.aux` (the lock) and `.heartbeat` are folders every reader skips, not timeline files.
    return sorted(n for n in os.listdir(path / ".hoodie")
                  if n not in ("hoodie.properties", "hoodie.properties.backup", "metadata") and not n.startswith("."))


# ---- the transaction on its own (timeline only, no Spark) ------------------------------------


@pytest.fixture
def bare(tmp_path):
    """A table with no commits, opened without Spark: enough for the timeline side of a transaction."""
    return lf.Table.create(None, tmp_path / "t"), tmp_path / "t"


def test_start_requests_then_marks_inflight(bare):
    table, path = bare
    tx = WriteTransaction(table.context(), Operation.UPSERT)
    instant = tx.start()
    assert instant.state is State.INFLIGHT and instant.action is Action.COMMIT
    assert timeline_files(path) == sorted([instant.to(State.REQUESTED).file_name, instant.file_name])
    assert tx.rolled_back == ()


def test_start_rolls_back_a_dead_writers_instant_first(bare):
    table, path = bare
    dying = WriteTransaction(table.context(), Operation.UPSERT)
    dead = dying.start()  # never committed: its writer "died", so its heartbeat stopped
    dying._heartbeat.stop()
    tx = WriteTransaction(table.context(), Operation.BULK_INSERT)
    instant = tx.start()
    assert tx.rolled_back == (dead.time,) and instant.time > dead.time
    assert [i.action for i in table.timeline()] == [Action.ROLLBACK]
    assert not [n for n in timeline_files(path) if n.startswith(dead.time)]


def test_abandon_before_start_writes_nothing(bare):
    table, path = bare
    before = tree(path)
    with WriteTransaction(table.context(), Operation.DELETE) as tx:
        tx.abandon()
    assert tx.instant is None and tx.completed is None
    assert tree(path) == before


def test_abandon_after_start_removes_the_instant_without_a_rollback(bare):
    table, path = bare
    before = tree(path)
    with WriteTransaction(table.context(), Operation.BULK_INSERT) as tx:
        tx.start()
        tx.abandon()
    assert tx.completed is None and tx.rolled_back == ()
    assert tree(path) == before and table.timeline() == []


def test_an_error_after_start_rolls_the_instant_back_and_goes_on(bare):
    table, path = bare
    with pytest.raises(RuntimeError, match="task died"):
        with WriteTransaction(table.context(), Operation.UPSERT) as tx:
            failed = tx.start()
            raise RuntimeError("task died")
    (rollback,) = table.timeline()
    assert rollback.action is Action.ROLLBACK
    assert not [n for n in timeline_files(path) if n.startswith(failed.time)]
    assert table.active_timeline.pending() == []


def test_leaving_without_commit_or_abandon_rolls_back(bare):
    table, path = bare
    with WriteTransaction(table.context(), Operation.UPSERT) as tx:
        failed = tx.start()
    assert [i.action for i in table.timeline()] == [Action.ROLLBACK]
    assert not [n for n in timeline_files(path) if n.startswith(failed.time)]


# ---- empty writes: one rule for every operation ------------------------------------------------


EMPTY_WRITES = {
    "bulk_insert": lambda t, df: t.bulk_insert(df),
    "upsert": lambda t, df: t.upsert(df),
    "delete": lambda t, df: t.delete(df.select("record_key", "day")),
}


@pytest.mark.spark
@pytest.mark.parametrize("history", ["new", "loaded", "bucket"])
@pytest.mark.parametrize("operation", list(EMPTY_WRITES))
def test_an_empty_write_leaves_no_trace(spark, tmp_path, operation, history):
    """Every empty write: report instant None and nothing written; the table's files byte for byte as before."""
    path = tmp_path / "t"
    options = {"index_type": "BUCKET", "bucket_num": 2} if history == "bucket" else None
    t = lf.Table.create(spark, path, partition_field="day", options=options)
    if history != "new":
        t.bulk_insert(telemetry(spark, 40))
    before, timeline = tree(path), t.timeline()

    report = EMPTY_WRITES[operation](t, telemetry(spark, 10).limit(0))

    assert (report.operation, report.instant) == (operation, None)
    assert (report.rows_in, report.rows_written, report.files, report.rolled_back) == (0, 0, (), ())
    assert t.timeline() == timeline and t.active_timeline.pending() == []
    assert tree(path) == before


# ---- a failed write: rolled back by its own writer ------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("operation", ["bulk_insert", "upsert"])
def test_a_failed_write_task_leaves_the_table_as_it_was(spark, tmp_path, operation):
    """A write task fails after the instant started: data files and commits as before, the failed
    instant gone, one rollback recorded for it; the next write has nothing left to roll back."""
    path = tmp_path / "t"
    t = lf.Table.create(spark, path, partition_field="day")
    first = t.bulk_insert(telemetry(spark, 40))
    before = tree(path)
    rows = snapshot(t.read())

    if operation == "bulk_insert":  # the input itself fails inside the write tasks
        def fail_on_row_7(battery):  # nested, so that Spark's workers get it by value
            if battery == 3.5:
                raise RuntimeError("sensor feed broke")
            return battery

        broken = F.udf(fail_on_row_7, T.DoubleType())("battery_pct")
        bad = telemetry(spark, 30, start=0, prefix="2024011510").withColumn("battery_pct", broken)
        with pytest.raises(Exception, match="sensor feed broke") as info:
            t.bulk_insert(bad)
        assert not isinstance(info.value, lf.LabformatError)  # not a bad-input failure: passed on as it came
    else:  # a base file damaged in its last column: the index reads keys only, the merge task fails
        import pyarrow.parquet as pq

        pristine = {}
        for s in t.file_slices():
            target = path / s.path
            pristine[target] = target.read_bytes()
            chunk = pq.read_metadata(target).row_group(0).column(pq.read_metadata(target).num_columns - 1)
            start = chunk.dictionary_page_offset or chunk.data_page_offset
            damaged = bytearray(pristine[target])
            damaged[start + chunk.total_compressed_size - 2] ^= 0xFF  # in the last page's data, after its header
            target.write_bytes(bytes(damaged))
        with pytest.raises(lf.CorruptTableError, match="cannot be read"):
            t.upsert(telemetry(spark, 10, start=30))
        for target, data in pristine.items():
            target.write_bytes(data)

    after = tree(path)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing changed or removed
    new = set(after) - set(before)
    assert new and all(k.startswith(".hoodie/") and ".rollback" in k for k in new), new  # only the rollback's files
    (commit, rollback) = t.timeline()
    assert commit.time == first.instant and rollback.action is Action.ROLLBACK
    assert t.active_timeline.pending() == []
    assert_same_rows(snapshot(t.read()), rows, ALL_COLUMNS)

    report = t.upsert(telemetry(spark, 5, start=100))
    assert report.rolled_back == () and report.instant > rollback.time
    assert [i.action.value for i in t.timeline()] == ["commit", "rollback", "commit"]
    assert t.read().count() == 45


@pytest.mark.spark
def test_a_straggler_task_cannot_leave_a_base_file_behind_a_rollback(spark, tmp_path):
    """One write task fails at once while its sibling is still writing: the rollback waits for the
    sibling, so no base file of the failed instant survives (a reader would take it for data)."""
    path = tmp_path / "t"
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 20))
    before = tree(path)

    def slow_or_broken(battery):  # nested, so that Spark's workers get it by value
        import time

        if battery == 3.5:
            raise RuntimeError("sensor feed broke")
        time.sleep(0.2)  # the other task is still writing rows when the job fails
        return battery

    udf = F.udf(slow_or_broken, T.DoubleType())("battery_pct")
    # Two input partitions, no sort: the write tasks themselves evaluate the UDF. Row 7 (battery 3.5)
    # fails the first task after ~1.4 s; the second writes rows until ~3 s.
    bad = telemetry(spark, 30, partitions=2).withColumn("battery_pct", udf)
    with pytest.raises(Exception, match="sensor feed broke"):
        t.bulk_insert(bad)
    time.sleep(3)  # past the straggler's end, had it been left running
    after = tree(path)
    stray = [k for k in set(after) - set(before) if k.endswith(".parquet") and not k.startswith(".hoodie/")]
    assert stray == [] and t.read().count() == 20


# ---- a writer killed right after publishing its commit --------------------------------------------


@pytest.mark.spark
@pytest.mark.slow
def test_writer_killed_after_commit_leaves_its_commit_complete(spark, tmp_path):
    """The commit published before the crash is visible and whole, and the next writer keeps it."""
    path = tmp_path / "t"
    t = lf.Table.create(spark, path, partition_field="day")
    first = t.bulk_insert(telemetry(spark, 200))

    crash(path, "after_commit")

    reopened = lf.Table.open(spark, path)
    commits = reopened.timeline()
    assert [i.action for i in commits] == [Action.COMMIT, Action.COMMIT] and commits[0].time == first.instant
    second = commits[1]
    assert reopened.active_timeline.pending() == []  # nothing for the next writer to roll back
    written = reopened.commit_metadata(second).write_stats
    assert sum(w.num_inserts for w in written) == 120
    assert all((path / w.path).exists() for w in written)
    after_crash = snapshot(reopened.read())
    assert len(after_crash) == 320
    assert_same_rows(hudi_snapshot(path), after_crash, ALL_COLUMNS)
    _, scan = reopened.query("battery_pct >= 0")  # through the metadata table the dead writer wrote
    assert scan.rows_returned == 320

    report = reopened.bulk_insert(telemetry(spark, 50, start=5000, prefix="2024011513"))
    assert report.rolled_back == ()
    assert [i.action.value for i in reopened.timeline()] == ["commit", "commit", "commit"]
    assert all((path / w.path).exists() for w in written)
    assert reopened.read().count() == 370


def test_abort_deletes_a_base_file_that_lands_after_the_rollback(bare):
    """A killed task's Python worker may close its base file just after the rollback ran."""
    import threading
    import time

    table, path = bare
    straggler = path / "p" / f"f1-0_0-1-0_{'0' * 17}.parquet"

    def late_write(instant_time: str):
        time.sleep(0.3)
        straggler.parent.mkdir(exist_ok=True)
        (straggler.parent / straggler.name.replace("0" * 17, instant_time)).write_bytes(b"PAR1")

    with pytest.raises(RuntimeError, match="task failed"):
        with WriteTransaction(table.context(), Operation.UPSERT) as tx:
            instant = tx.start()
            threading.Thread(target=late_write, args=(instant.time,)).start()
            raise RuntimeError("task failed")
    assert [p.name for p in (path / "p").iterdir()] == []
    assert [i.action for i in table.timeline()] == [Action.ROLLBACK]
