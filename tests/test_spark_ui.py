"""Spark UI REST client: real task timings of real jobs on local[2]."""

from __future__ import annotations

import re
import socket
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from labformat.errors import LabformatError
from labformat.spark.jobs import StepRecorder
from labformat.spark.ui import SparkUI, assign_lanes, last_group, parse_time

# Busy intervals of tasks handed over on one core may overlap by ms rounding.
OVERLAP_TOLERANCE_S = 0.010


def _run_in_group(spark, group: str, partitions: int, rows: int):
    """Run one single-stage job (noop sink: no shuffle, one task per partition) under `group`."""
    sc = spark.sparkContext
    sc.setJobGroup(group, f"test {group}", interruptOnCancel=False)
    try:
        before = datetime.now(timezone.utc)
        spark.range(0, rows, numPartitions=partitions).selectExpr("id * 7 % 13 as x").write.format("noop").mode(
            "overwrite"
        ).save()
        after = datetime.now(timezone.utc)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
    return before, after


@pytest.fixture(scope="module")
def ui(spark):
    return SparkUI(spark)


@pytest.fixture(scope="module")
def three(spark):
    return ("lf-ui-three",) + _run_in_group(spark, "lf-ui-three", 3, 3_000_000)


@pytest.fixture(scope="module")
def six(spark):
    # More partitions than cores, so tasks queue and the concurrency bound is really exercised.
    return ("lf-ui-six",) + _run_in_group(spark, "lf-ui-six", 6, 6_000_000)


def test_parse_time_reads_gmt_strings():
    assert parse_time("2024-01-15T09:30:00.123GMT") == datetime(2024, 1, 15, 9, 30, 0, 123000, tzinfo=timezone.utc)
    assert parse_time(None) is None


def test_total_cores_is_local_n(ui):
    assert ui.total_cores() == 2


def test_three_partitions_give_three_sane_tasks(ui, three):
    group, before, after = three
    stages = [s for s in ui.stages(group) if s.status != "SKIPPED"]
    assert [(s.num_tasks, s.status) for s in stages] == [(3, "COMPLETE")]
    stage = stages[0]
    assert stage.submission_time is not None and stage.completion_time is not None
    assert before - timedelta(seconds=1) <= stage.submission_time <= stage.completion_time <= after + timedelta(seconds=1)

    tasks = ui.tasks(stage.stage_id, stage.attempt)
    assert list(tasks.columns) == [
        "stage_id", "task_id", "index", "executor_id", "host", "launch_time", "duration_s", "status", "busy_s"
    ]
    assert len(tasks) == 3
    assert sorted(tasks["index"]) == [0, 1, 2]
    assert tasks["task_id"].is_unique
    assert set(tasks["stage_id"]) == {stage.stage_id}
    assert set(tasks["status"]) == {"SUCCESS"}
    assert set(tasks["executor_id"]) == {"driver"}  # local mode
    assert str(tasks["launch_time"].dt.tz) == "UTC"
    # Clocks are the same machine's: every task ran inside the wall-clock window of the action
    # (1 s slack for the ms rounding of the API and the time before/after Python sees).
    slack = timedelta(seconds=1)
    for launch, duration in zip(tasks["launch_time"], tasks["duration_s"]):
        assert before - slack <= launch <= after + slack
        assert 0 <= duration <= (after - before).total_seconds() + 1
        assert launch + timedelta(seconds=duration) <= after + slack
    assert tasks["duration_s"].sum() > 0
    # The executor's work is part of the driver-side duration, and not nothing.
    assert (tasks["busy_s"] > 0).all() and (tasks["busy_s"] <= tasks["duration_s"]).all()


def test_timeline_never_exceeds_the_cores(ui, six):
    group = six[0]
    timeline = ui.task_timeline(group)
    cores = ui.total_cores()
    assert len(timeline) == 6
    assert set(timeline["stage_name"]) and all(isinstance(n, str) and n for n in timeline["stage_name"])
    assert timeline["launch"].min() == 0
    assert (timeline["end"] >= timeline["launch"]).all()
    assert ((timeline["end"] - timeline["launch"] - timeline["duration_s"]).abs() < 1e-9).all()
    assert ((timeline["busy_end"] - timeline["launch"] - timeline["busy_s"]).abs() < 1e-9).all()
    assert (timeline["busy_end"] <= timeline["end"]).all()
    # At every launch instant, count the tasks the executor was busy with then (an overlap under the
    # tolerance is ms rounding). `end` itself is the driver's, later by up to tens of ms under load.
    for t in timeline["launch"]:
        running = ((timeline["launch"] <= t) & (timeline["busy_end"] - OVERLAP_TOLERANCE_S > t)).sum()
        assert running <= cores, f"{running} tasks at t={t:.3f}s on {cores} cores"
    # 6 tasks on 2 cores: something must have waited, i.e. at most 2 ran at once but not all at once.
    assert timeline["launch"].max() > 0
    # Lanes: exactly the cores, and one lane's tasks follow each other.
    assert set(timeline["lane"]) <= set(range(cores))
    for _, lane in timeline.sort_values("launch").groupby("lane"):
        assert (lane["launch"].iloc[1:].to_numpy() >= lane["busy_end"].iloc[:-1].to_numpy() - OVERLAP_TOLERANCE_S).all()


