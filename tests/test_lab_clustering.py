"""The lab's clustering section (notebook 03): a table of quarter-hour files clustered, the one-hour window before and after."""

from __future__ import annotations

import pytest

from labformat import datasets
from labformat.lab import clustering

pytestmark = pytest.mark.spark


def test_clustering_the_small_file_table_reads_no_more_files_out_of_fewer(spark, tmp_path):
    """The helpers on hour-long files (the notebook's are a quarter of an hour, and its claim checks them at
    `tiny`): 24 files clustered by `ts` into 2, the same rows of the window from fewer files."""
    cached = datasets.generate(spark, datasets.spec("tiny"))
    table = clustering.small_file_table(spark, cached, tmp_path / "small", files_per_day=24)
    slices = table.file_slices()
    assert len(slices) == 24
    target = sum(s.size_bytes for s in slices) // 2 + 1  # half a day of readings a file
    run = clustering.cluster_and_compare(table, clustering.window_of(cached), target, bloom_num_entries=100)
    frame = run.frame()
    before, after = frame.loc["before clustering"], frame.loc["after clustering"]
    assert before.files_in_snapshot == 24 and 1 <= before.files_read <= 2
    assert after.files_in_snapshot == run.report.details.files_out == 2
    assert after.files_read == 1 and after.rows == before.rows == cached.spec.drones * 60
    summary = run.summary()
    assert summary["files in"] == 24 and summary["files out"] == 2 and summary["sorted by"] == "ts"


def test_layouts_cluster_copies_of_one_table_and_count_each_querys_files(spark, tmp_path):
    """`tiny` has 2 drones: 24 hour-long files of both, clustered into 4 files per layout. linear: ts gives
    four 6-hour files (the drone filter reads all 4); every layout led by drone_id splits the drones into
    halves (z-order's first bit is the drone's; Hilbert's four quadrants are drone x half-day): 2 files for
    the drone filter and for the window, 1 for both. The same rows on every layout."""
    cached = datasets.generate(spark, datasets.spec("tiny"))
    queries = clustering.drone_and_window(cached)
    run = clustering.layouts(spark, cached, "layouts", queries, files_out=4, files_per_day=24, workdir=tmp_path)
    frame = run.frame()
    assert list(frame.index) == ["before clustering"] + [label for label, _, _ in clustering.LAYOUTS]
    assert list(frame["files"]) == [24, 4, 4, 4, 4]
    assert frame.loc["linear: ts"].tolist()[1:] == [4, 1, 1]
    for label in ("linear: drone_id, ts", "z-order: drone_id, ts", "hilbert: drone_id, ts"):
        assert frame.loc[label].tolist()[1:] == [2, 2, 1], label
    assert frame.loc["before clustering", "drone_id filter"] == 24
    assert run.rows_returned("drone and hour") == {60} and run.rows_returned("one-hour window") == {120}
    assert ("linear: drone_id, ts and z-order: drone_id, ts and hilbert: drone_id, ts read as many files on every "
            "query") in run.numbers()


def test_the_notebooks_target_clusters_a_day_into_four_files_and_retention_is_counted_back_from_the_report(spark, tmp_path):
    """The notebook's clustering target writes `CLUSTERED_FILES` files whatever the preset (a day's bytes
    over 4, plus one); two corrections after it make four writes, and a query as of the clustering
    reads on after a clean retaining the 2 corrections (the clustering is the write just before them,
    whose snapshot the cleaner keeps), not after one retaining 1."""
    cached = datasets.generate(spark, datasets.spec("tiny"))
    table = clustering.small_file_table(spark, cached, tmp_path / "small", files_per_day=24)
    run = clustering.cluster_and_compare(table, clustering.window_of(cached), clustering.target_for(table))
    assert run.report.details.files_out == clustering.CLUSTERED_FILES == 4
    assert run.frame().loc["after clustering", "files_read"] == 1  # 10:00-11:00 lies inside 06:00-12:00
    for hour in (3, 15):
        report = clustering.correct_hour(table, cached, hour)
        assert report.rows_updated == cached.spec.drones * 60 and report.rows_inserted == 0
    writes = [i.time for i in table.active_timeline.completed_writes()]
    assert len(writes) == 4
    cleaned = clustering.retention(table, writes[-3], clustering.window_of(cached))
    assert [c.retained for c in cleaned.cleans] == [4, 3, 2, 1] and cleaned.writes_after == 2
    assert [c.readable for c in cleaned.cleans] == [True, True, True, False]
    # 3 retained: earliestCommitToRetain is the clustering, its replaced file groups stay: nothing to delete.
    assert [c.report.instant is None for c in cleaned.cleans] == [True, True, False, False]
    assert cleaned.smallest_readable == 2
