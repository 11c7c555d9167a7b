"""Two writers on one table in one kernel: the concurrent-writers notebook's race, ordered exactly, and what each writer saw."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Mapping

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import labformat as lf
from labformat import datasets, hooks
from labformat.model.instant import parse_instant_time
from labformat.model.enums import ConcurrencyMode

# Where writer A is held: its plan made and its instant inflight, nothing written yet.
HOLD_POINT = "after_start"
# A race whose first writer never reaches its hold point within this is a bug, not a slow laptop.
HOLD_LIMIT_S = 300.0
OCC = {"hoodie.write.concurrency.mode": ConcurrencyMode.OPTIMISTIC_CONCURRENCY_CONTROL}
SINGLE_WRITER = {"hoodie.write.concurrency.mode": ConcurrencyMode.SINGLE_WRITER}


@dataclass(frozen=True)
class WriterRun:
    """One writer's part in a race: what it was told to do, how it ended, and when (seconds since the race began)."""

    writer: str  # "A" (started first, held once inflight) or "B" (ran while A was held)
    outcome: str  # "committed", or the LabformatError it ended with
    instant: str | None  # the instant it committed, or the one a conflict rolled back; None if it never started one
    rows_updated: int
    file_groups: tuple[str, ...]  # the file groups it wrote a new slice of (committed writes only)
    message: str  # the error's message, "" for a commit
    began_s: float
    inflight_s: float | None  # when its instant became inflight (A: when it was held)
    released_s: float | None  # A only: when B had finished and A went on
    ended_s: float


def hour_prefixes(spec: datasets.DatasetSpec, day: int, first_hour: int, hours: int = 1) -> list[str]:
    """The record-key prefixes (`YYYYMMDDHH`) of `hours` hours of history day `day` (0 = the first), from `first_hour`."""
    date = spec.start_date + timedelta(days=day)
    return [f"{date:%Y%m%d}{h:02d}" for h in range(first_hour, first_hour + hours)]


def corrections(table: lf.Table, hours: list[str], battery_pct: float) -> DataFrame:
    """Corrected readings of the hours `hours` (key prefixes, see `hour_prefixes`): `battery_pct`
    replaced, `updated_at` one minute later so each row wins over the stored one. Read by Spark
    from the table, never collected."""
    return (table.read()
            .where(F.substring(datasets.RECORD_KEY, 1, 10).isin(hours))
            .select(*table.schema().fieldNames())
            .withColumn("battery_pct", F.lit(float(battery_pct)))
            .withColumn(datasets.PRECOMBINE_FIELD, F.col(datasets.PRECOMBINE_FIELD) + F.expr("INTERVAL 1 MINUTE")))


def rows_with(table: lf.Table, battery_pct: float) -> int:
    """How many rows of the table's latest snapshot carry this battery reading (a Spark count)."""
    return table.read().where(F.col("battery_pct") == float(battery_pct)).count()


def race(table: lf.Table, first: DataFrame, second: DataFrame,
         options: Mapping[str, Any] | None = None) -> list[WriterRun]:
    """Writer A upserts `first` in a thread of its own and is held once its instant is inflight
    (its plan made on the table as it was then); writer B upserts `second` from start to end;
    then A goes on, writes and tries to commit. Both use `options` (the concurrency mode).

    The order is fixed by a gate, not by timing, so every run of the race is the same race.
    """
    options = dict(options or {})
    began = time.time()
    gate = hooks.Gate(HOLD_POINT)
    a: dict[str, Any] = {}

    def writer_a() -> None:
        with hooks.holding(gate):
            a["outcome"] = _attempt(table, first, options)
        a["ended"] = time.time()

    thread = threading.Thread(target=writer_a, name="labformat-writer-A", daemon=True)
    thread.start()
    while not gate.reached.wait(0.05):
        if not thread.is_alive():  # A ended before its instant started (an error, or nothing to write)
            break
        if time.time() - began > HOLD_LIMIT_S:
            gate.go.set()
            raise RuntimeError(f"writer A did not reach {HOLD_POINT} within {HOLD_LIMIT_S:g} s")
    held = gate.reached.is_set()
    a["held"] = time.time() if held else None
    b_began = time.time()
    b = _attempt(table, second, options)
    released = time.time()
    gate.go.set()
    thread.join()
    return [
        _run("A", a["outcome"], began, began, released if held else None, a["ended"], held_at=a["held"]),
        _run("B", b, began, b_began, None, released),
    ]


def _attempt(table: lf.Table, df: DataFrame, options: dict) -> lf.WriteReport | lf.LabformatError:
    """One writer's upsert, through its own handle on the table; its LabformatError is the outcome, not a failure."""
    try:
        return lf.Table.open(table.spark, table.path).upsert(df, options)
    except lf.LabformatError as exc:
        return exc


def _run(writer: str, outcome, race_began: float, began: float, released: float | None, ended: float,
         held_at: float | None = None) -> WriterRun:
    """A WriterRun from an outcome; times as seconds since the race began. A held writer's instant
    went inflight when it reached the gate; another's, at its instant time (UTC wall clock, in ms)."""
    instant = outcome.instant if isinstance(outcome, lf.WriteReport) else getattr(outcome, "instant", None)
    relative = lambda t: None if t is None else round(t - race_began, 3)  # noqa: E731
    if held_at is not None:
        inflight = relative(held_at)
    else:
        inflight = relative(parse_instant_time(instant).timestamp()) if instant else None
    if isinstance(outcome, lf.WriteReport):
        groups = tuple(sorted({f.file_id for f in outcome.files}))
        return WriterRun(writer, "committed" if outcome.instant else "nothing to commit", outcome.instant,
                         outcome.rows_updated, groups, "", relative(began), inflight, relative(released),
                         relative(ended))
    return WriterRun(writer, type(outcome).__name__, instant, 0, (), str(outcome), relative(began), inflight,
                     relative(released), relative(ended))


def race_frame(runs: list[WriterRun], files: pd.DataFrame) -> pd.DataFrame:
    """The race as a table, one row per writer; file groups named by their place in key order in
    `files` (`frames.footers_frame` of the table before the race), since their ids are random."""
    place = {fid: f"file {i}" for i, fid in enumerate(files["file_id"])}
    return pd.DataFrame([{
        "writer": r.writer, "outcome": r.outcome, "rows updated": r.rows_updated,
        "file groups written": ", ".join(place.get(g, "a new file group") for g in r.file_groups) or "-",
    } for r in runs])


def race_timeline(runs: list[WriterRun]) -> pd.DataFrame:
    """What `viz.plot_race` draws, in numbers: per writer, seconds since the race began when it started,
    when its instant went inflight (A: when it was held), when it was let go (A only) and when it
    ended, and how."""
    return pd.DataFrame([{"writer": r.writer, "began_s": r.began_s, "inflight_s": r.inflight_s,
                          "held_until_s": r.released_s, "ended_s": r.ended_s, "outcome": r.outcome}
                         for r in runs]).set_index("writer")


def file_groups_holding(files: pd.DataFrame, hours: list[str]) -> list[str]:
    """The file groups (rows of `frames.footers_frame`) whose key range overlaps one of `hours`
    (key prefixes): those an upsert of readings of those hours rewrites (footers only)."""
    held = set()
    for hour in hours:
        low, high = f"{hour}00", f"{hour}59\uffff"  # every key of the hour: YYYYMMDDHHmm_droneID
        held.update(files.loc[(files["min_key"] <= high) & (files["max_key"] >= low), "file_id"])
    return sorted(held)
