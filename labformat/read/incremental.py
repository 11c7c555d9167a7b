"""Incremental queries (`hoodie.datasource.query.type=incremental`): the latest version of each record a range of instants wrote.

The range is `(begin, end]` in instant times (Hudi's `hoodie.datasource.read.begin.instanttime`,
exclusive, and `...end.instanttime`, inclusive, the latest completed write by default). A record's
`_hoodie_commit_time` is the instant that last wrote it, so the records a range wrote are those
of the file groups its commits wrote, as of `end` (merge-on-read slices merged with their logs), whose
commit time lies in the range. File groups a clustering in the range created are read too (the
records it moved keep their commit times, so unchanged rows are filtered out, never shown as
changed). Deletes are not shown: a deleted record has no latest version.

A commit in the range older than what cleaning kept readable may have lost its files: the read is
then CleanedInstantError naming the earliest readable instant, unless
`hoodie.datasource.read.incr.fallback.fulltablescan.enable` is true, when every latest file slice
as of `end` is read and filtered by commit time (the plan says so).

Holes (`hoodie.read.timeline.holes.resolution.policy`, Hudi 0.14's): writers overlap, so a write
that started before the range's end may still be in flight, and it completes with its older instant
time. A consumer that kept `end` as its checkpoint would never read its rows. FAIL (the default)
refuses such a read (TimelineHoleError), BLOCK ends the range at the last completed write before the
oldest instant in flight, USE_TRANSITION_TIME ranges over completion times instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.context import TableContext
from labformat.errors import CleanedInstantError, ConfigError, CorruptTableError, TimelineHoleError
from labformat.fs_view import FileSystemView, check_base_files
from labformat.model.commit import CDC_FILES_KEY
from labformat.model.file_group import FileSlice
from labformat.model.instant import Action, Instant, State
from labformat.io.files import read_files
from labformat.read.merge_on_read import read_file_slices
from labformat.model.enums import HolesPolicy, IncrementalFormat
from labformat.schema import COMMIT_TIME, PARTITION_PATH, RECORD_KEY
from labformat.storage import Storage
from labformat.timeline import CDC_DIR, TIMELINE_DIR

# A begin before every instant: the whole history.
EARLIEST = "000"
# A CDC query's rows: Hudi's columns (op i/u/d, the commit's time in ms, the images as JSON), then the
# record's key and partition path.
CDC_SCHEMA = T.StructType([T.StructField("op", T.StringType()), T.StructField("ts_ms", T.LongType()),
                           T.StructField("before", T.StringType()), T.StructField("after", T.StringType()),
                           T.StructField(RECORD_KEY, T.StringType()), T.StructField(PARTITION_PATH, T.StringType())])


def change_files(ctx: TableContext, commits: tuple[str, ...]) -> list[str]:
    """The change-record files (`write/cdc.py`) of these commits: the ones each commit lists; for a
    commit written before commits listed them, every file under its instant's name."""
    listed, unlisted = [], set()
    by_time = {i.time: i for i in ctx.timeline.completed_writes()}
    for time in commits:
        entry = ctx.timeline.commit_metadata(by_time[time]).extra_metadata.get(CDC_FILES_KEY)
        if entry is None:
            unlisted.add(time)
        else:
            listed.extend(json.loads(entry))
    if unlisted:
        for info in ctx.storage.list(CDC_DIR):
            leaf = info.path.rsplit("/", 1)[-1]
            if leaf.endswith(".parquet") and not leaf.startswith(".") and leaf.split(".", 1)[0] in unlisted:
                listed.append(info.path)
    return sorted(listed)


