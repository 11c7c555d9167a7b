"""Concurrent writers (issue 16, case 1): nothing that reported success is lost, a live writer is never rolled back.

The first part drives `WriteTransaction`s on a table opened without Spark, with stand-in base
files: the lock, heartbeat and conflict rules on their own. The second part runs real writers in
separate processes (each its own `local[1]` Spark session), ordered by pause points
(`LABFORMAT_PAUSE_AT`, which the writer arms: `tests.helpers.arm_writer_points`, `labformat/hooks.py`) rather than by sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import types as T

import labformat as lf
from labformat.spark.compat import is_connect
from labformat.model.enums import Operation, StatsSource
from labformat import config as C
from labformat.errors import ConcurrentWriteError, WriteConflictError
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.heartbeat import heartbeat_path
from labformat.metadata import MetadataReader
from labformat.model.instant import Action
from labformat.write.transaction import WriteTransaction
from tests import writer_pool
from tests.helpers import tree

ROOT = Path(__file__).resolve().parents[1]
OCC = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}
SCHEMA = T.StructType([T.StructField("x", T.LongType())])


def options(**given) -> C.Config:
    return C.write_options(given)


def stand_in_file(path: Path, tx: WriteTransaction, partition: str, file_id: str, x: int = 1) -> BaseFileStat:
    """A base file's bytes (not parquet: nothing here reads them) and the stat its write task would return."""
    rel = f"{partition}/{file_id}_0-1-0_{tx.instant.time}.parquet"
    (path / partition).mkdir(parents=True, exist_ok=True)
    (path / rel).write_bytes(b"PAR1")
    return BaseFileStat(partition_path=partition, file_id=file_id, path=rel, prev_commit="null", num_writes=1,
                        num_inserts=1, num_update_writes=0, num_deletes=0, file_size=4, min_key="k", max_key="k",
                        write_ms=0, bloom_ms=0, task_partition=0, task_attempt=0, prev_min_key=None,
                        prev_max_key=None, prev_size=0, incoming_bytes=4,
                        column_stats=json.dumps({"x": [x, x, 0, 1, 0]}), bloom=None, bloom_bytes=0)


def committed(table, **given) -> str:
    """One write of a new file group, start to commit; its instant time."""
    with WriteTransaction(table.context(), Operation.UPSERT, options=options(**given)) as tx:
        tx.start()
        return tx.commit([stand_in_file(Path(table.path), tx, "p", f"g{time.time_ns()}-0")], SCHEMA).time


@pytest.fixture
def bare(tmp_path):
    """A table with one commit, opened without Spark: the timeline side of concurrent writers."""
    table = lf.Table.create(None, tmp_path / "t")
    with WriteTransaction(table.context(), Operation.BULK_INSERT) as tx:
        tx.start()
        tx.commit([stand_in_file(tmp_path / "t", tx, "p", "shared-0")], SCHEMA)
    return table, tmp_path / "t"


# ---- options ----------------------------------------------------------------------------------


def test_concurrency_options_take_hudis_keys_and_refuse_bad_values():
    cfg = options(**{"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
                     "hoodie.write.lock.wait_time_ms": "1500", "hoodie.write.lock.filesystem.expire": "0.25",
                     "hoodie.client.heartbeat.interval_in_ms": 500, "hoodie.client.heartbeat.tolerable.misses": 0})
    assert (cfg.concurrency_mode, cfg.lock_wait_time_ms, cfg.lock_expire_minutes, cfg.heartbeat_interval_ms,
            cfg.heartbeat_tolerable_misses) == ("OPTIMISTIC_CONCURRENCY_CONTROL", 1500, 0.25, 500, 0)
    defaults = options()
    assert (defaults.concurrency_mode, defaults.lock_wait_time_ms, defaults.lock_expire_minutes,
            defaults.heartbeat_interval_ms, defaults.heartbeat_tolerable_misses) == ("SINGLE_WRITER", 60_000, 0.5, 3000, 2)
    for key, bad in [("hoodie.write.concurrency.mode", "MULTI_WRITER"), ("hoodie.write.lock.wait_time_ms", -1),
                     ("hoodie.write.lock.wait_time_ms", "soon"), ("hoodie.write.lock.filesystem.expire", -0.5),
                     ("hoodie.write.lock.filesystem.expire", "nan"), ("hoodie.client.heartbeat.interval_in_ms", 0),
                     ("hoodie.client.heartbeat.tolerable.misses", -1), ("heartbeat_tolerable_misses", 1.5)]:
        with pytest.raises(lf.ConfigError, match=key.replace(".", r"\.")):
            options(**{key: bad})


# ---- live and dead writers --------------------------------------------------------------------


def test_single_writer_mode_refuses_while_a_live_writer_is_in_flight(bare):
    """The first writer stays in flight (its heartbeat beating); the second is refused with the
    instant and the heartbeat's age, the table exactly as it was; the first then commits."""
    table, path = bare
    first = WriteTransaction(table.context(), Operation.UPSERT, options=options())
    first.start()
    before = tree(path)
    with pytest.raises(ConcurrentWriteError, match=(
            rf"instant {first.instant.time} of another writer is in flight \(heartbeat \d+\.\d s ago.*\); "
            r"single-writer mode.*OPTIMISTIC_CONCURRENCY_CONTROL or retry")):
        with WriteTransaction(table.context(), Operation.UPSERT) as second:
            second.start()
    assert tree(path) == before
    first.commit([stand_in_file(path, first, "p", "new-0")], SCHEMA)
    assert [i.action for i in table.timeline()] == [Action.COMMIT, Action.COMMIT]
    assert not (path / heartbeat_path(first.instant.time)).exists()


