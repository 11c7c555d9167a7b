"""Projection of measured task durations onto N cores (pure), and the stage labels of a real write (Spark)."""

from __future__ import annotations

import doctest

import pandas as pd
import pytest

from labformat.errors import InvalidInputError, LabformatError
from labformat.lab import projection
from labformat.lab.projection import against_measurement, makespan, project, schedule, write_stage_tasks
from labformat.spark.jobs import StagePlan, stage_labels, step_of_group


def frame(stages: dict[int, list[float]], launch_of_stage: dict[int, float] | None = None) -> pd.DataFrame:
    """Tasks per stage with the given durations; task i of a stage has index i, ids run on."""
    rows, task_id = [], 0
    for stage, durations in stages.items():
        for index, duration in enumerate(durations):
            launch = (launch_of_stage or {}).get(stage, float(stage))
            rows.append({"stage_id": stage, "task_id": task_id, "index": index, "launch": launch,
                         "duration": duration, "lane": 0})
            task_id += 1
    return pd.DataFrame(rows)


def assert_lanes_never_overlap(projected: pd.DataFrame):
    for _, lane in projected.sort_values("launch").groupby("lane"):
        ends = (lane["launch"] + lane["duration"]).to_numpy()
        assert (lane["launch"].to_numpy()[1:] >= ends[:-1] - 1e-9).all()


def test_docstring_examples_run():
    assert doctest.testmod(projection).failed == 0


def test_twenty_equal_tasks_on_sixteen_cores_take_two_task_lengths():
    assert makespan([[3.0] * 20], 16) == 6.0
    placed = schedule([3.0] * 20, 16)
    assert [lane for lane, _ in placed] == list(range(16)) + [0, 1, 2, 3]
    assert [start for _, start in placed] == [0.0] * 16 + [3.0] * 4


def test_forty_eight_equal_tasks_on_sixteen_cores_take_three():
    assert makespan([[1.0] * 48], 16) == 3.0
    projected = project(frame({0: [1.0] * 48}), 16)
    assert (projected["launch"] + projected["duration"]).max() == 3.0
    assert projected.groupby("lane").size().tolist() == [3] * 16


def test_one_core_runs_everything_back_to_back():
    assert makespan([[1.0, 2.0], [0.5]], 1) == 3.5


def test_stage_barrier_next_stage_starts_when_the_previous_has_finished():
    # Stage 0: one long task and two short ones; stage 1 must wait for the long one, on free lanes too.
    projected = project(frame({0: [5.0, 1.0, 1.0], 1: [1.0, 1.0]}), 16)
    stage0 = projected[projected["stage_id"] == 0]
    stage1 = projected[projected["stage_id"] == 1]
    assert (stage0["launch"] == 0.0).all()
    assert (stage1["launch"] == 5.0).all()
    assert makespan([[5.0, 1.0, 1.0], [1.0, 1.0]], 16) == 6.0


def test_stages_run_in_the_order_they_ran_not_by_id():
    # Stage 9 ran first here (earlier launch), so it is projected first.
    projected = project(frame({7: [1.0], 9: [2.0]}, launch_of_stage={7: 4.0, 9: 0.5}), 4)
    assert projected.set_index("stage_id")["launch"].to_dict() == {9: 0.0, 7: 2.0}


def test_tasks_are_taken_in_index_order():
    tasks = frame({0: [4.0, 1.0, 1.0, 1.0]}).sample(frac=1, random_state=3)  # row order must not matter
    projected = project(tasks, 2).set_index("index")
    # index 0 -> lane 0 at 0; 1 -> lane 1 at 0; 2 -> lane 1 at 1; 3 -> lane 1 at 2.
    assert projected["lane"].to_dict() == {0: 0, 1: 1, 2: 1, 3: 1}
    assert projected["launch"].to_dict() == {0: 0.0, 1: 0.0, 2: 1.0, 3: 2.0}


def test_projection_keeps_the_measured_durations_and_the_rows():
    tasks = frame({0: [0.3, 0.1, 0.7, 0.2, 0.9], 1: [0.4, 0.4, 0.1]}).assign(end=0.0, stage_label=None)
    projected = project(tasks, 2)
    assert projected.index.equals(tasks.index)
    assert projected["duration"].tolist() == tasks["duration"].tolist()
    assert projected["task_id"].tolist() == tasks["task_id"].tolist()
    assert (projected["end"] == projected["launch"] + projected["duration"]).all()
    assert projected["stage_label"].tolist() == ["stage 0"] * 5 + ["stage 1"] * 3
    assert set(projected["lane"]) == {0, 1}
    assert_lanes_never_overlap(projected)


def test_lanes_never_overlap_on_random_durations():
    import numpy as np

    rng = np.random.default_rng(11)
    tasks = frame({s: list(rng.uniform(0.01, 2.0, size=int(rng.integers(1, 40)))) for s in range(5)})
    for cores in (1, 2, 3, 16):
        projected = project(tasks, cores)
        assert set(projected["lane"]) <= set(range(cores))
        assert_lanes_never_overlap(projected)


def test_falls_back_to_busy_then_driver_durations():
    tasks = pd.DataFrame({"stage_id": [0, 0], "task_id": [0, 1], "index": [0, 1],
                          "busy_s": [1.0, float("nan")], "duration_s": [1.5, 2.0]})
    assert project(tasks, 1)["duration"].tolist() == [1.0, 2.0]
    assert project(tasks.drop(columns="busy_s"), 1)["duration"].tolist() == [1.5, 2.0]