@dataclass(frozen=True)
class IncrementalPlan:
    """What an incremental query reads: its range, the commits in it, the file slices it opens."""

    begin: str
    end: str | None  # None: the table has no completed write
    commits: tuple[str, ...]  # completed writes with begin < time <= end
    file_slices: tuple[FileSlice, ...]  # what the read opens
    files_in_snapshot: int  # file slices of the snapshot as of `end`
    fallback: str | None = None  # why the whole snapshot is read, when it is
    by_completion: bool = False  # USE_TRANSITION_TIME: begin and end are completion times
    ctx: TableContext | None = field(default=None, repr=False, compare=False)
    schema: T.StructType | None = field(default=None, repr=False, compare=False)

    @property
    def files_read(self) -> int:
        return len(self.file_slices)

    def to_dataframe(self, incremental_format: IncrementalFormat = IncrementalFormat.LATEST_STATE) -> DataFrame:
        """The records (meta columns first), lazily; with `cdc`, the change records of the range's
        commits instead (CDC_SCHEMA, by `ts_ms`)."""
        ctx, schema = self.ctx, self.schema or T.StructType([])
        assert ctx is not None  # every plan `plan_incremental` makes carries its table
        if incremental_format is IncrementalFormat.CDC:
            return self._changes()
        rows = read_file_slices(ctx.spark, ctx.storage, self.file_slices, schema, ctx.config.precombine_field,
                                ctx.config.merge_mode)
        if self.end is None:
            return rows.limit(0)
        if self.by_completion:
            return rows.where(F.col(COMMIT_TIME).isin(list(self.commits)))
        return rows.where((F.col(COMMIT_TIME) > F.lit(self.begin)) & (F.col(COMMIT_TIME) <= F.lit(self.end)))

    def _changes(self) -> DataFrame:
        ctx = self.ctx
        assert ctx is not None  # as in `to_dataframe`
        if not ctx.config.cdc_enabled:
            raise ConfigError("hoodie.datasource.query.incremental.format=cdc needs a table created with "
                              "hoodie.table.cdc.enabled=true: this one records no changes")
        if self.fallback:
            raise CleanedInstantError(f"{self.fallback}: a CDC query has no full-scan fallback (the changes of "
                                      "cleaned commits are gone with them)")
        files = change_files(ctx, self.commits)
        present = {info.path for info in ctx.storage.list(CDC_DIR)} if files else set()
        missing = [f for f in files if f not in present]
        if missing:
            # Checked here, on the driver: in a task it would be Spark's error in the caller's action.
            raise CorruptTableError(f"change-record file {missing[0]} that its commit lists is missing "
                                    f"({len(missing)} of {len(files)} missing): the changes of the range cannot "
                                    "be read whole")
        if not files:
            return ctx.spark.createDataFrame([], CDC_SCHEMA)
        return read_files(ctx.spark, ctx.storage.base_uri, files, CDC_SCHEMA)


def plan_incremental(ctx: TableContext, begin: str | None, end: str | None = None,
                     fallback_full_scan: bool = False, holes: HolesPolicy = HolesPolicy.FAIL) -> IncrementalPlan:
    """Plan the incremental query of `(begin, end]` (see the module's docstring); no Spark job."""
    if begin is None:
        raise ConfigError("an incremental query needs hoodie.datasource.read.begin.instanttime (the instant it "
                          f"starts after; {EARLIEST!r} for the whole history)")
    timeline = ctx.timeline
    if holes is HolesPolicy.USE_TRANSITION_TIME:
        return _plan_by_completion(ctx, begin, end, fallback_full_scan)
    writes = timeline.completed_writes()
    if end is None:
        end_instant: Instant | None = writes[-1] if writes else None
    else:
        end_instant = next((i for i in writes if i.time == end), None)
        if end_instant is None:
            # Hudi takes any time as the end: the latest completed write at or before it.
            earlier = [i for i in writes if i.time <= end]
            end_instant = earlier[-1] if earlier else None
    hole = oldest_hole(ctx)
    if hole is not None and end_instant is not None and end_instant.time > hole:
        if holes is HolesPolicy.FAIL:
            raise TimelineHoleError(
                f"instant {hole} is still in flight and the incremental range ({begin}, {end_instant.time}] ends past "
                f"it: when it completes, its rows carry commit time {hole}, behind a checkpoint at "
                f"{end_instant.time}, and a consumer reading on from there would never see them. Read up to an end "
                f"before {hole}, or set hoodie.read.timeline.holes.resolution.policy to BLOCK (the range ends "
                "before it) or USE_TRANSITION_TIME (ranges by completion time); a dead writer's instant stays "
                "in flight until the next writer rolls it back", pending=hole, end=end_instant.time)
        earlier = [i for i in writes if i.time < hole]
        if not earlier or earlier[-1].time <= begin:
            # Nothing completed between the checkpoint and the hole: nothing to read, and the checkpoint
            # stays where it was (never None, never older than `begin`).
            return IncrementalPlan(begin, begin, (), (), 0, ctx=ctx)
        end_instant = earlier[-1]
    if end_instant is None or begin >= end_instant.time:
        return IncrementalPlan(begin, end_instant.time if end_instant else None, (), (), 0, ctx=ctx)
    commits = [i for i in writes if begin < i.time <= end_instant.time]
    view = ctx.file_system_view(end_instant)
    return _plan(ctx, begin, end_instant.time, commits, view, fallback_full_scan, ctx.schema(end_instant))


