"""Incremental queries (`hoodie.datasource.query.type=incremental`, `Table.changes`): for random histories
on copy-on-write and merge-on-read, every range equals a model of the history and hudi-rs's incremental
read; only the file groups the range wrote are opened; clustering shows no row as changed; cleaned
ranges fail, or fall back to a full scan when asked."""

from __future__ import annotations

import json
import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import labformat as lf
from labformat.model.enums import TableType
from labformat.write.cdc import instant_millis
from tests import crash_writer
from tests.helpers import telemetry

pytestmark = pytest.mark.spark

SCHEMA = "record_key string, p string, updated_at long, value long"
KEYS = [f"k{i:02d}" for i in range(12)]

record = st.tuples(st.sampled_from(KEYS), st.integers(0, 9))
operations = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(record, min_size=1, max_size=6, unique_by=lambda r: r[0])),
    st.tuples(st.just("delete"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("service"), st.sampled_from(["compact", "cluster", "clean"])),
), min_size=3, max_size=6)


def hudi_incremental(path, begin: str, end: str) -> dict:
    import hudi

    options = (hudi.HudiReadOptions().with_query_type(hudi.HudiQueryType.Incremental)
               .with_start_timestamp(begin).with_end_timestamp(end))
    batches = hudi.HudiTableBuilder.from_base_uri(str(path)).build().read(options)
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return {r["record_key"]: (r["value"], r["_hoodie_commit_time"]) for r in rows}


def changes(table, begin: str, end: str) -> dict:
    return {r.record_key: (r.value, r._hoodie_commit_time) for r in table.changes(begin, end).collect()}


@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
@settings(max_examples=2, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=operations)
def test_every_range_holds_the_latest_version_of_what_its_commits_wrote(spark, table_type, ops):
    path = tempfile.mkdtemp(prefix="lf-incr-")
    try:
        table = lf.Table.create(spark, path, partition_field="p", options={"table_type": table_type})
        first = table.bulk_insert(spark.createDataFrame([(k, "ab"[KEYS.index(k) % 2], 0, 0) for k in KEYS[::2]],
                                                        SCHEMA)).instant
        model = {k: (0, first) for k in KEYS[::2]}  # key -> (value, instant that last wrote it)
        history = [(first, dict(model))]
        small = {"max_file_size": "3KB", "small_file_limit": "2KB"}
        for step, op in enumerate(ops, start=1):
            if op[0] == "upsert":
                rows = [(k, "ab"[KEYS.index(k) % 2], step, v) for k, v in op[1]]
                instant = table.upsert(spark.createDataFrame(rows, SCHEMA), small).instant
                model.update({k: (v, instant) for k, v in op[1]})
            elif op[0] == "delete":
                rows = [(k, "ab"[KEYS.index(k) % 2]) for k in op[1]]
                instant = table.delete(spark.createDataFrame(rows, "record_key string, p string")).instant
                for k in op[1]:
                    model.pop(k, None)
            elif op[1] == "compact" and table_type is TableType.MERGE_ON_READ:
                instant = table.compact().instant
            elif op[1] == "cluster":
                instant = table.cluster({"clustering_small_file_limit": "1MB"}).instant
            else:
                table.clean({"cleaner_commits_retained": 20})
                instant = None
            if instant is not None:
                history.append((instant, dict(model)))
        times = ["000"] + [t for t, _ in history]
        for begin in times:
            for end, snapshot in history:
                if end <= begin:
                    continue
                expected = {k: (v, t) for k, (v, t) in snapshot.items() if begin < t <= end}
                assert changes(table, begin, end) == expected, (begin, end)
        # hudi-rs over every range starting at a write (its own reader, its own rules)
        for begin, _ in history[:-1]:
            end, snapshot = history[-1]
            expected = {k: (v, t) for k, (v, t) in snapshot.items() if begin < t <= end}
            assert hudi_incremental(path, begin, end) == expected, (begin, end)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_range_opens_only_the_file_groups_its_commits_wrote(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="p")
    t.bulk_insert(spark.createDataFrame([(f"k{i:02d}", f"p{i % 4}", 0, i) for i in range(40)], SCHEMA),
                  {"bulk_insert_parallelism": 1})
    before = t.timeline()[-1].time
    t.upsert(spark.createDataFrame([("k01", "p1", 1, 100), ("k05", "p1", 1, 500)], SCHEMA))
    plan = t.incremental_plan(before)
    assert plan.files_in_snapshot == 4 and plan.files_read == 1 and plan.fallback is None
    assert sorted((r.record_key, r.value) for r in plan.to_dataframe().collect()) == [("k01", 100), ("k05", 500)]