def test_occ_mode_starts_beside_a_live_writer_and_never_rolls_it_back(bare):
    table, path = bare
    first = WriteTransaction(table.context(), Operation.UPSERT, options=options(**OCC))
    first.start()
    with WriteTransaction(table.context(), Operation.UPSERT, options=options(**OCC)) as second:
        second.start()
        assert second.rolled_back == () and second.instant.time > first.instant.time
        second.commit([stand_in_file(path, second, "p", "b-0")], SCHEMA)
    first.commit([stand_in_file(path, first, "p", "a-0")], SCHEMA)  # completes after a later instant
    assert [i.action for i in table.timeline()] == [Action.COMMIT] * 3
    assert {s.file_id for s in table.file_slices()} == {"shared-0", "a-0", "b-0"}


def test_a_dead_writers_instant_is_rolled_back_once_its_heartbeat_expires_and_not_before(bare):
    table, path = bare
    dying = WriteTransaction(table.context(), Operation.UPSERT, options=options(heartbeat_interval_ms=200,
                                                                        heartbeat_tolerable_misses=1))
    dead = dying.start()
    stand_in_file(path, dying, "p", "dead-0")
    dying._heartbeat._stop.set()  # killed: no more beats, the heartbeat file stays behind
    dying._heartbeat._thread.join()
    with WriteTransaction(table.context(), Operation.UPSERT, options=options(**OCC)) as early:
        early.start()  # within the dead writer's tolerance (0.4 s): it still counts as live
        assert early.rolled_back == ()
        early.abandon()
    assert dead in table.active_timeline.pending()
    time.sleep(0.5)
    with WriteTransaction(table.context(), Operation.UPSERT) as late:
        late.start()
        assert late.rolled_back == (dead.time,)
        late.abandon()
    assert table.active_timeline.pending() == [] and not list(path.glob(f"p/*{dead.time}*"))
    assert not (path / heartbeat_path(dead.time)).exists()


def test_a_writer_whose_instant_was_rolled_back_while_it_stalled_commits_nothing(bare):
    table, path = bare
    before_files = {p.name for p in (path / "p").iterdir()}
    stalled = WriteTransaction(table.context(), Operation.UPSERT, options=options(heartbeat_interval_ms=50,
                                                                          heartbeat_tolerable_misses=1))
    stalled.start()
    stalled._heartbeat._stop.set()  # the driver stalls: no beats for longer than the tolerance
    stalled._heartbeat._thread.join()
    time.sleep(0.2)
    with WriteTransaction(table.context(), Operation.UPSERT) as other:
        other.start()
        assert other.rolled_back == (stalled.instant.time,)
        other.abandon()
    late_file = stand_in_file(path, stalled, "p", "late-0")  # written after the rollback
    with pytest.raises(ConcurrentWriteError, match=rf"instant {stalled.instant.time} of this write was rolled back"):
        with stalled:
            stalled.commit([late_file], SCHEMA)
    assert {p.name for p in (path / "p").iterdir()} == before_files
    assert [i.action for i in table.timeline()] == [Action.COMMIT, Action.ROLLBACK]


def test_a_rolled_back_requested_instant_is_never_marked_inflight(bare):
    """Issue 48 case 1, the timeline's side: once a rollback removed an instant's requested file,
    `to_inflight` refuses to create an inflight file for it (a plain write used to bring the instant
    back as pending, and its writer's commit then passed the pending check)."""
    table, path = bare
    timeline = table.active_timeline
    requested = timeline.request(Action.COMMIT, {})
    (path / ".hoodie" / requested.file_name).unlink()  # what a rollback by another writer does
    with pytest.raises(ConcurrentWriteError, match=rf"instant {requested.time} of this write was rolled back"):
        timeline.to_inflight(requested)
    assert not list((path / ".hoodie").glob(f"{requested.time}*"))


def test_a_commit_is_fenced_by_a_pending_rollback_that_names_its_instant(bare):
    """A rollback of this writer's instant died after deleting its base files, before its timeline
    files: the instant still looks pending and its heartbeat is still ours, but the commit is refused
    (committing would publish files that are gone) and the instant is rolled back."""
    table, path = bare
    tx = WriteTransaction(table.context(), Operation.UPSERT, options=options())
    tx.start()
    written = stand_in_file(path, tx, "p", "gone-0")
    rollback = table.active_timeline.request(Action.ROLLBACK, {"instant": tx.instant.time, "action": "commit"})
    (path / written.path).unlink()
    with pytest.raises(ConcurrentWriteError, match=rf"instant {tx.instant.time} of this write was rolled back"):
        with tx:
            tx.commit([written], SCHEMA)
    timeline = table.active_timeline
    assert [i for i in timeline.pending() if i.action is not Action.ROLLBACK] == []
    assert [i.time for i in timeline.completed_writes()] == [table.timeline()[0].time]
    assert rollback in timeline.pending()  # finished by the next writer's start, as any dead rollback's plan


