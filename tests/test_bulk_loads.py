"""Notebook 01's experiments: slices of a file's rows in stored order, and warm write tasks summed up."""

from __future__ import annotations

import pandas as pd
import pytest

import labformat as lf
from labformat.lab import bulk_loads
from labformat.lab.lessons import bulk_insert as rules
from tests.helpers import telemetry


@pytest.mark.spark
@pytest.mark.parametrize("mode, in_order", [("PARTITION_SORT", True), ("GLOBAL_SORT", True)])
def test_key_slices_of_a_sorted_file_are_disjoint_and_climb(spark, tmp_path, mode, in_order):
    table = lf.Table.create(spark, tmp_path / "t", record_key="record_key", precombine_field="updated_at",
                            partition_field=None)
    table.bulk_insert(telemetry(spark, 200), {"bulk_insert_sort_mode": mode, "bulk_insert_parallelism": 2})
    slices = bulk_loads.key_slices(table, slices=4)
    assert list(slices.columns) == ["file_id", "slice", "rows", "min_key", "max_key"]
    assert slices.groupby("file_id")["slice"].apply(list).tolist() == [[0, 1, 2, 3]] * 2
    assert slices["rows"].sum() == 200
    for _, rows in slices.groupby("file_id"):
        assert (rows["max_key"].iloc[:-1].values < rows["min_key"].iloc[1:].values).all() == in_order
    # sorted inside: a key lies in at most one slice of each file
    assert bulk_loads.slices_at_one_key(slices) <= 2


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["NONE", "PARTITION_SORT", "GLOBAL_SORT"])
def test_parallelism_bounds_the_files_and_only_global_sort_shuffles_to_reach_it(spark, tmp_path, mode):
    """NONE and PARTITION_SORT coalesce the input into at most `bulk_insert_parallelism` tasks and never
    split a partition (4 input partitions with parallelism 6: 4 files); GLOBAL_SORT range-partitions into
    exactly that many."""
    files = {}
    for partitions, parallelism in ((4, 6), (6, 3), (6, 6)):
        table = lf.Table.create(spark, tmp_path / f"t{partitions}-{parallelism}", record_key="record_key",
                                precombine_field="updated_at", partition_field=None)
        table.bulk_insert(telemetry(spark, 600, partitions=partitions),
                          {"bulk_insert_sort_mode": mode, "bulk_insert_parallelism": parallelism})
        files[(partitions, parallelism)] = len(table.file_slices())
        assert table.read().count() == 600
    expected = {(4, 6): 6, (6, 3): 3, (6, 6): 6} if mode == "GLOBAL_SORT" else {(4, 6): 4, (6, 3): 3, (6, 6): 6}
    assert files == expected


@pytest.mark.spark
def test_key_slices_of_an_unsorted_file_overlap(spark, tmp_path):
    table = lf.Table.create(spark, tmp_path / "t", record_key="record_key", precombine_field="updated_at",
                            partition_field=None)
    rows = telemetry(spark, 400, partitions=1).orderBy("record_key", ascending=False)  # stored in reverse order
    table.bulk_insert(rows.coalesce(1), {"bulk_insert_sort_mode": "NONE", "bulk_insert_parallelism": 1})
    slices = bulk_loads.key_slices(table, slices=4)
    assert slices["slice"].tolist() == [0, 1, 2, 3]
    assert slices["min_key"].iloc[0] > slices["max_key"].iloc[-1]  # the first slice holds the largest keys
    empty = lf.Table.create(spark, tmp_path / "empty", record_key="record_key", precombine_field="updated_at")
    assert bulk_loads.key_slices(empty).empty


def _tasks(durations):
    return pd.DataFrame({"stage_id": 1, "task_id": range(len(durations)), "index": range(len(durations)),
                         "launch": 0.0, "duration": durations, "lane": [i % 2 for i in range(len(durations))]})


def _write_tasks() -> bulk_loads.WriteTasks:
    runs, tasks = [], {}
    for repeat in range(1, 6):
        for p, durations in ((1, [2.0 + repeat / 10]), (8, [0.35 + repeat / 100] * 8)):
            frame = _tasks(durations)
            tasks[(p, repeat)] = frame
            runs.append({"parallelism": p, "repeat": repeat, "seconds": sum(durations) + 1,
                         "write_stage_tasks": p, "files": p, "cores_busy_here": min(p, 2),
                         "write_stage_s": sum(durations) / min(p, 2), "task_seconds": sum(durations),
                         "median_task_s": float(pd.Series(durations).median()), "cores_busy_projected": p,
                         "projected_write_stage_s": max(durations)})
    return bulk_loads.WriteTasks(pd.DataFrame(runs), tasks, cores=2, project_to=16)


def test_write_tasks_give_counts_waves_the_median_run_and_what_the_charts_show():
    run = _write_tasks()
    counts = run.counts()
    assert counts["waves_here"].tolist() == [1, 4] and counts["waves_on_16"].tolist() == [1, 1]
    assert counts["cores_busy_projected"].tolist() == [1, 8]
    assert run.median_run(8)["duration"].iloc[0] == pytest.approx(0.38)  # repeat 3 of 5
    assert run.task_cost().loc[8, "median_task_s"] == pytest.approx(0.38)
    assert "8 write tasks: each task 0.38 s" in run.describe(8) and "projected onto 16 cores: 1 wave" in run.describe(8)
    assert "1 task: 2.30 s here" in run.describe_spread()
    few, many, each = run.fixed_cost()
    assert (few, many) == pytest.approx((2.3, 8 * 0.38)) and each == pytest.approx((8 * 0.38 - 2.3) / 7)
    assert "Each task beyond the first adds about 0.11 s" in run.describe_spread()
    assert bulk_loads.waves(0, 2) == 0 and bulk_loads.waves(17, 16) == 2
    # the timing rules on these numbers: 8 tasks project sooner, and spend more task-seconds
    by = run.runs.groupby("parallelism")
    assert rules.eight_tasks_sooner_on_16_cores(by.get_group(8)["projected_write_stage_s"].tolist(),
                                                by.get_group(1)["projected_write_stage_s"].tolist())[0]
    assert rules.tasks_have_a_fixed_cost(by.get_group(8)["task_seconds"].tolist(),
                                         by.get_group(1)["task_seconds"].tolist())[0]
