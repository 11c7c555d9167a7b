"""The table lock and writer heartbeats on plain files (no Spark): exclusive, released, expired, judged by their holder."""

from __future__ import annotations

import json
import os
import re
import threading
import time

import pytest

from labformat.errors import ConcurrentWriteError, LockTimeoutError
from labformat.heartbeat import HEARTBEAT_DIR, Heartbeat, delete_heartbeats, heartbeat_path, heartbeat_status
from labformat.lock import LOCK_PATH, LockOwner, TableLock
from labformat.storage import Storage


@pytest.fixture
def storage(tmp_path):
    (tmp_path / ".hoodie").mkdir()
    return Storage(tmp_path)


def plant_lock(storage, tmp_path, age_s: float, expire_s: float, pid: int = 4242, raw: bytes | None = None):
    """A lock file another (maybe dead) writer left, last refreshed `age_s` ago."""
    owner = LockOwner("f" * 32, pid, "elsewhere", time.time() - age_s, expire_s)
    assert storage.create_exclusive(LOCK_PATH, owner.to_bytes() if raw is None else raw)
    past = time.time() - age_s
    os.utime(tmp_path / LOCK_PATH, (past, past))
    return owner


# ---- the lock --------------------------------------------------------------------------------


def test_lock_is_exclusive_and_the_timeout_names_the_holder(storage, tmp_path):
    with TableLock(storage, wait_s=5, expire_s=60) as held:
        owner = json.loads((tmp_path / LOCK_PATH).read_text())
        assert owner["pid"] == os.getpid() and owner["owner_id"] == held.owner.owner_id
        started = time.monotonic()
        with pytest.raises(LockTimeoutError, match=f"held by pid {os.getpid()} on .*owner {owner['owner_id'][:8]}"):
            TableLock(storage, wait_s=0.3, expire_s=60).acquire()
        assert 0.3 <= time.monotonic() - started < 2
    assert not (tmp_path / LOCK_PATH).exists()