def test_a_commit_is_fenced_by_its_heartbeat_being_deleted(bare):
    """The heartbeat file of this writer's instant was deleted (a writer took it for dead) but its
    beating thread has not run since: the commit reads the file itself and refuses."""
    table, path = bare
    tx = WriteTransaction(table.context(), Operation.UPSERT, options=options())
    tx.start()
    written = stand_in_file(path, tx, "p", "late-0")
    (path / heartbeat_path(tx.instant.time)).unlink()
    with pytest.raises(ConcurrentWriteError, match=rf"heartbeat of instant {tx.instant.time} is gone"):
        with tx:
            tx.commit([written], SCHEMA)
    assert [i.action for i in table.timeline()] == [Action.COMMIT, Action.ROLLBACK]
    assert not (path / written.path).exists()


def test_the_next_rollback_deletes_files_a_rolled_back_writer_wrote_after_its_rollback(bare):
    """Issue 48 case 17, the rollback's side: a writer rolled back while it stalled, resumed, writes a
    base file and dies before its commit. Its instant is no longer pending, so no rollback of it looks
    for the file; the next rollback of any instant finds it by the instant its predecessor named."""
    table, path = bare
    fast = options(heartbeat_interval_ms=50, heartbeat_tolerable_misses=1)
    stalled = WriteTransaction(table.context(), Operation.UPSERT, options=fast)
    stalled.start()
    stalled._heartbeat._stop.set()  # frozen: no beats
    stalled._heartbeat._thread.join()
    time.sleep(0.2)
    with WriteTransaction(table.context(), Operation.UPSERT) as other:
        other.start()
        assert other.rolled_back == (stalled.instant.time,)
        other.abandon()
    late = stand_in_file(path, stalled, "p", "late-0")  # resumed, then killed before its commit
    assert table.active_timeline.leftovers_of_rollbacks() == {stalled.instant.time}
    dying = WriteTransaction(table.context(), Operation.UPSERT, options=fast)
    dying.start()
    dying._heartbeat._stop.set()
    dying._heartbeat._thread.join()
    time.sleep(0.2)
    with WriteTransaction(table.context(), Operation.UPSERT) as next_writer:
        next_writer.start()
        assert next_writer.rolled_back == (dying.instant.time,)
        next_writer.abandon()
    assert not (path / late.path).exists()
    assert table.active_timeline.leftovers_of_rollbacks() == {stalled.instant.time, dying.instant.time}
    assert [s.file_id for s in table.file_slices()] == ["shared-0"]


def test_instant_times_stay_unique_across_writers_starting_at_once(bare):
    table, _ = bare
    times, errors = [], []

    def writer():
        try:
            with WriteTransaction(table.context(), Operation.UPSERT, options=options(**OCC)) as tx:
                times.append(tx.start().time)
                tx.abandon()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(times)) == 6


_START_AND_COMMIT = """
import sys, time
from pathlib import Path
import labformat as lf
from tests.test_concurrency import OCC, SCHEMA, Operation, WriteTransaction, options, stand_in_file
table = lf.Table.open(None, sys.argv[1])
for n in range(4):
    with WriteTransaction(table.context(), Operation.BULK_INSERT, options=options(**OCC)) as tx:
        tx.start()
        tx.commit([stand_in_file(Path(sys.argv[1]), tx, "p", f"{sys.argv[2]}x{n}-0")], SCHEMA)
"""


def test_writer_processes_committing_at_once_keep_every_commit(bare):
    """Three processes (no Spark) each start and commit four new file groups, all at once: twelve
    commits with twelve distinct instant times, every file group in the table, nothing pending."""
    table, path = bare
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", _START_AND_COMMIT, str(path), f"w{k}"], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
    commits = [i for i in table.timeline() if i.action is Action.COMMIT]
    assert len(commits) == 13 and len({i.time for i in commits}) == 13
    assert len(table.file_slices()) == 13 and table.active_timeline.pending() == []
    assert not (path / ".hoodie" / ".aux" / "lock").exists()


def test_an_instant_time_is_requested_once(bare):
    table, _ = bare
    timeline = table.active_timeline
    at = timeline.new_instant_time()
    timeline.request(Action.COMMIT, {}, at=at)
    with pytest.raises(ConcurrentWriteError, match=f"another writer requested instant {at}"):
        table.active_timeline.request(Action.COMMIT, {}, at=at)


def test_completion_times_increase_past_every_instant_and_completion(bare):
    table, _ = bare
    early = WriteTransaction(table.context(), Operation.UPSERT, options=options(**OCC))
    early.start()
    later = committed(table, **OCC)
    early.commit([stand_in_file(Path(table.path), early, "p", "e-0")], SCHEMA)
    timeline = table.active_timeline
    done = {i.time: timeline.completion_time(i) for i in timeline.completed_writes()}
    assert done[early.instant.time] > done[later] > later > early.instant.time
    assert timeline.next_completion_time() > max(done.values())


# ---- the conflict check ------------------------------------------------------------------------


