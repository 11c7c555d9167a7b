"""A writer killed before or during the commit leaves the table at its last commit; the next writer rolls back."""

from __future__ import annotations

import os

import pytest

import labformat as lf
from tests.crash_writer import crash
from tests.helpers import ALL_COLUMNS, assert_same_rows, hudi_snapshot, snapshot, telemetry

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("point", ["after_requested", "after_write", "before_publish"])
def test_killed_writer_leaves_last_commit_readable_and_is_rolled_back(spark, tmp_path, point):
    path = tmp_path / "t"
    t = lf.Table.create(spark, path, partition_field="day")
    first = t.bulk_insert(telemetry(spark, 200))
    before = snapshot(t.read())

    crash(path, point)

    # The dead writer's instant is pending; readers see exactly the last completed commit.
    reopened = lf.Table.open(spark, path)
    assert [i.time for i in reopened.timeline()] == [first.instant]
    assert_same_rows(snapshot(reopened.read()), before, ALL_COLUMNS)
    assert_same_rows(hudi_snapshot(path), before, ALL_COLUMNS)
    leftovers = [p for p in path.rglob("*.parquet") if first.instant not in p.name]
    if point in ("after_write", "before_publish"):
        assert leftovers, "the crash should have left uncommitted base files behind"
    if point == "before_publish":
        # The metadata table was written for the dead instant; readers must not have used it.
        assert any(".hoodie/metadata/" in str(p) for p in leftovers)
        _, scan = reopened.query("battery_pct >= 0")
        assert scan.rows_returned == len(before)

    # The next writer rolls the failed instant back, then writes.
    report = reopened.bulk_insert(telemetry(spark, 50, start=5000, prefix="2024011513"))
    assert len(report.rolled_back) == 1 and report.rolled_back[0] > first.instant
    assert all(not p.exists() for p in leftovers)  # base files and metadata files alike
    actions = [(i.action.value, i.time) for i in reopened.timeline()]
    assert [a for a, _ in actions] == ["commit", "rollback", "commit"]
    assert not [n for n in os.listdir(path / ".hoodie") if n.startswith(report.rolled_back[0])]
    after = snapshot(reopened.read())
    assert len(after) == 250
    assert_same_rows(hudi_snapshot(path), after, ALL_COLUMNS)