def test_job_group_filter_excludes_other_jobs(ui, three, six):
    a = {(s.stage_id, s.attempt) for s in ui.stages(three[0])}
    b = {(s.stage_id, s.attempt) for s in ui.stages(six[0])}
    everything = {(s.stage_id, s.attempt) for s in ui.stages()}
    assert a and b
    assert not a & b
    assert a <= everything and b <= everything
    timeline_a = ui.task_timeline(three[0])
    assert set(timeline_a["stage_id"]) and set(timeline_a["stage_id"]) <= {sid for sid, _ in a}
    assert not set(timeline_a["task_id"]) & set(ui.task_timeline(six[0])["task_id"])


def test_unknown_group_raises(spark):
    with pytest.raises(LabformatError, match="no job in job group 'lf-ui-never'"):
        SparkUI(spark, poll_seconds=0.2).stages("lf-ui-never")


def test_step_recorder_groups_are_found(spark, ui):
    recorder = StepRecorder(spark)
    with recorder.step("probe"):
        spark.range(1000, numPartitions=3).count()
    first = last_group(recorder, "probe")
    with recorder.step("probe"):
        spark.range(1000, numPartitions=5).count()
    second = last_group(recorder, "probe")
    assert re.fullmatch(r"labformat-probe-\d+", first) and re.fullmatch(r"labformat-probe-\d+", second)
    assert second != first
    timeline = ui.task_timeline(second)
    # The UI and the status tracker count the same completed tasks (5 scans + 1 final count).
    assert len(timeline) == recorder.steps[-1].tasks == 6
    assert len(ui.task_timeline(first)) == recorder.steps[0].tasks == 4


def test_disabled_ui_names_the_setting():
    fake = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=None, applicationId="local-0"))
    with pytest.raises(LabformatError, match=r"spark\.ui\.enabled"):
        SparkUI(fake)


def test_unreachable_ui_names_the_setting():
    with socket.socket() as sock:  # a port nobody listens on once this socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    fake = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=f"http://127.0.0.1:{port}", applicationId="local-0"))
    with pytest.raises(LabformatError, match=r"unreachable.*spark\.ui\.enabled"):
        SparkUI(fake)


def test_unroutable_host_falls_back_to_loopback(spark):
    port = urlsplit(spark.sparkContext.uiWebUrl).port
    sc = SimpleNamespace(uiWebUrl=f"http://no-such-host.invalid:{port}", applicationId=spark.sparkContext.applicationId)
    ui = SparkUI(SimpleNamespace(sparkContext=sc))
    assert ui.base == f"http://127.0.0.1:{port}"
    assert ui.total_cores() == 2


def test_assign_lanes_absorbs_handover_overlap():
    # Two cores; the third task starts 5 ms before the first ends (a hand-over, not a third core).
    assert assign_lanes([0.0, 0.0, 0.995], [1.0, 2.0, 1.5], 2) == [0, 1, 0]


def test_assign_lanes_answers_in_input_order_and_refuses_a_third_concurrent_task():
    # The same intervals as above, listed out of launch order: each keeps its own lane.
    assert assign_lanes([0.995, 0.0, 0.0], [1.5, 1.0, 2.0], 2) == [0, 0, 1]
    with pytest.raises(ValueError, match="more tasks ran at once"):
        assign_lanes([0.0, 0.0, 0.5], [1.0, 1.0, 1.0], 2)


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix domain sockets on this platform")
def test_python_workers_talk_over_a_unix_socket_and_run_arrow_tasks(spark):
    """The session's default: executors reach their Python workers over a Unix domain socket (over
    TCP each small Arrow task waited ~40 ms for its first batch); Arrow tasks still run through it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    assert spark.sparkContext.getConf().get("spark.python.unix.domain.socket.enabled") == "true"

    def doubled(batches):
        for batch in batches:
            yield pa.RecordBatch.from_arrays([pc.multiply(batch.column(0), 2)], names=["id"])

    rows = spark.range(10).repartition(3).mapInArrow(doubled, "id long").collect()
    assert sorted(r.id for r in rows) == list(range(0, 20, 2))