def test_two_writers_on_the_same_file_group_one_commits_the_other_conflicts(bare):
    """Both planned on the same snapshot and rewrite file group `shared-0`: the first to commit wins;
    the second gets WriteConflictError naming the winner and the file group, and its instant is
    rolled back, leaving only rollback files behind."""
    table, path = bare
    ctx_a, ctx_b = table.context(), table.context()  # both plans read the same snapshot
    a = WriteTransaction(ctx_a, Operation.UPSERT, options=options(**OCC))
    a.start()
    a_file = stand_in_file(path, a, "p", "shared-0")
    with WriteTransaction(ctx_b, Operation.UPSERT, options=options(**OCC)) as b:
        b.start()
        won = b.commit([stand_in_file(path, b, "p", "shared-0"), stand_in_file(path, b, "p", "other-0")], SCHEMA)
    before = tree(path)
    with pytest.raises(WriteConflictError, match=rf"commit {won.time}.*file group\(s\) p/shared-0\. "
                                                 rf"This write \(instant {a.instant.time}\) was rolled back"):
        with a:
            a.commit([a_file], SCHEMA)
    after = tree(path)
    others = {k: v for k, v in before.items() if a.instant.time not in k}  # all but the loser's own files
    assert {k: v for k, v in after.items() if k in others} == others
    assert not [k for k in after if a.instant.time in k]  # its base file, markers and heartbeat are gone
    assert all(k.startswith(".hoodie/") and ".rollback" in k for k in set(after) - set(others))
    assert [i.action for i in table.timeline()] == [Action.COMMIT, Action.COMMIT, Action.ROLLBACK]
    assert {s.base_instant_time for s in table.file_slices() if s.file_id == "shared-0"} == {won.time}


def test_the_check_runs_in_single_writer_mode_too_against_a_stale_snapshot(bare):
    """One writer at a time, but the plan was made before another write committed: a lost update all
    the same, so single-writer mode refuses it too."""
    table, path = bare
    stale = table.context()
    other = committed(table)  # rewrites nothing of `shared-0`: a new file group
    with WriteTransaction(table.context(), Operation.UPSERT) as w:
        w.start()
        w.commit([stand_in_file(path, w, "p", "shared-0")], SCHEMA)  # planned on the latest snapshot: fine
    with pytest.raises(WriteConflictError, match=f"commit {w.instant.time}"):
        with WriteTransaction(stale, Operation.UPSERT) as late:  # planned before both commits
            late.start()
            late.commit([stand_in_file(path, late, "p", "shared-0")], SCHEMA)
    assert other < w.instant.time


def test_writers_that_only_add_file_groups_never_conflict(bare):
    table, path = bare
    snapshot = table.context()
    txs = [WriteTransaction(snapshot, Operation.BULK_INSERT, options=options(**OCC)) for _ in range(3)]
    for tx in txs:
        tx.start()
    for n, tx in enumerate(reversed(txs)):  # completed latest instant first
        tx.commit([stand_in_file(path, tx, "p", f"new{n}-0")], SCHEMA)
    assert len(table.file_slices()) == 4


def test_first_writes_into_one_bucket_conflict_by_bucket_number(tmp_path):
    """A SIMPLE-engine BUCKET table: each writer's first file group of bucket 1 has a random file id
    (Hudi's `<bucket>-<uuid>-0`); they conflict as one bucket. Another bucket's first write does not."""
    path = tmp_path / "t"
    table = lf.Table.create(None, path, options={"index_type": "BUCKET", "bucket_num": 4})
    snapshot = table.context()
    a = WriteTransaction(snapshot, Operation.UPSERT, options=options(**OCC))
    a.start()
    with WriteTransaction(snapshot, Operation.UPSERT, options=options(**OCC)) as b:
        b.start()
        won = b.commit([stand_in_file(path, b, "p", "00000001-1111-0")], SCHEMA)
    with WriteTransaction(snapshot, Operation.UPSERT, options=options(**OCC)) as c:
        c.start()
        c.commit([stand_in_file(path, c, "p", "00000002-2222-0")], SCHEMA)
    with pytest.raises(WriteConflictError, match=rf"commit {won.time}.*bucket\(s\) p/bucket 1 \(file groups "
                                                 r"p/00000001-1111-0, p/00000001-3333-0\)"):
        with a:
            a.commit([stand_in_file(path, a, "p", "00000001-3333-0")], SCHEMA)
    assert sorted(s.file_id for s in table.file_slices()) == ["00000001-1111-0", "00000002-2222-0"]


def test_a_resize_whose_ring_keeps_a_node_another_commit_replaced_conflicts(bare):
    """Two resizes planned on one ring split different buckets: no file group in common, but the ring of
    the second to commit still names the bucket the first replaced."""
    table, path = bare
    snapshot = table.context()
    first = WriteTransaction(snapshot, Operation.CLUSTER, Action.REPLACE_COMMIT, options=options(**OCC))
    first.start()
    with WriteTransaction(snapshot, Operation.CLUSTER, Action.REPLACE_COMMIT, options=options(**OCC)) as other:
        other.start()
        won = other.commit([stand_in_file(path, other, "p", "x1-0"), stand_in_file(path, other, "p", "x2-0")],
                           SCHEMA, replaced={"p": ("shared-0",)}, ring_nodes=(("p", "x1-0"), ("p", "x2-0"), ("p", "y-0")))
    with pytest.raises(WriteConflictError, match=rf"commit {won.time}.*replaced file group\(s\) p/shared-0, which "
                                                 r"this resize's new hash ring still names"):
        with first:
            first.commit([stand_in_file(path, first, "p", "y1-0")], SCHEMA, replaced={"p": ("y-0",)},
                         ring_nodes=(("p", "shared-0"), ("p", "y1-0")))
    assert sorted(s.file_id for s in table.file_slices()) == ["x1-0", "x2-0"]


