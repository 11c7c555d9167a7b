"""The file-size trade-off of notebook 03: the sweep's counts, the measured cost of a file, and the projection built on it."""

from __future__ import annotations

import pandas as pd
import pytest

import labformat as lf
from labformat import datasets
from labformat.lab import sweeps


def test_the_projection_charges_each_extra_file_the_measured_cost_shared_by_the_scan_tasks():
    reads = pd.DataFrame({"files": [60, 15, 8], "median_s": [0.80, 0.35, 0.28]})
    cost = sweeps.per_file_seconds(reads)
    assert cost == pytest.approx(0.01, abs=1e-3)  # 10 ms a file: the slope, not a ratio of totals
    tradeoff = pd.DataFrame({"hours_per_file": [6.0, 24.0, 48.0], "files_opened": [60, 15, 8], "scan_tasks": [2, 2, 2],
                             "query_runs_s": [[0.5, 0.7, 0.6], [0.5, 0.6, 0.4], [0.6, 0.6, 0.6]]})
    projected = sweeps.projected_file_cost(tradeoff, 0.01)
    assert projected.loc[6.0, "extra_files"] == 52 and projected.loc[6.0, "projected_extra_s"] == pytest.approx(0.26)
    assert projected.loc[48.0, "projected_extra_s"] == 0
    assert projected.loc[6.0, "measured_spread_s"] == pytest.approx(0.2)
    # a slope at or below zero is nothing measured: no cost is projected from it
    assert sweeps.projected_file_cost(tradeoff, -0.002)["projected_extra_s"].max() == 0
    assert "nothing this run could measure" in sweeps.per_file_note(-0.002)
    assert sweeps.per_file_seconds(pd.DataFrame({"files": [5, 5], "median_s": [0.1, 0.2]})) == 0.0


def test_the_note_gives_the_slope_between_neighbouring_sizes_so_a_cost_that_is_no_constant_shows():
    """small's reads of a run of issue 49's review: 6.4 ms a file from 8 to 15 files, 0.5 ms from 15 to 63."""
    reads = pd.DataFrame({"files": [63, 15, 8], "median_s": [0.3545, 0.3305, 0.2857]})
    steps = sweeps.neighbour_slopes(reads)
    assert [(a, b) for a, b, _ in steps] == [(8, 15), (15, 63)]
    assert steps[0][2] == pytest.approx(0.0064, abs=1e-4) and steps[1][2] == pytest.approx(0.0005, abs=1e-4)
    note = sweeps.per_file_note(sweeps.per_file_seconds(reads), reads)
    assert "8 to 15 files 6.40 ms a file, 15 to 63 files 0.50 ms a file" in note
    assert "between neighbouring sizes" not in sweeps.per_file_note(0.001)


@pytest.mark.spark
def test_the_sweep_counts_what_each_size_rewrote_and_what_its_query_opened_and_requested(spark, tmp_path):
    """tiny: 2 days of history as 8 files of 6 hours and as 2 files of a day; day 1 corrects every hour of
    the second day, so both rewrite that day's 2,880 rows, from 4 files and from 1."""
    spec = datasets.spec("tiny")
    sweep = sweeps.file_size_sweep(spark, spec, history_files=(8, 2), repeats=2, workdir=tmp_path)
    by = sweep.set_index("hours_per_file")
    assert list(by.index) == [6.0, 24.0]
    assert list(by["bulk_insert_files"]) == list(by["history_files"]) == [8, 2]  # measured, here as planned
    assert (sweep["write_task_min_s"] > 0).all() and (sweep["write_task_min_s"] <= sweep["write_task_max_s"]).all()
    assert by.loc[6.0, "rows_rewritten"] == by.loc[24.0, "rows_rewritten"] == spec.drones * 1440
    assert (by.loc[6.0, "files_rewritten"], by.loc[24.0, "files_rewritten"]) == (4, 1)
    from labformat.spark.compat import default_parallelism

    cores = default_parallelism(spark)
    for _, row in sweep.iterrows():
        assert row.files_opened == row.files  # the drone_id filter skips no file
        assert row.read_requests >= 2 * row.files_opened and row.mb_read > 0
        assert row.planning_entries >= row.files and row.scan_tasks == min(row.files, cores)
        assert len(row.query_runs_s) == len(row.planning_runs_s) == 2
    reads = sweeps.file_read_seconds([lf.Table.open(spark, p) for p in sweep["path"]], rounds=2)
    assert list(reads["files"]) == list(sweep["files"]) and (reads["min_s"] > 0).all()
    said = sweeps.tradeoff_numbers(sweep)
    assert "6 h a file" in said and "MB read" in said and " s each, write stage on" in said
