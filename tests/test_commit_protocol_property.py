"""Issue 48: the commit protocol under random interleavings of two writer processes, checked against a model and hudi-rs.

Each example runs two real writers (`tests.concurrent_writer`, each its own `local[1]` Spark
session) on a 20-row table, in single-writer or OCC mode. Writer A is held at one pause point of
the protocol (`labformat/hooks.py`), possibly frozen there (SIGSTOP: its lock refresher and
heartbeat stop too) past its lock's and heartbeat's expiry; writer B then starts and is held at
its own pause point, or runs to its end; then the two are let go, one after the other, in a chosen
order. Both write the same file group (A: ids 15-24, B: ids 18-27, updates and new keys), so at
most one of two overlapping writes may commit.

What must hold, whatever the schedule:
- each writer ends in success or a ConcurrentWriteError (its subclasses included), never a raw error;
- the completed writes are the base, the writers that reported success, and the janitor's write
  (a last writer that rolls back whatever a failed writer could not), nothing else;
- the table equals the model: the base rows, then each successful write's rows applied in the
  order the writes completed; our reader and hudi-rs both return it, and no key twice;
- no instant is left pending, and no file of an instant that did not complete is left in the table.

Few examples (each starts two JVMs): `LABFORMAT_PROPERTY_EXAMPLES` asks for more.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import labformat as lf
from tests.helpers import hudi_snapshot, telemetry
from tests.test_concurrency import WriterProcess, updates

pytestmark = [pytest.mark.spark, pytest.mark.slow]

POINTS = ("after_requested", "after_start", "after_write", "before_publish", "after_commit")
# Short expiries so that a frozen writer is outwaited in about a second; lock waits short enough
# that a writer blocked behind a held writer gives up (LockTimeoutError) instead of stalling the test.
TIMING = {"lock_expire_minutes": 0.03, "heartbeat_interval_ms": 200, "heartbeat_tolerable_misses": 2,
          "hoodie.write.lock.wait_time_ms": 4000}
TOLERANCE_S = 0.6  # heartbeat: 200 ms x (2 + 1)
LOCK_EXPIRY_S = 1.8
BASE = {i: i * 0.5 for i in range(20)}
WRITES = {"a": (15, 10, 1000.0), "b": (18, 10, 2000.0)}  # (first id, rows, battery)


@dataclass(frozen=True)
class Schedule:
    occ: bool
    a_at: str  # where A is held
    a_frozen: bool  # SIGSTOP while held, until its lock and heartbeat expired
    b_at: str | None  # where B is held; None: B runs to its end before A goes on
    a_first: bool  # which of the two held writers is let go first


SCHEDULES = st.builds(Schedule, st.booleans(), st.sampled_from(POINTS), st.booleans(),
                      st.one_of(st.none(), st.sampled_from(POINTS)), st.booleans())


def _spec(name: str, occ: bool) -> dict:
    start, n, battery = WRITES[name]
    mode = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"} if occ else {}
    return {"n": n, "start": start, "battery": battery, "options": {**TIMING, **mode}}


def _paused_or_done(writer: WriterProcess, point: str, timeout_s: float = 600) -> bool:
    """True once `writer` is held at `point`; False when it ended first (refused, or its lock wait ran out)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (writer.pause_dir / f"{point}.reached").exists():
            return True
        if writer.proc.poll() is not None:
            return False
        time.sleep(0.05)
    pytest.fail(f"writer neither reached {point} nor ended in {timeout_s} s")


def _outcome(writer: WriterProcess) -> dict:
    out, err = writer.proc.communicate(timeout=240)
    assert writer.proc.returncode == 0, f"exit {writer.proc.returncode}:\n{out}\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def _resume(writer: WriterProcess, point: str, frozen: bool) -> None:
    writer.go(point)
    if frozen:
        os.kill(writer.proc.pid, signal.SIGCONT)