def test_an_earlier_instant_completing_last_keeps_the_metadata_tables_latest_snapshot(bare):
    """Out-of-order completion: the metadata table's latest snapshot is the last completed instant's
    (it holds both writes' files), so column stats stay usable for data skipping."""
    table, path = bare
    early = WriteTransaction(table.context(), Operation.UPSERT, options=options(**OCC))
    early.start()
    later_time = committed(table, **OCC)
    early.commit([stand_in_file(path, early, "p", "early-0", x=7)], SCHEMA)
    assert early.instant.time < later_time
    timeline = table.active_timeline
    assert [i.time for i in timeline.completed_writes_by_completion()][-2:] == [later_time, early.instant.time]
    reader = MetadataReader(table.storage, timeline)
    assert reader.latest_instant == early.instant.time
    stats, source = reader.column_stats(table.file_slices(), SCHEMA)
    assert source == "metadata table" and len(stats) == 3
    early_path = next(s.path for s in table.file_slices() if s.file_id == "early-0")
    assert stats[early_path]["x"].min == 7


# ---- writers in separate processes -------------------------------------------------------------


class WriterProcess:
    """`tests.concurrent_writer` in its own process (its own `local[1]` Spark session), optionally held
    at a pause point until `go`, or killed at a crash point.

    Started before the test prepares the table, so that its Spark session starts meanwhile; it
    opens the table only after `begin`.
    """

    def __init__(self, workdir: Path, table_path: Path, operation: str, spec: dict,
                 pause_at: str | None = None, crash_at: str | None = None):
        self.pause_dir = workdir / f"pause-{time.time_ns()}"
        self.pause_dir.mkdir()
        spec = {**spec, "begin_file": str(self.pause_dir / "begin")}
        # SPARK_LOCAL_REMOTE marks the process holding a local Connect server; a writer is only its client.
        env = {k: v for k, v in os.environ.items()
               if k not in (writer_pool.PAUSE_AT, writer_pool.CRASH_AT, "SPARK_LOCAL_REMOTE")}
        env.update({"PYTHONPATH": str(ROOT), writer_pool.PAUSE_DIR: str(self.pause_dir)})
        if pause_at:
            env[writer_pool.PAUSE_AT] = pause_at
        if crash_at:
            env[writer_pool.CRASH_AT] = crash_at
        # A warm process (tests.writer_pool): its Spark session started before this test asked for it.
        self.proc = writer_pool.spawn("tests.concurrent_writer", [str(table_path), operation, json.dumps(spec)], env)

    def begin(self) -> None:
        (self.pause_dir / "begin").touch()

    def wait_paused(self, point: str, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while not (self.pause_dir / f"{point}.reached").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                out, err = self.proc.communicate(timeout=30)
                pytest.fail(f"writer never reached {point} (exit {self.proc.returncode}):\n{out}\n{err[-3000:]}")
            time.sleep(0.05)

    def go(self, point: str) -> None:
        (self.pause_dir / f"{point}.go").touch()

    def outcome(self, timeout_s: float = 240) -> dict:
        """The writer's printed outcome: its report's fields, or the LabformatError it got."""
        out, err = self.proc.communicate(timeout=timeout_s)
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}:\n{out}\n{err[-3000:]}"
        return json.loads(out.strip().splitlines()[-1])

    def killed(self, timeout_s: float = 240) -> None:
        out, err = self.proc.communicate(timeout=timeout_s)
        assert self.proc.returncode == 86, f"exit {self.proc.returncode}:\n{out}\n{err[-3000:]}"


def updates(spark, ids: range, battery: float, parity: int | None = None):
    """Rows `ids` of `telemetry` as updates: battery `battery`, updated a day later (the precombine field)."""
    from pyspark.sql import functions as F

    from tests.helpers import telemetry

    df = telemetry(spark, len(ids), partitions=1, start=ids.start)
    if parity is not None:
        df = df.where(F.col("signal_dbm") % 2 == parity)
    return df.withColumn("battery_pct", F.lit(battery)).withColumn("updated_at", F.col("updated_at") + F.expr("INTERVAL 1 DAY"))


def batteries(table) -> dict[int, float]:
    """battery_pct per row id (signal_dbm is the id), from our reader."""
    return {r.signal_dbm: r.battery_pct for r in table.read().select("signal_dbm", "battery_pct").collect()}


def hudi_batteries(path) -> dict[int, float]:
    """battery_pct per row id, from Apache Hudi's own reader (hudi-rs)."""
    from tests.helpers import hudi_snapshot

    pdf = hudi_snapshot(path)
    return dict(zip(pdf["signal_dbm"].astype(int), pdf["battery_pct"].astype(float)))


@pytest.mark.spark
@pytest.mark.slow
def test_occ_writers_on_disjoint_file_groups_both_commit_out_of_order(spark, tmp_path):
    """Writer A (another process) updates day 2024-01-15 and is held after writing its base files;
    writer B (this process) updates day 2024-01-16 and commits; then A commits: the earlier instant
    completes last. Every update of both is in the table, for our reader, a skipping query on the
    metadata table's stats, and hudi-rs."""
    from tests.helpers import telemetry

    path = tmp_path / "t"
    a = WriterProcess(tmp_path, path, "upsert", {"n": 40, "parity": 0, "battery": 1000.0, "options": OCC},
                      pause_at="after_write")
    t = lf.Table.create(spark, path, partition_field="day")
    t.bulk_insert(telemetry(spark, 40, partitions=1))
    assert len(t.file_slices()) == 2  # one file group per day
    a.begin()
    a.wait_paused("after_write")
    b = t.upsert(updates(spark, range(40), 2000.0, parity=1), OCC)
    a.go("after_write")
    a_report = a.outcome()

    assert "error" not in a_report and a_report["instant"] < b.instant  # started first, completed last
    assert (a_report["rows_updated"], b.rows_updated) == (20, 20)
    expected = {i: 1000.0 if i % 2 == 0 else 2000.0 for i in range(40)}
    assert batteries(t) == expected
    assert hudi_batteries(path) == expected
    rows, scan = t.query("battery_pct = 1000")
    assert scan.rows_returned == 20 and scan.stats_source.kind is StatsSource.METADATA_TABLE
    assert scan.funnel.after_column_stats == 1  # B's file skipped on the stats A's commit wrote
    assert not list((path / ".hoodie" / ".heartbeat").iterdir()) and not (path / ".hoodie/.aux/lock").exists()


