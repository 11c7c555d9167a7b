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