def test_lock_is_released_when_the_block_raises(storage, tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with TableLock(storage, wait_s=1, expire_s=60):
            raise RuntimeError("boom")
    assert not (tmp_path / LOCK_PATH).exists()
    with TableLock(storage, wait_s=0, expire_s=60):  # free at once
        pass
    assert [p.name for p in (tmp_path / ".hoodie" / ".aux").iterdir()] == []  # no temp file left either


def test_a_waiter_gets_the_lock_when_the_holder_releases_it(storage):
    holder = TableLock(storage, wait_s=1, expire_s=60).acquire()
    threading.Timer(0.3, holder.release).start()
    started = time.monotonic()
    with TableLock(storage, wait_s=5, expire_s=60):
        assert 0.25 <= time.monotonic() - started < 3


def test_an_expired_lock_of_a_killed_holder_is_broken(storage, tmp_path):
    dead = plant_lock(storage, tmp_path, age_s=2.0, expire_s=1.0)
    lock = TableLock(storage, wait_s=0, expire_s=600)  # the holder's expiry decides, not the waiter's
    with lock:
        assert lock.broken == [dead]
        assert json.loads((tmp_path / LOCK_PATH).read_text())["owner_id"] == lock.owner.owner_id
    assert sorted(p.name for p in (tmp_path / ".hoodie" / ".aux").iterdir()) == []


def test_a_lock_not_yet_expired_by_its_holders_setting_is_not_broken(storage, tmp_path):
    holder = plant_lock(storage, tmp_path, age_s=2.0, expire_s=60.0)
    with pytest.raises(LockTimeoutError, match=r"pid 4242 on elsewhere.*expires 5\d\.\d s from now"):
        TableLock(storage, wait_s=0.2, expire_s=0.5).acquire()  # a short expiry of the waiter's own does not count
    assert json.loads((tmp_path / LOCK_PATH).read_text())["owner_id"] == holder.owner_id


def test_a_lock_that_never_expires_says_so(storage, tmp_path):
    plant_lock(storage, tmp_path, age_s=3600, expire_s=0)
    with pytest.raises(LockTimeoutError, match=r"never expires.*deleting \.hoodie/\.aux/lock frees the table"):
        TableLock(storage, wait_s=0, expire_s=0.1).acquire()


def test_a_lock_file_labformat_did_not_write_expires_by_the_waiters_setting(storage, tmp_path):
    plant_lock(storage, tmp_path, age_s=2.0, expire_s=0, raw=b"garbage")
    with pytest.raises(LockTimeoutError, match="an unknown writer"):
        TableLock(storage, wait_s=0, expire_s=60).acquire()
    with TableLock(storage, wait_s=0, expire_s=1.0) as lock:
        assert lock.broken == [None]


def test_a_live_holder_refreshes_its_lock_so_it_never_expires(storage, tmp_path):
    with TableLock(storage, wait_s=0, expire_s=0.8):
        time.sleep(1.6)  # two expiry periods: without refreshes a waiter would break it
        with pytest.raises(LockTimeoutError):
            TableLock(storage, wait_s=0.3, expire_s=0.8).acquire()


def test_breaking_replaces_only_the_lock_judged_expired(storage, tmp_path):
    """Two waiters find the same lock expired; the first breaks it and takes the lock; the second,
    acting on what it read earlier, must not replace the first one's fresh lock."""
    expired = plant_lock(storage, tmp_path, age_s=5, expire_s=1)
    first = TableLock(storage, wait_s=0, expire_s=60).acquire()
    assert first.broken and first.broken[0].owner_id == expired.owner_id
    # What the second waiter read before the first one broke it:
    assert not storage.take_over(LOCK_PATH, expired.to_bytes(), b"late")
    assert json.loads((tmp_path / LOCK_PATH).read_text())["owner_id"] == first.owner.owner_id
    first.verify()
    first.release()
    assert not (tmp_path / LOCK_PATH).exists()


def test_a_holder_whose_lock_was_taken_over_finds_out_and_leaves_the_new_lock(storage, tmp_path):
    lock = TableLock(storage, wait_s=0, expire_s=60).acquire()
    os.remove(tmp_path / LOCK_PATH)  # broken as expired by another writer (this holder stalled) ...
    successor = plant_lock(storage, tmp_path, age_s=0, expire_s=60)  # ... which then took it
    with pytest.raises(ConcurrentWriteError, match="lost the table lock.*pid 4242"):
        lock.verify()
    lock.release()
    assert json.loads((tmp_path / LOCK_PATH).read_text())["owner_id"] == successor.owner_id


def test_threads_take_the_lock_one_at_a_time(storage):
    inside, overlaps, done = [], [], []

    def worker():
        for _ in range(5):
            with TableLock(storage, wait_s=30, expire_s=60):
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(1)
                time.sleep(0.005)
                inside.pop()
        done.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(done) == 4 and overlaps == []


def test_exclusive_create_refuses_a_file_system_with_no_exclusive_create(tmp_path):
    from labformat.errors import LabformatError

    from labformat.storage import FileSystemStorage, LocalStorage

    assert isinstance(Storage(f"file://{tmp_path}"), LocalStorage)  # file:///path is a local disk: writable
    storage = FileSystemStorage(f"file://{tmp_path}")  # as a table on a pyarrow file system neither local nor S3
    (tmp_path / "held").write_bytes(b"lock")
    for refused in (lambda: storage.create_exclusive("x", b""), lambda: storage.take_over("held", b"lock", b"mine"),
                    lambda: storage.touch("held")):
        with pytest.raises(LabformatError, match="needs a local disk or S3"):
            refused()
    assert not (tmp_path / "x").exists() and (tmp_path / "held").read_bytes() == b"lock"
    assert not storage.honours_conditional_writes()


# ---- heartbeats ------------------------------------------------------------------------------


def test_a_heartbeat_is_alive_while_it_beats_and_gone_after_stop(storage, tmp_path):
    beat = Heartbeat(storage, "20240115090000000", interval_s=0.1, tolerable_misses=4).start()
    time.sleep(0.8)  # past the tolerance: alive only because the thread keeps beating
    status = heartbeat_status(storage, "20240115090000000", interval_s=60, tolerable_misses=2)
    assert status.alive and status.tolerance_s == pytest.approx(0.5)  # the writer's settings, not the checker's
    assert status.pid == os.getpid()
    assert re.fullmatch(rf"heartbeat \d\.\d s ago, pid {os.getpid()} on .+", status.describe())
    beat.stop()
    assert not (tmp_path / heartbeat_path("20240115090000000")).exists()
    gone = heartbeat_status(storage, "20240115090000000", interval_s=60, tolerable_misses=2)
    assert not gone.alive and gone.age_s is None and gone.describe() == "no heartbeat"


def test_a_heartbeat_expires_after_interval_times_misses_plus_one(storage, tmp_path):
    beat = Heartbeat(storage, "20240115090000000", interval_s=0.1, tolerable_misses=2).start()
    beat._stop.set()  # the writer stalls or dies: no more beats, the file stays
    beat._thread.join()
    rel = tmp_path / heartbeat_path("20240115090000000")
    for age, alive in ((0.2, True), (0.35, False)):  # tolerance: 0.1 s x (2 + 1)
        past = time.time() - age
        os.utime(rel, (past, past))
        assert heartbeat_status(storage, "20240115090000000", interval_s=60, tolerable_misses=5).alive is alive


def test_a_heartbeat_file_without_the_writers_settings_is_judged_by_the_checkers(storage, tmp_path):
    rel = tmp_path / heartbeat_path("20240115090000000")
    rel.parent.mkdir(parents=True)
    rel.write_text("written by another tool")
    past = time.time() - 2
    os.utime(rel, (past, past))
    assert heartbeat_status(storage, "20240115090000000", interval_s=1, tolerable_misses=2).alive
    assert not heartbeat_status(storage, "20240115090000000", interval_s=0.5, tolerable_misses=2).alive


def test_a_deleted_heartbeat_is_not_brought_back(storage, tmp_path):
    beat = Heartbeat(storage, "20240115090000000", interval_s=0.02, tolerable_misses=1).start()
    os.remove(tmp_path / heartbeat_path("20240115090000000"))  # another writer rolled the instant back
    time.sleep(0.2)
    assert beat.lost and not (tmp_path / heartbeat_path("20240115090000000")).exists()
    beat.stop()


def test_heartbeats_of_instants_no_longer_pending_are_deleted(storage, tmp_path):
    for time_ in ("20240115090000000", "20240115090000001"):
        Heartbeat(storage, time_, interval_s=60, tolerable_misses=1).start()._stop.set()
    assert delete_heartbeats(storage, keep={"20240115090000001"}) == ["20240115090000000"]
    assert sorted(p.name for p in (tmp_path / HEARTBEAT_DIR).iterdir()) == ["20240115090000001"]