def conflict_on_one_file_group(spark, workdir, path):
    """Writer A (another process) updates rows 0-9 of a 20-row table's one file group under OCC and is
    held after writing its files; B (this process) updates rows 10-19 and commits; then A goes on.
    (the table, its file group, B's report, A's outcome)."""
    from tests.helpers import telemetry

    a = WriterProcess(workdir, path, "upsert", {"n": 10, "battery": 1000.0, "options": OCC}, pause_at="after_write")
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 20, partitions=1))
    (group,) = t.file_slices()
    a.begin()
    a.wait_paused("after_write")
    b = t.upsert(updates(spark, range(10, 20), 2000.0), OCC)
    a.go("after_write")
    return t, group, b, a.outcome()


@pytest.mark.spark
@pytest.mark.slow
def test_occ_writers_on_the_same_file_group_exactly_one_commits(spark, tmp_path):
    """A (another process) and B (this process) update different rows of the one file group. B commits
    first; A gets WriteConflictError naming B's commit, and its instant is rolled back: B's updates
    are all there, A's none, and no file of A's instant is left."""
    path = tmp_path / "t"
    t, group, b, a_report = conflict_on_one_file_group(spark, tmp_path, path)

    assert a_report["error"] == "WriteConflictError", a_report
    assert a_report["spark_connect"] == is_connect(spark)  # under tests/test_connect.py, a Connect client too
    assert f"commit {b.instant}" in a_report["message"] and group.file_id in a_report["message"]
    expected = {i: i * 0.5 if i < 10 else 2000.0 for i in range(20)}
    assert batteries(t) == expected and hudi_batteries(path) == expected
    assert [i.action.value for i in t.timeline()] == ["commit", "commit", "rollback"]
    (rollback,) = [i for i in t.timeline() if i.action is Action.ROLLBACK]
    target = json.loads((path / ".hoodie" / rollback.file_name).read_text())["commitsRollback"][0]
    assert not [p for p in path.rglob(f"*{target}*") if ".rollback" not in p.name]
    assert t.active_timeline.pending() == []


@pytest.mark.spark
@pytest.mark.slow
def test_single_writer_refuses_a_second_live_writer_and_the_first_commits(spark, tmp_path):
    from tests.helpers import telemetry

    path = tmp_path / "t"
    a = WriterProcess(tmp_path, path, "upsert", {"n": 10, "battery": 1000.0}, pause_at="after_start")
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 20, partitions=1))
    a.begin()
    a.wait_paused("after_start")
    before = tree(path)
    with pytest.raises(ConcurrentWriteError, match=r"of another writer is in flight \(heartbeat \d+\.\d s ago"):
        t.upsert(updates(spark, range(10, 20), 2000.0))
    assert tree(path) == before  # refused before anything changed
    a.go("after_start")
    a_report = a.outcome()

    assert "error" not in a_report and a_report["rows_updated"] == 10
    expected = {i: 1000.0 if i < 10 else i * 0.5 for i in range(20)}
    assert batteries(t) == expected and hudi_batteries(path) == expected


@pytest.mark.spark
@pytest.mark.slow
def test_a_writer_killed_holding_the_lock_frees_it_once_it_expires(spark, tmp_path):
    """A dies inside its commit's lock (before publishing); the next writer waits for the lock's
    expiry (A's own setting: 3 s after its last refresh), then rolls A's instant back and writes."""
    from labformat.model.instant import parse_instant_time
    from tests.helpers import telemetry

    path = tmp_path / "t"
    short = {"lock_expire_minutes": 0.05, "heartbeat_interval_ms": 100, "heartbeat_tolerable_misses": 1}
    a = WriterProcess(tmp_path, path, "upsert", {"n": 10, "battery": 1000.0, "options": short},
                      crash_at="before_publish")
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 20, partitions=1))
    a.begin()
    a.killed()
    lock = path / ".hoodie" / ".aux" / "lock"
    assert lock.exists()
    last_refresh = lock.stat().st_mtime
    (dead,) = t.active_timeline.pending()

    report = t.upsert(updates(spark, range(10, 20), 2000.0))
    assert report.rolled_back == (dead.time,)
    # The instant time is taken under the lock, so only after the expiry (to the millisecond it is cut to).
    assert parse_instant_time(report.instant).timestamp() >= last_refresh + 3.0 - 0.002
    expected = {i: i * 0.5 if i < 10 else 2000.0 for i in range(20)}
    assert batteries(t) == expected and hudi_batteries(path) == expected
    assert not lock.exists()


