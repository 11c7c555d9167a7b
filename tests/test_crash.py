"""A writer killed before or during the commit leaves the table at its last commit; the next writer rolls back.

Each test runs on a local folder at every kill point and on a local S3 server at the last one
before the publish (`tests.helpers.kill_points`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import labformat as lf
from tests.crash_writer import crash
from tests.helpers import ALL_COLUMNS, assert_same_rows, kill_points, snapshot, telemetry

ROOT = Path(__file__).resolve().parents[1]

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


def test_only_an_explicit_arm_makes_a_writer_die_at_a_point(tmp_path):
    """A production job whose environment happens to hold LABFORMAT_CRASH_AT never dies: only `hooks.arm` arms a point."""
    script = ("from labformat import hooks\n"
              "hooks.crash_point('after_start'); print('alive', flush=True)\n"
              "hooks.arm(crash_at='after_start'); hooks.crash_point('after_commit'); print('other points go on', flush=True)\n"
              "hooks.crash_point('after_start'); print('never printed', flush=True)\n")
    env = dict(os.environ, LABFORMAT_CRASH_AT="after_start", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.split("\n")[:2]) == (86, ["alive", "other points go on"])


def test_arm_refuses_a_point_the_protocol_does_not_have():
    from labformat import hooks

    with pytest.raises(ValueError, match="no point 'after_lunch'"):
        hooks.arm(crash_at="after_lunch")
    with pytest.raises(ValueError, match="pause_dir"):
        hooks.arm(pause_at="after_start")
