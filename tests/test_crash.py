"""A writer killed before or during the commit leaves the table at its last commit; the next writer rolls back.

Each test runs on a local folder at every kill point and on a local S3 server at the last one
before the publish (`tests.helpers.kill_points`).
"""

from __future__ import annotations

import pytest

import labformat as lf
from tests.crash_writer import crash
from tests.helpers import ALL_COLUMNS, assert_same_rows, kill_points, snapshot, telemetry

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize(("home", "point"), kill_points(["after_requested", "after_write", "before_publish"]),
                         indirect=["home"])
def test_killed_writer_leaves_last_commit_readable_and_is_rolled_back(spark, home, point):
    path = home.uri("t")
    t = lf.Table.create(spark, path, partition_field="day", storage_options=home.storage_options)
    first = t.bulk_insert(telemetry(spark, 200))
    before = snapshot(t.read())

    crash(path, point)

    # The dead writer's instant is pending; readers see exactly the last completed commit.
    reopened = lf.Table.open(spark, path, storage_options=home.storage_options)
    assert [i.time for i in reopened.timeline()] == [first.instant]
    assert_same_rows(snapshot(reopened.read()), before, ALL_COLUMNS)
    assert_same_rows(home.hudi_snapshot("t"), before, ALL_COLUMNS)
    leftovers = [p for p in home.files("t") if p.endswith(".parquet") and first.instant not in p]
    if point in ("after_write", "before_publish"):
        assert leftovers, "the crash should have left uncommitted base files behind"
    if point == "before_publish":
        # The metadata table was written for the dead instant; readers must not have used it.
        assert any(p.startswith(".hoodie/metadata/") for p in leftovers)
        _, scan = reopened.query("battery_pct >= 0")
        assert scan.rows_returned == len(before)

    # The next writer rolls the failed instant back, then writes.
    report = reopened.bulk_insert(telemetry(spark, 50, start=5000, prefix="2024011513"))
    assert len(report.rolled_back) == 1 and report.rolled_back[0] > first.instant
    assert not set(leftovers) & set(home.files("t"))  # base files and metadata files alike
    actions = [(i.action.value, i.time) for i in reopened.timeline()]
    assert [a for a, _ in actions] == ["commit", "rollback", "commit"]
    assert not [f for f in home.storage("t").list(".hoodie") if f.path.startswith(f".hoodie/{report.rolled_back[0]}")]
    after = snapshot(reopened.read())
    assert len(after) == 250
    assert_same_rows(home.hudi_snapshot("t"), after, ALL_COLUMNS)