@pytest.mark.spark
@pytest.mark.slow
def test_a_writer_killed_while_inflight_is_rolled_back_once_its_heartbeat_expires(spark, tmp_path):
    """A dies after writing its base files (not holding the lock). Until its heartbeat is older than
    its tolerance (1 s x 3) it counts as live: a single-writer start is refused and nothing is rolled
    back; after that the next writer rolls it back."""
    from labformat.heartbeat import heartbeat_status
    from tests.helpers import telemetry

    path = tmp_path / "t"
    a = WriterProcess(tmp_path, path, "upsert", {"n": 10, "battery": 1000.0, "options": {
        "heartbeat_interval_ms": 1000, "heartbeat_tolerable_misses": 2}}, crash_at="after_write")
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 20, partitions=1))
    a.begin()
    a.killed()
    (dead,) = t.active_timeline.pending()
    assert list(path.glob(f"*{dead.time}.parquet"))  # its base file is there, uncommitted

    with pytest.raises(ConcurrentWriteError, match=f"instant {dead.time} of another writer is in flight"):
        with WriteTransaction(t.context(), Operation.UPSERT) as early:
            early.start()
    assert t.active_timeline.pending() == [dead]

    deadline = time.monotonic() + 10
    while heartbeat_status(t.storage, dead.time, 60, 2).alive and time.monotonic() < deadline:
        time.sleep(0.1)
    report = t.upsert(updates(spark, range(10, 20), 2000.0))
    assert report.rolled_back == (dead.time,)
    assert not list(path.glob(f"*{dead.time}.parquet"))
    expected = {i: i * 0.5 if i < 10 else 2000.0 for i in range(20)}
    assert batteries(t) == expected and hudi_batteries(path) == expected


# ---- bucket tables (issue 48, cases 2 and 10) ---------------------------------------------------

BUCKETS = {"index_type": "BUCKET", "bucket_num": 2}


@pytest.mark.spark
@pytest.mark.slow
def test_occ_first_writes_into_one_empty_bucket_exactly_one_commits(spark, tmp_path):
    """A (another process) and B (this process) each make the first file group of the same buckets of
    an empty BUCKET table. Hudi names a bucket's file group `<bucket>-<random uuid>-0`, so the two share
    no file id; they conflict by bucket (Hudi's BucketIndexConcurrentFileWritesConflictResolutionStrategy).
    A loses, its instant rolled back; each bucket keeps one file group, and A's rows written again land."""
    from labformat.index.bucket import bucket_of_file_id
    from tests.helpers import telemetry

    path = tmp_path / "t"
    a = WriterProcess(tmp_path, path, "upsert", {"n": 10, "options": OCC}, pause_at="after_write")
    t = lf.Table.create(spark, path, options=BUCKETS)
    a.begin()
    a.wait_paused("after_write")
    b = t.upsert(telemetry(spark, 10, partitions=1, start=10), OCC)
    a.go("after_write")
    a_report = a.outcome()

    assert a_report.get("error") == "WriteConflictError", a_report
    assert f"commit {b.instant}" in a_report["message"] and "bucket" in a_report["message"]
    buckets = [bucket_of_file_id(s.file_id) for s in t.file_slices()]
    assert len(buckets) == len(set(buckets))  # one file group per bucket
    assert sorted(batteries(t)) == list(range(10, 20)) and sorted(hudi_batteries(path)) == list(range(10, 20))
    again = t.upsert(telemetry(spark, 10, partitions=1), OCC)  # once broke with DUPLICATED_MAP_KEY
    assert again.rows_inserted == 10
    expected = {i: i * 0.5 for i in range(20)}
    assert batteries(t) == expected and hudi_batteries(path) == expected


