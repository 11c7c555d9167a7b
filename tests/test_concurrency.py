"""Concurrent writers (issue 16, case 1): nothing that reported success is lost, a live writer is never rolled back.

The first part drives `WriteTransaction`s on a table opened without Spark, with stand-in base
files: the lock, heartbeat and conflict rules on their own. The second part runs real writers in
separate processes (each its own `local[1]` Spark session), ordered by pause points
(`LABFORMAT_PAUSE_AT`, see `labformat/_faults.py`) rather than by sleeps.
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
from labformat import config as C
from labformat.errors import ConcurrentWriteError, WriteConflictError
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.heartbeat import heartbeat_path
from labformat.metadata import MetadataReader
from labformat.model.instant import Action
from labformat.write.transaction import WriteTransaction
from tests.helpers import tree

ROOT = Path(__file__).resolve().parents[1]
OCC = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}
SCHEMA = T.StructType([T.StructField("x", T.LongType())])


def options(**given) -> C.Config:
    return C.resolve(given, [C.Scope.WRITE])


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
    with WriteTransaction(table.context(), "upsert", options=options(**given)) as tx:
        tx.start()
        return tx.commit([stand_in_file(Path(table.path), tx, "p", f"g{time.time_ns()}-0")], SCHEMA).time


@pytest.fixture
def bare(tmp_path):
    """A table with one commit, opened without Spark: the timeline side of concurrent writers."""
    table = lf.Table.create(None, tmp_path / "t")
    with WriteTransaction(table.context(), "bulk_insert") as tx:
        tx.start()
        tx.commit([stand_in_file(tmp_path / "t", tx, "p", "shared-0")], SCHEMA)
    return table, tmp_path / "t"


# ---- live and dead writers --------------------------------------------------------------------


def test_single_writer_mode_refuses_while_a_live_writer_is_in_flight(bare):
    """The first writer stays in flight (its heartbeat beating); the second is refused with the
    instant and the heartbeat's age, the table exactly as it was; the first then commits."""
    table, path = bare
    first = WriteTransaction(table.context(), "upsert", options=options())
    first.start()
    before = tree(path)
    with pytest.raises(ConcurrentWriteError, match=(
            rf"instant {first.instant.time} of another writer is in flight \(heartbeat \d+\.\d s ago.*\); "
            r"single-writer mode.*OPTIMISTIC_CONCURRENCY_CONTROL or retry")):
        with WriteTransaction(table.context(), "upsert") as second:
            second.start()
    assert tree(path) == before
    first.commit([stand_in_file(path, first, "p", "new-0")], SCHEMA)
    assert [i.action for i in table.timeline()] == [Action.COMMIT, Action.COMMIT]
    assert not (path / heartbeat_path(first.instant.time)).exists()


def test_occ_mode_starts_beside_a_live_writer_and_never_rolls_it_back(bare):
    table, path = bare
    first = WriteTransaction(table.context(), "upsert", options=options(**OCC))
    first.start()
    with WriteTransaction(table.context(), "upsert", options=options(**OCC)) as second:
        second.start()
        assert second.rolled_back == () and second.instant.time > first.instant.time
        second.commit([stand_in_file(path, second, "p", "b-0")], SCHEMA)
    first.commit([stand_in_file(path, first, "p", "a-0")], SCHEMA)  # completes after a later instant
    assert [i.action for i in table.timeline()] == [Action.COMMIT] * 3
    assert {s.file_id for s in table.file_slices()} == {"shared-0", "a-0", "b-0"}