def test_clustering_shows_no_row_as_changed(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t")
    for n in range(3):
        t.upsert(spark.createDataFrame([(f"k{n}", "", n, n)], SCHEMA), {"small_file_limit": 0})
    before = t.timeline()[-1].time
    assert t.cluster({"clustering_small_file_limit": "1MB"}).instant is not None
    plan = t.incremental_plan(before)
    assert len(plan.commits) == 1 and plan.files_read == 1
    assert t.changes(before).count() == 0


def test_a_cleaned_range_fails_naming_the_earliest_readable_instant_or_falls_back(spark, tmp_path):
    """W1 bulk insert of k1, k2; W2-W4 update k1; a clean retaining 1 keeps W4 and W3, the write just
    before it (Hudi keeps its files): a range holding W2 fails or falls back, one from W2 on reads."""
    t = lf.Table.create(spark, tmp_path / "t")
    first = t.bulk_insert(spark.createDataFrame([("k1", "", 0, 0), ("k2", "", 0, 0)], SCHEMA)).instant
    for n in range(1, 4):
        t.upsert(spark.createDataFrame([("k1", "", n, n)], SCHEMA))
    t.clean({"cleaner_commits_retained": 1})
    readable, _ = t.context().timeline.readable_from()
    _, w2, w3, _ = [i.time for i in t.active_timeline.completed_writes()]
    assert readable == w3
    with pytest.raises(lf.CleanedInstantError, match=readable):
        t.changes(first)
    assert [(r.record_key, r.value) for r in t.changes(w2).collect()] == [("k1", 3)]  # (W2, W4]: W3 and W4
    fallback = {"incr_fallback_full_scan": True}
    plan = t.incremental_plan(first, options=fallback)
    assert plan.fallback and "full table scan" in plan.fallback
    assert sorted((r.record_key, r.value) for r in t.changes(first, options=fallback).collect()) == [("k1", 3)]
    assert [r.record_key for r in t.changes(readable).collect()] == ["k1"]


def test_query_refuses_an_incremental_query_type(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t")
    t.bulk_insert(spark.createDataFrame([("k1", "", 0, 0)], SCHEMA))
    with pytest.raises(lf.ConfigError, match="changes"):
        t.query("value > 0", options={"query_type": "INCREMENTAL", "begin_instant": "000"})
    with pytest.raises(lf.ConfigError, match="begin"):
        t.read(options={"query_type": "INCREMENTAL"})


def cdc_rows(table, begin: str = "000", end: str | None = None) -> list[tuple]:
    rows = table.changes(begin, end, options={"incremental_format": "cdc"}).collect()
    value = lambda image: None if image is None else json.loads(image)["value"]  # noqa: E731
    return sorted((r.ts_ms, r.op, r._hoodie_record_key, value(r.before), value(r.after)) for r in rows)


@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
@settings(max_examples=2, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=operations)
def test_change_records_reproduce_every_insert_update_and_delete(spark, table_type, ops):
    path = tempfile.mkdtemp(prefix="lf-cdc-")
    try:
        table = lf.Table.create(spark, path, partition_field="p",
                                options={"table_type": table_type, "cdc_enabled": True})
        first = table.bulk_insert(spark.createDataFrame([(k, "ab"[KEYS.index(k) % 2], 0, 0) for k in KEYS[::2]],
                                                        SCHEMA)).instant
        model = {k: 0 for k in KEYS[::2]}
        expected = [(instant_millis(first), "i", k, None, 0) for k in KEYS[::2]]
        for step, op in enumerate(ops, start=1):
            if op[0] == "upsert":
                rows = [(k, "ab"[KEYS.index(k) % 2], step, v) for k, v in op[1]]
                ms = instant_millis(table.upsert(spark.createDataFrame(rows, SCHEMA)).instant)
                expected += [(ms, "u" if k in model else "i", k, model.get(k), v) for k, v in op[1]]
                model.update(dict(op[1]))
            elif op[0] == "delete":
                rows = [(k, "ab"[KEYS.index(k) % 2]) for k in op[1]]
                report = table.delete(spark.createDataFrame(rows, "record_key string, p string"))
                gone = [k for k in op[1] if k in model]
                if gone:
                    expected += [(instant_millis(report.instant), "d", k, model.pop(k), None) for k in gone]
            elif op[1] == "compact" and table_type is TableType.MERGE_ON_READ:
                table.compact()
            elif op[1] == "cluster":
                table.cluster({"clustering_small_file_limit": "1MB"})
        assert cdc_rows(table) == sorted(expected)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_cdc_query_needs_a_table_that_records_changes(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t")
    t.bulk_insert(spark.createDataFrame([("k1", "", 0, 0)], SCHEMA))
    with pytest.raises(lf.ConfigError, match="hoodie.table.cdc.enabled"):
        t.changes("000", options={"incremental_format": "cdc"})
    with pytest.raises(lf.ConfigError, match="data_before_after"):
        lf.Table.create(spark, tmp_path / "u", options={"cdc_enabled": True,
                                                         "cdc_supplemental_logging_mode": "op_key_only"})


@pytest.mark.slow
def test_a_writer_killed_before_publishing_leaves_no_change_records(spark, tmp_path):
    path = tmp_path / "t"
    t = lf.Table.create(spark, path, partition_field="day", options={"cdc_enabled": True})
    first = t.bulk_insert(telemetry(spark, 40)).instant
    crash_writer.crash(path, "before_publish", "upsert")
    assert len(list((path / ".hoodie/cdc").glob("*.parquet"))) >= 2  # the bulk insert's and the dead upsert's
    reopened = lf.Table.open(spark, path)
    report = reopened.upsert(telemetry(spark, 10))  # rolls the dead writer back first
    assert report.rolled_back
    leaves = {p.name.split(".", 1)[0] for p in (path / ".hoodie/cdc").glob("*.parquet")}
    assert leaves == {first, report.instant}
    assert {r.op for r in reopened.changes(first, options={"incremental_format": "cdc"}).collect()} == {"u"}


@pytest.mark.slow
def test_a_retried_change_record_task_leaves_each_change_once(spark, tmp_path):
    """Issue 48, case 4: every task writing the upsert's change records fails once just after
    publishing its file, and Spark retries it (`local[2,3]`, in a process of its own): each change is
    read once, the commit lists the files of the attempts that succeeded, and no other file of the
    instant is left under `.hoodie/cdc/`."""
    from tests import retried_tasks

    path = tmp_path / "t"
    t = lf.Table.create(spark, path, partition_field="day", options={"cdc_enabled": True})
    first = t.bulk_insert(telemetry(spark, 40)).instant
    retried_tasks.upsert_with_retried_tasks(path, ".hoodie/cdc/")
    t = lf.Table.open(spark, path)
    upsert = t.timeline()[-1].time
    records = t.changes(first, options={"incremental_format": "cdc"}).collect()
    expected = sorted(r.record_key for r in telemetry(spark, 10).collect())
    assert sorted(r._hoodie_record_key for r in records) == expected  # each change once
    assert {r.op for r in records} == {"u"}
    from labformat.model.commit import CDC_FILES_KEY

    listed = json.loads(t.commit_metadata(upsert).extra_metadata[CDC_FILES_KEY])
    on_disk = sorted(f".hoodie/cdc/{p.name}" for p in (path / ".hoodie/cdc").iterdir() if p.name.startswith(upsert))
    assert listed and on_disk == sorted(listed)
    assert all(name.rsplit(".", 2)[-2].endswith("-1") for name in listed)  # the retried attempts' files


# ---- holes: a write that started before the range's end completes after it (issue 48, case 3) --------------

OCC = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}


def test_a_write_in_flight_before_the_end_is_never_skipped_by_a_checkpoint(spark, tmp_path):
    """Writer A starts, B starts later and commits, a consumer checkpoints at the range's end, then A
    commits: FAIL (the default) refuses the read while A is in flight; BLOCK ends the range before A,
    so `changes(end)` returns A's rows once it completed; USE_TRANSITION_TIME ranges by completion
    time, so the next range after B holds A."""
    import threading

    from labformat import hooks

    t = lf.Table.create(spark, tmp_path / "t", partition_field="p")
    first = t.bulk_insert(spark.createDataFrame([("k00", "a", 0, 0)], SCHEMA), OCC).instant
    gate, a = hooks.Gate("after_start"), {}

    def writer_a():
        with hooks.holding(gate):
            a["instant"] = t.bulk_insert(spark.createDataFrame([("k01", "a", 1, 1)], SCHEMA), OCC).instant

    thread = threading.Thread(target=writer_a, daemon=True)
    thread.start()
    assert gate.reached.wait(120)
    try:
        b = t.bulk_insert(spark.createDataFrame([("k02", "b", 2, 2)], SCHEMA), OCC).instant
        pending = t.active_timeline.pending()[0].time
        assert first < pending < b
        with pytest.raises(lf.LabformatError, match=f"instant {pending} is still in flight") as failed:
            t.changes(first)
        assert isinstance(failed.value, lf.TimelineHoleError)
        assert (failed.value.pending, failed.value.end) == (pending, b)
        with pytest.raises(lf.TimelineHoleError):
            t.incremental_plan(first)
        assert t.incremental_plan("000", first).end == first  # a range ending before the hole is read
        blocked = t.incremental_plan(first, options={"holes_policy": "BLOCK"})
        assert (blocked.end, blocked.commits) == (first, ())
        # By completion time, `begin` and `end` are completion times too: a consumer starting from scratch.
        by_completion = t.incremental_plan("000", options={"holes_policy": "USE_TRANSITION_TIME"})
        assert by_completion.commits == (first, b) and by_completion.end > b
        assert sorted(r.record_key for r in t.changes("000", options={"holes_policy": "USE_TRANSITION_TIME"})
                      .collect()) == ["k00", "k02"]
    finally:
        gate.go.set()
        thread.join(120)
    assert a["instant"] == pending
    assert sorted(r.record_key for r in t.changes(blocked.end, options={"holes_policy": "BLOCK"}).collect()) == \
        ["k01", "k02"]
    after = t.incremental_plan(by_completion.end, options={"holes_policy": "USE_TRANSITION_TIME"})
    assert after.commits == (pending,) and after.end > by_completion.end
    assert [r.record_key for r in t.changes(by_completion.end, options={"holes_policy": "USE_TRANSITION_TIME"})
            .collect()] == ["k01"]
    assert changes(t, first, b) == {"k01": (1, pending), "k02": (2, b)}  # no hole left: the default reads on


def test_clustering_in_flight_is_no_hole(spark, tmp_path):
    """A pending clustering (a replacecommit holding a clustering plan) moves records, which keep their
    commit times: no read is refused for it; a pending commit at the same place is a hole."""
    from labformat.model.instant import Action, next_instant_time, parse_instant_time
    from labformat.timeline import Timeline

    t = lf.Table.create(spark, tmp_path / "t")
    first = t.bulk_insert(spark.createDataFrame([("k00", "", 0, 0)], SCHEMA)).instant
    last = t.bulk_insert(spark.createDataFrame([("k01", "", 1, 1)], SCHEMA)).instant
    between = next_instant_time(first, now=parse_instant_time(first))  # first + 1 ms
    assert between < last
    timeline = Timeline(t.storage)
    timeline.request(Action.REPLACE_COMMIT, {"clusteringPlan": {"inputGroups": []}}, at=between)
    assert t.incremental_plan(first).end == last
    timeline.request(Action.COMMIT, at=between)
    with pytest.raises(lf.LabformatError, match=between):
        t.incremental_plan(first)


def test_block_never_moves_the_checkpoint_back_nor_loses_it(spark, tmp_path):
    """BLOCK with nothing completed between the checkpoint and the hole reads nothing and keeps the
    checkpoint: `end` is `begin`, never None (which no next read takes) nor older than `begin`."""
    from labformat.model.instant import Action, next_instant_time, parse_instant_time
    from labformat.timeline import Timeline

    block = {"holes_policy": "BLOCK"}
    t = lf.Table.create(spark, tmp_path / "t")
    first = t.bulk_insert(spark.createDataFrame([("k00", "", 0, 0)], SCHEMA)).instant
    second = t.bulk_insert(spark.createDataFrame([("k01", "", 1, 1)], SCHEMA)).instant
    Timeline(t.storage).request(Action.COMMIT, at="20200101000000000")  # older than every write
    plan = t.incremental_plan("000", options=block)
    assert (plan.end, plan.commits) == ("000", ())
    assert t.changes(plan.end, options=block).count() == 0  # the checkpoint is one a next read takes

    t2 = lf.Table.create(spark, tmp_path / "t2")
    first = t2.bulk_insert(spark.createDataFrame([("k00", "", 0, 0)], SCHEMA)).instant
    second = t2.bulk_insert(spark.createDataFrame([("k01", "", 1, 1)], SCHEMA)).instant
    Timeline(t2.storage).request(Action.COMMIT, at=next_instant_time(first, now=parse_instant_time(first)))
    t2.bulk_insert(spark.createDataFrame([("k02", "", 2, 2)], SCHEMA))
    assert t2.incremental_plan(second, options=block).end >= second  # never `first`: never backwards