@pytest.mark.spark
@pytest.mark.slow
def test_occ_resizes_splitting_different_buckets_of_one_ring_exactly_one_commits(spark, tmp_path):
    """Two consistent-hashing resizes planned on one ring, each splitting another bucket, share no file
    group. A (another process) splits bucket X, the biggest, and is held after writing; an upsert grows
    bucket Y past X and B (this process) splits Y and commits. A's ring still names Y, which B replaced
    (and B's names X): had both committed, the newest ring would send X's keys to a file group no
    reader sees. A conflicts; an upsert of X's 100 keys then updates all of them, for labformat and hudi-rs."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from labformat.index import consistent_bucket as ch
    from tests.helpers import telemetry

    resize = {"bucket_max_num": 3, "bucket_split_threshold": 1.0, "max_file_size": "1KB", **OCC}
    ring = ch.Ring.initial("", 2)
    x, y = (n.file_id for n in ring.nodes)
    rows = telemetry(spark, 1000, partitions=1).select("record_key", "signal_dbm").collect()
    node = ring.buckets_of(ch.key_hashes(pa.array([r.record_key for r in rows]), ()))
    in_x = [r.signal_dbm for r, n in zip(rows, node) if n == 0][:100]
    in_y = [r.signal_dbm for r, n in zip(rows, node) if n == 1]
    assert len(in_x) == 100 and len(in_y) > 400

    def telemetry_of(ids, battery=None):
        df = telemetry(spark, 1000, partitions=1).where(F.col("signal_dbm").isin(ids))
        return df if battery is None else df.withColumn("battery_pct", F.lit(battery)).withColumn(
            "updated_at", F.col("updated_at") + F.expr("INTERVAL 1 DAY"))

    def sizes():
        return {s.file_id: s.size_bytes + s.log_bytes for s in t.file_slices()}

    path = tmp_path / "t"
    a = WriterProcess(tmp_path, path, "cluster", {"n": 1, "options": resize}, pause_at="after_write")
    t = lf.Table.create(spark, path, table_type="MERGE_ON_READ",
                        options={"index_type": "BUCKET", "bucket_engine": "CONSISTENT_HASHING", "bucket_num": 2})
    t.bulk_insert(telemetry_of(in_x + in_y[:10]))
    assert sizes()[x] > sizes()[y]
    a.begin()
    a.wait_paused("after_write")
    t.upsert(telemetry_of(in_y[10:400]), OCC)  # Y's log: Y is now the biggest bucket
    assert sizes()[y] > sizes()[x]
    b = t.cluster(resize)
    assert b.details.clustering_groups == 1 and x in sizes() and y not in sizes()
    a.go("after_write")
    a_report = a.outcome()

    assert a_report.get("error") == "WriteConflictError", a_report
    assert f"commit {b.instant}" in a_report["message"] and y in a_report["message"]
    assert not [p for p in path.rglob("*.hashing_meta") if p.name.split(".")[0] not in (ch.INIT_INSTANT, b.instant)]
    report = t.upsert(telemetry_of(in_x, battery=7.0))
    assert report.rows_updated == 100
    expected = {i: 7.0 if i in set(in_x) else i * 0.5 for i in in_x + in_y[:400]}
    assert batteries(t) == expected and hudi_batteries(path) == expected


# Short enough for a test to outwait, long enough that a running writer never misses them.
FREEZABLE = {"lock_expire_minutes": 0.02, "heartbeat_interval_ms": 100, "heartbeat_tolerable_misses": 1}


@pytest.mark.spark
@pytest.mark.slow
def test_a_writer_frozen_in_start_and_rolled_back_commits_nothing_when_resumed(spark, tmp_path):
    """Issue 48 case 1. Single-writer mode. A (another process) is frozen (SIGSTOP) holding the lock in
    `start`, just after its `.commit.requested`; once its lock and heartbeat expire, B breaks the lock,
    rolls A's instant back and inserts the same new keys. Resumed, A must commit nothing: it used to
    re-create its `.inflight`, pass the pending check and commit, storing each key twice."""
    import signal

    from tests.helpers import telemetry

    path = tmp_path / "t"
    # Inserts into new file groups (no small-file routing): the conflict check cannot see the shared keys.
    own_groups = {"small_file_limit": 0}
    a = WriterProcess(tmp_path, path, "upsert", {"n": 5, "start": 100, "battery": 1000.0,
                                                 "options": {**FREEZABLE, **own_groups}}, pause_at="after_requested")
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 20, partitions=1))
    a.begin()
    a.wait_paused("after_requested")
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        (a_instant,) = t.active_timeline.pending()
        a.go("after_requested")  # seen only once it runs again
        # B waits for A's lock to expire (A's own 1.2 s), breaks it, and finds A's heartbeat expired too.
        b = t.upsert(updates(spark, range(100, 105), 2000.0), own_groups)
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    a_report = a.outcome()

    assert b.rolled_back == (a_instant.time,)
    assert a_report.get("error") == "ConcurrentWriteError", a_report
    keys = [r.record_key for r in t.read().select("record_key").collect()]
    assert len(keys) == len(set(keys)) == 25
    expected = {**{i: i * 0.5 for i in range(20)}, **{i: 2000.0 for i in range(100, 105)}}
    assert batteries(t) == expected and hudi_batteries(path) == expected
    assert len(hudi_snapshot_rows(path)) == 25
    assert t.active_timeline.pending() == []
    assert not [p for p in path.rglob(f"*{a_instant.time}*") if ".hoodie" not in p.parts]
    assert not (path / ".hoodie" / ".aux" / "lock").exists()


def hudi_snapshot_rows(path) -> list:
    from tests.helpers import hudi_snapshot

    return list(hudi_snapshot(path)["_hoodie_record_key"])


@pytest.mark.spark
@pytest.mark.slow
def test_a_rolled_back_writer_killed_after_writing_leaves_no_file_once_cleaned(spark, tmp_path):
    """Issue 48 case 17. A (another process) is frozen after `start`; B rolls its instant back and
    commits. Resumed, A writes its base file and is killed before its commit: the file belongs to no
    pending instant and used to stay for good (hudi-rs then reads it as data). The next clean deletes
    the files of instants a rollback named; every reader then sees B's table only."""
    import signal

    from tests.helpers import telemetry

    path = tmp_path / "t"
    a = WriterProcess(tmp_path, path, "upsert", {"n": 5, "start": 200, "battery": 1000.0, "options": FREEZABLE},
                      pause_at="after_start", crash_at="after_write")
    t = lf.Table.create(spark, path)
    t.bulk_insert(telemetry(spark, 20, partitions=1))
    a.begin()
    a.wait_paused("after_start")
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        (a_instant,) = t.active_timeline.pending()
        a.go("after_start")
        time.sleep(0.6)  # past A's heartbeat tolerance (0.2 s)
        b = t.upsert(updates(spark, range(10, 15), 2000.0))
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    a.killed()
    assert b.rolled_back == (a_instant.time,)
    leaked = [p for p in path.rglob(f"*{a_instant.time}*.parquet")]
    assert leaked and t.active_timeline.pending() == []  # the leak: no instant any rollback would look for

    t.clean()
    assert not [p for p in path.rglob(f"*{a_instant.time}*") if ".hoodie" not in p.parts]
    expected = {i: 2000.0 if 10 <= i < 15 else i * 0.5 for i in range(20)}
    assert batteries(t) == expected and hudi_batteries(path) == expected
    assert len(hudi_snapshot_rows(path)) == 20
