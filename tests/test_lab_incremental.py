"""The incremental-pipelines lab (labformat/lab/incremental.py) at `tiny`: a source table of two days and a
delete, read back one commit at a time, fed downstream from checkpoints, and read as change records."""

from __future__ import annotations

import pytest

from labformat import datasets
from labformat.lab import incremental as inc
from labformat.lab.lessons import incremental_pipelines as rules

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def month(spark, tmp_path_factory):
    return inc.source_month(spark, datasets.spec("tiny"), days=2, workdir=tmp_path_factory.mktemp("07-month"))


def test_each_days_incremental_read_opens_what_its_commit_wrote_and_returns_it(month):
    days = inc.daily_reads(month)
    assert days.day.tolist() == [1, 2]
    assert (days.files_read == days.file_groups_written).all()
    assert (days.records_returned == days.records_written).all() and (days.records_written > 0).all()
    assert days.files_in_snapshot.is_monotonic_increasing
    assert rules.incremental_returns_what_was_written(days.records_returned.tolist(), days.records_written.tolist())[0]


def test_the_change_records_of_the_deleted_readings_are_their_inserts_then_their_deletes(month):
    assert month.deleted_drone == "drone0001" and len(month.deleted_day) == 10  # YYYY-MM-DD
    deleted = inc.changes_of_deleted(month)
    # One reading a minute: the last upsert inserted each, the delete removed each.
    assert deleted.to_dict() == {"i": 1440, "u": 0, "d": 1440} == {"i": 1440, "u": 0, "d": month.delete.rows_deleted}
    ops = inc.change_counts(month)
    assert list(ops.index) == ["day 1", "day 2", "delete"]
    assert (ops["inserts (i)"] == ops["reported inserted"]).all() and (ops["deletes (d)"] == ops["reported deleted"]).all()


def test_a_downstream_table_fed_from_checkpoints_equals_the_one_from_the_snapshot(month, tmp_path):
    downstream, runs = inc.downstream_incremental(month, workdir=tmp_path)
    assert len(runs) == 3 and runs[0]["checkpoint before"] == "000"
    assert [r["checkpoint after"] for r in runs[:-1]] == [r["checkpoint before"] for r in runs[1:]]
    assert inc.differs_from_snapshot(month, downstream) == 0