def run_schedule(spark, workdir: Path, s: Schedule) -> None:
    path = workdir / "t"
    a = WriterProcess(workdir, path, "upsert", _spec("a", s.occ), pause_at=s.a_at)
    b = WriterProcess(workdir, path, "upsert", _spec("b", s.occ), pause_at=s.b_at)
    try:
        t = lf.Table.create(spark, path)
        t.bulk_insert(telemetry(spark, 20, partitions=1))
        a.begin()
        a.wait_paused(s.a_at, timeout_s=600)  # a JVM's start on a loaded machine took 2.5 min
        if s.a_frozen:
            os.kill(a.proc.pid, signal.SIGSTOP)
            time.sleep(TOLERANCE_S + 0.4)  # B's start then finds A's heartbeat expired (its lock expires while B waits)
        b.begin()
        b_held = s.b_at is not None and _paused_or_done(b, s.b_at)
        outcomes = {}
        if not b_held:
            outcomes["b"] = _outcome(b)
        order = ["a", "b"] if s.a_first or not b_held else ["b", "a"]
        for name in order:
            if name == "a":
                _resume(a, s.a_at, s.a_frozen)
                outcomes["a"] = _outcome(a)
            elif b_held:
                b.go(s.b_at)
                outcomes["b"] = _outcome(b)
    finally:
        for w in (a, b):
            if w.proc.poll() is None:
                os.kill(w.proc.pid, signal.SIGCONT)
                w.proc.kill()
                w.proc.wait()
    note(f"outcomes: {outcomes}")
    check_against_model(spark, t, path, outcomes)


def check_against_model(spark, t, path: Path, outcomes: dict) -> None:
    for name, outcome in outcomes.items():
        assert "error" not in outcome or outcome["error"] in (
            "ConcurrentWriteError", "WriteConflictError", "LockTimeoutError"), (name, outcome)
    succeeded = {o["instant"]: name for name, o in outcomes.items() if "error" not in o}

    # A last writer after the heartbeats expired: it rolls back whatever a failed writer could not
    # (its own rollback may have met the other writer's lock), and sweeps what rollbacks left behind.
    time.sleep(TOLERANCE_S + 0.2)
    janitor = t.upsert(updates(spark, range(0, 1), -1.0))

    timeline = t.active_timeline
    assert timeline.pending() == [], timeline.pending()
    completed = [i.time for i in timeline.completed_writes_by_completion()]
    assert completed[1:] == [i for i in completed[1:-1] if i in succeeded] + [janitor.instant]
    assert set(succeeded) <= set(completed), (succeeded, completed)
    assert not (timeline.rolled_back_times() & set(completed)), "a rolled-back instant completed"

    model = dict(BASE)
    for instant in completed[1:-1]:
        start, n, battery = WRITES[succeeded[instant]]
        model.update({i: battery for i in range(start, start + n)})
    model[0] = -1.0
    ours = t.read().select("signal_dbm", "battery_pct").collect()
    assert len(ours) == len({r.signal_dbm for r in ours}), "a key stored twice"
    assert {r.signal_dbm: r.battery_pct for r in ours} == model
    theirs = hudi_snapshot(path)
    assert len(theirs) == len(model), "hudi-rs reads a row twice or an uncommitted file"
    assert dict(zip(theirs["signal_dbm"].astype(int), theirs["battery_pct"].astype(float))) == model
    alive = set(completed)
    strays = [p for p in path.rglob("*.parquet") if ".hoodie" not in p.parts and p.stem.rsplit("_", 1)[-1] not in alive]
    assert strays == [], strays


@settings(max_examples=int(os.environ.get("LABFORMAT_PROPERTY_EXAMPLES", "3")), deadline=None,
          derandomize="LABFORMAT_PROPERTY_EXAMPLES" not in os.environ, database=None,
          suppress_health_check=list(HealthCheck), phases=("explicit", "generate"))
@given(schedule=SCHEDULES)
def test_two_writers_held_and_frozen_at_any_point_keep_the_table_right(spark, schedule):
    note(repr(schedule))
    with tempfile.TemporaryDirectory(prefix="lf-property-") as workdir:
        run_schedule(spark, Path(workdir), schedule)