def test_a_dead_writers_instant_is_rolled_back_once_its_heartbeat_expires_and_not_before(bare):
    table, path = bare
    dying = WriteTransaction(table.context(), "upsert", options=options(heartbeat_interval_ms=200,
                                                                        heartbeat_tolerable_misses=1))
    dead = dying.start()
    stand_in_file(path, dying, "p", "dead-0")
    dying._heartbeat._stop.set()  # killed: no more beats, the heartbeat file stays behind
    dying._heartbeat._thread.join()
    with WriteTransaction(table.context(), "upsert", options=options(**OCC)) as early:
        early.start()  # within the dead writer's tolerance (0.4 s): it still counts as live
        assert early.rolled_back == ()
        early.abandon()
    assert dead in table.active_timeline.pending()
    time.sleep(0.5)
    with WriteTransaction(table.context(), "upsert") as late:
        late.start()
        assert late.rolled_back == (dead.time,)
        late.abandon()
    assert table.active_timeline.pending() == [] and not list(path.glob(f"p/*{dead.time}*"))
    assert not (path / heartbeat_path(dead.time)).exists()


def test_a_writer_whose_instant_was_rolled_back_while_it_stalled_commits_nothing(bare):
    table, path = bare
    before_files = {p.name for p in (path / "p").iterdir()}
    stalled = WriteTransaction(table.context(), "upsert", options=options(heartbeat_interval_ms=50,
                                                                          heartbeat_tolerable_misses=1))
    stalled.start()
    stalled._heartbeat._stop.set()  # the driver stalls: no beats for longer than the tolerance
    stalled._heartbeat._thread.join()
    time.sleep(0.2)
    with WriteTransaction(table.context(), "upsert") as other:
        other.start()
        assert other.rolled_back == (stalled.instant.time,)
        other.abandon()
    late_file = stand_in_file(path, stalled, "p", "late-0")  # written after the rollback
    with pytest.raises(ConcurrentWriteError, match=rf"instant {stalled.instant.time} of this write was rolled back"):
        with stalled:
            stalled.commit([late_file], SCHEMA)
    assert {p.name for p in (path / "p").iterdir()} == before_files
    assert [i.action for i in table.timeline()] == [Action.COMMIT, Action.ROLLBACK]


def test_instant_times_stay_unique_across_writers_starting_at_once(bare):
    table, _ = bare
    times, errors = [], []

    def writer():
        try:
            with WriteTransaction(table.context(), "upsert", options=options(**OCC)) as tx:
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


# ---- the conflict check ------------------------------------------------------------------------


def test_two_writers_on_the_same_file_group_one_commits_the_other_conflicts(bare):
    """Both planned on the same snapshot and rewrite file group `shared-0`: the first to commit wins;
    the second gets WriteConflictError naming the winner and the file group, and its instant is
    rolled back, leaving only rollback files behind."""
    table, path = bare
    ctx_a, ctx_b = table.context(), table.context()  # both plans read the same snapshot
    a = WriteTransaction(ctx_a, "upsert", options=options(**OCC))
    a.start()
    a_file = stand_in_file(path, a, "p", "shared-0")
    with WriteTransaction(ctx_b, "upsert", options=options(**OCC)) as b:
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
    with WriteTransaction(table.context(), "upsert") as w:
        w.start()
        w.commit([stand_in_file(path, w, "p", "shared-0")], SCHEMA)  # planned on the latest snapshot: fine
    with pytest.raises(WriteConflictError, match=f"commit {w.instant.time}"):
        with WriteTransaction(stale, "upsert") as late:  # planned before both commits
            late.start()
            late.commit([stand_in_file(path, late, "p", "shared-0")], SCHEMA)
    assert other < w.instant.time


def test_writers_that_only_add_file_groups_never_conflict(bare):
    table, path = bare
    snapshot = table.context()
    txs = [WriteTransaction(snapshot, "bulk_insert", options=options(**OCC)) for _ in range(3)]
    for n, tx in enumerate(txs):
        tx.start()
    for n, tx in enumerate(reversed(txs)):  # completed latest instant first
        tx.commit([stand_in_file(path, tx, "p", f"new{n}-0")], SCHEMA)
    assert len(table.file_slices()) == 4


def test_an_earlier_instant_completing_last_keeps_the_metadata_tables_latest_snapshot(bare):
    """Out-of-order completion: the metadata table's latest snapshot is the last completed instant's
    (it holds both writes' files), so column stats stay usable for data skipping."""
    table, path = bare
    early = WriteTransaction(table.context(), "upsert", options=options(**OCC))
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