def oldest_hole(ctx: TableContext) -> str | None:
    """The oldest instant in flight whose records will carry its own commit time, or None. Clustering
    (a replacecommit whose plan is a clustering plan) and compaction only move records, which keep
    their commit times, so they leave no hole (Hudi's rule too)."""
    for instant in ctx.timeline.pending():
        if instant.action not in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT):
            continue
        if instant.action is Action.REPLACE_COMMIT and _is_clustering(ctx.storage, instant):
            continue
        return instant.time
    return None


def _is_clustering(storage: Storage, instant: Instant) -> bool:
    try:
        plan = json.loads(storage.read_bytes(f"{TIMELINE_DIR}/{instant.to(State.REQUESTED).file_name}") or b"{}")
    except (OSError, ValueError):
        return False  # unreadable: a hole, to be safe
    return isinstance(plan, dict) and bool(plan.get("clusteringPlan"))


def _plan_by_completion(ctx: TableContext, begin: str, end: str | None, fallback_full_scan: bool) -> IncrementalPlan:
    """USE_TRANSITION_TIME: the commits that completed in `(begin, end]`, read as the table stood once
    the last of them had completed; `end` is that completion time. A write in flight completes later
    than every commit before it, so a checkpoint at `end` never skips it."""
    timeline = ctx.timeline
    by_completion = [(timeline.completion_time(i), i) for i in timeline.completed_writes_by_completion()]
    done = [(t, i) for t, i in by_completion if end is None or t <= end]
    if not done or begin >= done[-1][0]:
        return IncrementalPlan(begin, done[-1][0] if done else None, (), (), 0, ctx=ctx, by_completion=True)
    end_time = done[-1][0]
    commits = [i for t, i in done if t > begin]
    writes = [i for _, i in done]
    view = FileSystemView(timeline, writes=writes)
    return _plan(ctx, begin, end_time, commits, view, fallback_full_scan, ctx.schema(max(writes)),
                 by_completion=True)


def _plan(ctx: TableContext, begin: str, end: str, commits: list[Instant], view: FileSystemView,
          fallback_full_scan: bool, schema: T.StructType | None, by_completion: bool = False) -> IncrementalPlan:
    timeline = ctx.timeline
    snapshot = view.latest_file_slices()
    readable, clean = timeline.readable_from()
    cleaned = [c.time for c in commits if readable is not None and c.time < readable]
    fallback = None
    if cleaned:
        assert readable is not None  # `cleaned` holds the commits older than it
        if not fallback_full_scan or max(c.time for c in commits) < readable:
            raise CleanedInstantError(
                f"the incremental range ({begin}, {end}] holds commit {cleaned[0]}, older than what "
                f"cleaning kept (clean {clean}): its files may be gone; the earliest instant still readable is "
                f"{readable}: begin at or after it, or set "
                "hoodie.datasource.read.incr.fallback.fulltablescan.enable=true to scan the whole table instead")
        fallback = f"commit {cleaned[0]} in the range is older than what cleaning kept ({readable}): full table scan"
    if fallback:
        chosen = snapshot
    else:
        written: set[tuple[str, str]] = set()
        for commit in commits:
            metadata = timeline.commit_metadata(commit)
            written.update((w.partition_path, w.file_id) for w in metadata.write_stats)
        chosen = [s for s in snapshot if (s.partition_path, s.file_id) in written]
    check_base_files(ctx.storage, chosen)
    return IncrementalPlan(begin, end, tuple(c.time for c in commits), tuple(chosen), len(snapshot),
                           fallback, ctx=ctx, schema=schema, by_completion=by_completion)