@pytest.mark.parametrize("cores", [0, -2, 1.5, True])
def test_bad_core_counts_are_refused(cores):
    with pytest.raises(ValueError, match="cores must be a whole number of at least 1"):
        schedule([1.0], cores)
    with pytest.raises(LabformatError):
        project(frame({0: [1.0]}), cores)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_bad_durations_are_refused(bad):
    with pytest.raises(InvalidInputError, match="finite and non-negative"):
        makespan([[1.0, bad]], 4)
    with pytest.raises(InvalidInputError, match="finite and non-negative"):
        project(frame({0: [1.0, bad]}), 4)


def test_tasks_without_durations_are_refused():
    with pytest.raises(InvalidInputError, match="duration column"):
        project(pd.DataFrame({"stage_id": [0], "task_id": [0]}), 2)


def test_empty_input_projects_to_nothing():
    assert makespan([], 4) == 0.0 and makespan([[]], 4) == 0.0
    assert project(frame({}).reindex(columns=["stage_id", "task_id", "index", "launch", "duration"]), 4).empty


# ---------------------------------------------------------------- stage labels (pure)

def test_stage_plan_round_trips_and_refuses_separators():
    plan = StagePlan(("route records to file groups", "write base files"), before="move matched keys")
    assert StagePlan.parse(plan.format()) == plan
    assert StagePlan.parse(StagePlan(("write base files",)).format()) == StagePlan(("write base files",))
    assert StagePlan.parse("labformat write") is None and StagePlan.parse(None) is None
    with pytest.raises(ValueError, match="stage labels"):
        StagePlan(("a > b",))
    with pytest.raises(ValueError, match="stage labels"):
        StagePlan(())


def test_stage_labels_align_from_the_result_stage():
    three = StagePlan(("read input", "keep newest per key", "count per partition path")).format()
    write = StagePlan(("route records to file groups", "write base files"), before="move matched keys").format()
    labels = stage_labels("write", [(12, write), (13, write), (10, write), (7, "labformat write"), (20, three)])
    assert labels == {7: "write: stage 7", 10: "write: move matched keys", 12: "write: route records to file groups",
                      13: "write: write base files", 20: "write: count per partition path"}
    assert step_of_group("labformat-latest_file_slices-12") == "latest_file_slices"
    assert step_of_group("my-group") == "my-group"


def test_write_stage_tasks_are_only_the_base_file_writers():
    tasks = frame({1: [1.0, 1.0], 2: [1.0], 3: [1.0] * 3})
    tasks["stage_label"] = tasks["stage_id"].map({1: "write: route records to file groups", 2: "write: find task keys",
                                                  3: "write: write base files"})
    assert write_stage_tasks(tasks)["stage_id"].tolist() == [3, 3, 3]
    assert write_stage_tasks(tasks.drop(columns="stage_label")).empty


# ---------------------------------------------------------------- stage labels of a real write

@pytest.mark.spark
def test_real_upsert_stages_are_named_by_what_they_do(spark, tmp_path):
    from pyspark.sql import functions as F

    import labformat as lf
    from labformat.spark import SparkUI
    from tests.helpers import telemetry

    table = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    bulk = table.bulk_insert(telemetry(spark, 200))
    batch = telemetry(spark, 100, start=150).withColumn("updated_at", F.timestamp_seconds(F.lit(1800000000)))
    upsert = table.upsert(batch, {"index_type": "BLOOM"})
    ui = SparkUI(spark)

    def labels(report, step):
        timeline = ui.task_timeline(report.step(step).group)
        return timeline, list(dict.fromkeys(timeline.sort_values("stage_id")["stage_label"]))

    timeline, names = labels(bulk, "write")
    assert names == ["write: write base files"]
    assert len(write_stage_tasks(timeline)) == len(timeline)
    assert labels(upsert, "deduplicate")[1] == ["deduplicate: read input", "deduplicate: keep newest per key",
                                                "deduplicate: count per partition path"]
    assert labels(upsert, "tag")[1] == ["tag: range pruning", "tag: bloom + exact check"]
    timeline, names = labels(upsert, "write")
    assert names[-2:] == ["write: route records to file groups", "write: write base files"]
    assert set(names[:-2]) <= {"write: find task keys", "write: move matched keys"}
    writers = write_stage_tasks(timeline)
    # One write task per file group written: the files the report lists.
    assert len(writers) == len(upsert.files) and writers["stage_id"].nunique() == 1


def test_against_measurement_compares_the_span_with_the_same_cores_projection():
    # Two lanes really used, with a 0.5 s gap the scheduler left before the third task.
    tasks = pd.DataFrame({"stage_id": [1, 1, 1], "index": [0, 1, 2], "launch": [10.0, 10.0, 11.5],
                          "duration": [1.0, 1.0, 1.0]})
    check = against_measurement(tasks, cores=2)
    row = check.iloc[0]
    assert (row.cores, row.measured_s, row.projected_s) == (2, 2.5, 2.0)
    assert row.error_pct == pytest.approx(-20.0)
    with pytest.raises(InvalidInputError):
        against_measurement(tasks.drop(columns="launch"), cores=2)
