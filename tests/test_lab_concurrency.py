"""The concurrent-writers lab: the race is ordered by its gate, and its outcomes are what the table holds."""

from __future__ import annotations

import threading

import pytest
from pyspark.sql import functions as F

from labformat import Table, hooks
from labformat.lab import concurrency as cc, exercises as ex
from tests.helpers import telemetry

pytestmark = pytest.mark.spark


def test_a_gate_holds_only_the_thread_that_set_it():
    gate = hooks.Gate("after_start")
    passed = []

    def other():
        hooks.crash_point("after_start")  # not held: this thread never set the gate
        passed.append("other")

    def held():
        with hooks.holding(gate):
            hooks.crash_point("after_start")
        passed.append("held")

    t = threading.Thread(target=held)
    t.start()
    assert gate.reached.wait(10)
    o = threading.Thread(target=other)
    o.start()
    o.join(10)
    assert passed == ["other"]  # the held thread still waits
    gate.go.set()
    t.join(10)
    assert passed == ["other", "held"]


def test_file_groups_holding_reads_the_key_ranges():
    import pandas as pd

    files = pd.DataFrame({"file_id": ["f0", "f1"], "min_key": ["202401150000_d0", "202401151200_d0"],
                          "max_key": ["202401151159_d9", "202401152359_d9"]})
    assert cc.file_groups_holding(files, ["2024011503"]) == ["f0"]
    assert cc.file_groups_holding(files, ["2024011511", "2024011512"]) == ["f0", "f1"]
    assert cc.file_groups_holding(files, ["2024011603"]) == []


@pytest.fixture
def two_file_table(spark, tmp_path):
    """Two base files: the first hour's keys (09:xx) in one, the second hour's (10:xx) in the other."""
    table = Table.create(spark, str(tmp_path / "t"), record_key="record_key", precombine_field="updated_at")
    first = telemetry(spark, 60, partitions=1, prefix="2024011509")
    second = telemetry(spark, 60, partitions=1, prefix="2024011510")
    table.bulk_insert(first)
    table.upsert(second, {"small_file_limit": 0})  # a new file group, not padding the first file
    assert len(table.file_slices()) == 2
    return table


def _corrected(table, where, battery):
    """The rows `where` selects, with a battery value no telemetry row has and a newer precombine value."""
    return (table.read().where(where).select(*table.schema().fieldNames()).withColumn("battery_pct", F.lit(battery))
            .withColumn("updated_at", F.col("updated_at") + F.expr("INTERVAL 1 MINUTE")))


def _battery(table, value):
    return table.read().where(F.col("battery_pct") == value).count()


def test_occ_race_on_one_file_group_commits_b_and_fails_a(two_file_table):
    t = two_file_table
    first_hour = F.col("record_key").startswith("2024011509")
    a = _corrected(t, first_hour & (F.col("drone_id") < "drone0030"), 101.0)
    b = _corrected(t, first_hour & (F.col("drone_id") >= "drone0030"), 102.0)  # other keys, the same file group
    runs = cc.race(t, a, b, cc.OCC)
    assert [r.outcome for r in runs] == ["WriteConflictError", "committed"]
    assert runs[1].instant in runs[0].message and runs[0].instant and runs[0].instant < runs[1].instant
    assert runs[0].began_s == 0 and runs[0].inflight_s <= runs[1].began_s <= runs[1].ended_s <= runs[0].released_s
    timeline = cc.race_timeline(runs)
    assert list(timeline.index) == ["A", "B"] and timeline.loc["A", "held_until_s"] == runs[0].released_s
    assert timeline.loc["B", "outcome"] == "committed" and timeline.loc["A", "ended_s"] == runs[0].ended_s
    assert _battery(t, 101.0) == 0 and _battery(t, 102.0) == runs[1].rows_updated == 30
    assert ex.writers_conflict("x", True, runs).right and not ex.writers_conflict("x", False, runs).right
    assert ex.writers_conflict("x", 1, runs).right is False  # a number is no True


def test_occ_race_on_two_file_groups_commits_both_and_single_writer_refuses_b(two_file_table):
    t = two_file_table
    hour = lambda prefix, value: _corrected(t, F.col("record_key").startswith(prefix), value)  # noqa: E731
    runs = cc.race(t, hour("2024011509", 103.0), hour("2024011510", 104.0), cc.OCC)
    assert [r.outcome for r in runs] == ["committed", "committed"]
    assert set(runs[0].file_groups).isdisjoint(runs[1].file_groups)
    assert _battery(t, 103.0) == _battery(t, 104.0) == 60
    single = cc.race(t, hour("2024011509", 105.0), hour("2024011510", 106.0), cc.SINGLE_WRITER)
    assert [r.outcome for r in single] == ["committed", "ConcurrentWriteError"]
    assert _battery(t, 105.0) == 60 and _battery(t, 106.0) == 0
