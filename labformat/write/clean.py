"""Cleaning: Hudi's `clean` action deletes the file slices no retained instant needs, in one Spark job.

`run` plans on the driver from commit metadata alone (which slices the policy keeps, the rest
to delete: base files with their log files, and whole file groups clustering replaced), records
the plan in `<instant>.clean.requested` (Hudi's HoodieCleanerPlan fields), marks it inflight,
deletes the files in Spark tasks (executors delete; the driver gets back paths and sizes), then
publishes `<instant>.clean` (HoodieCleanMetadata's fields) through the write transaction.

The policies (`hoodie.cleaner.policy`), as Apache Hudi's CleanPlanner applies them:
- KEEP_LATEST_COMMITS: `earliestCommitToRetain` is the oldest of the last
  `hoodie.cleaner.commits.retained` completed writes (commits, delta commits, replacecommits). Each
  live file group keeps its latest slice, every slice whose base instant is at or after
  earliestCommitToRetain, and the latest slice whose base instant is before it (Hudi's
  `lastVersionBeforeEarliestCommitToRetain`); its older slices go, each base file with its log files.
  A file group clustering replaced goes whole once its replacecommit is before
  earliestCommitToRetain; one replaced at it or later stays. So the snapshot of the completed write
  just before earliestCommitToRetain stays whole too: per file group it reads the last slice before
  earliestCommitToRetain (no write lies between the two), and no group replaced before it. Hudi keeps
  it for the query that began on it and still runs while the N retained writes complete. labformat's
  earliest readable instant is that write: time travel to it, and an incremental range holding it,
  read; anything older is CleanedInstantError, whether or not a file of it is gone. Hudi's Spark
  reader (0.14.0 on, `TimelineUtils.validateTimestampAsOf`) refuses time travel before
  earliestCommitToRetain even so, this write included; hudi-rs reads it.
- KEEP_LATEST_FILE_VERSIONS keeps the newest `hoodie.cleaner.fileversions.retained` slices of each
  file group and no slice of a replaced one; the earliest readable instant is then computed: the
  oldest instant from which on every snapshot is whole.

The timeline files are JSON, as labformat's other instants; Hudi writes clean instants in Avro.
hudi-rs reads only commits, delta commits and replacecommits, so it skips them (as it skips
rollbacks) and lists what is left. A clean killed midway stays pending; the next clean's transaction
resumes it once its heartbeat has expired and finishes its plan (deleting a file twice is harmless).
Before all that, a clean deletes the files of instants a rollback named that outlived the rollback
(`Timeline.sweep_rolled_back`: a writer resumed after being rolled back, then killed).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any, Iterator

import pyarrow as pa

from labformat.config import WriteOptions
from labformat.context import TableContext
from labformat.fs_view import FileSystemView
from labformat.model.enums import CleanerPolicy, Operation
from labformat.model.file_group import FileGroup, FileSlice
from labformat.model.instant import Action, Instant, State
from labformat.model.report import CleanDetails, WriteReport
from labformat.spark.jobs import describe
from labformat.storage import Storage
from labformat.timeline import EARLIEST_READABLE_KEY, TIMELINE_DIR, Timeline
from labformat.write.operation import OperationRun, Plan, WriteOperation, execute
from labformat.spark.compat import default_parallelism, distribute
from labformat.spark.tasks import map_in_arrow
_DELETED_DDL = "path string, size_bytes long, deleted boolean"

SliceId = tuple[str, str, str]  # (partition path, file id, base instant time)


def _slice_id(s: FileSlice) -> SliceId:
    return (s.partition_path, s.file_id, s.base_instant_time)


def _files(s: FileSlice) -> list[str]:
    return [s.path, *s.log_paths]


def _all_slices(view: FileSystemView) -> list[FileSlice]:
    """Every slice the completed writes made, of live file groups and of replaced ones."""
    groups = view.file_groups() + [g for g, _ in view.replaced.values()]
    return [s for g in groups for s in g.slices.values()]


def _needed(timeline: Timeline, instant: str) -> set[SliceId]:
    return {_slice_id(s) for s in FileSystemView(timeline, instant).latest_file_slices()}


def _older_than_retained(group: FileGroup, earliest: str) -> list[FileSlice]:
    """KEEP_LATEST_COMMITS: the slices of a live file group a clean deletes, given earliestCommitToRetain:
    every one before it but the group's latest and the last before it (which the snapshot of the
    write just before `earliest` reads)."""
    times = sorted(group.slices, reverse=True)
    if not times:  # a log-only file group (never labformat's; hudi-rs skips it too): nothing to delete
        return []
    spared = {times[0], next((t for t in times if t < earliest), None)}
    return [group.slices[t] for t in times if t < earliest and t not in spared]


def plan_clean(timeline: Timeline, options: WriteOptions) -> tuple[list[FileSlice], str | None, str | None]:
    """(the file slices to delete, the earliest commit the policy retains, the earliest instant
    still readable after deleting them); nothing to delete: ([], ..., ...)."""
    writes = [i.time for i in timeline.completed_writes()]
    view = FileSystemView(timeline)
    gone_already = timeline.cleaned_paths()
    if options.cleaner_policy is CleanerPolicy.KEEP_LATEST_COMMITS:
        retained = options.cleaner_commits_retained
        if len(writes) <= retained:
            return [], None, None
        earliest = writes[-retained]
        doomed = [s for g in view.file_groups() for s in _older_than_retained(g, earliest)]
        doomed += [s for g, replaced_at in view.replaced.values() if replaced_at < earliest for s in g.slices.values()]
        return [s for s in doomed if s.path not in gone_already], earliest, writes[-retained - 1]
    everything = [s for s in _all_slices(view) if s.path not in gone_already]
    versions = options.cleaner_fileversions_retained
    keep: set[SliceId] = set()
    for group in view.file_groups():
        newest = sorted(group.slices, reverse=True)[:versions]
        keep.update((group.partition_path, group.file_id, t) for t in newest)
    doomed = [s for s in everything if _slice_id(s) not in keep]
    gone = {_slice_id(s) for s in doomed}
    readable = None
    for instant in reversed(writes):  # newest first: the first broken snapshot bounds what is readable
        if _needed(timeline, instant) & gone:
            break
        readable = instant
    return doomed, None, readable


def delete_files_task(batches: Iterator[pa.RecordBatch], base_uri: str) -> Iterator[pa.RecordBatch]:
    """A Spark task: delete each file it is given; its size first, so the report can say what was freed."""
    storage = Storage(base_uri)
    for batch in batches:
        out: dict[str, list[object]] = {"path": [], "size_bytes": [], "deleted": []}
        for path in batch.column("path").to_pylist():
            info = storage.fs.get_file_info(storage.full_path(path))
            size = info.size if info.size is not None else 0
            out["path"].append(path)
            out["size_bytes"].append(size)
            out["deleted"].append(storage.delete(path))
        yield pa.RecordBatch.from_pydict(out, schema=pa.schema([("path", pa.string()), ("size_bytes", pa.int64()),
                                                                 ("deleted", pa.bool_())]))


def delete_files(ctx: TableContext, paths: list[str]) -> list[tuple[str, int, bool]]:
    """Delete `paths` in one Spark job, spread over the executors; (path, bytes, deleted) per file."""
    if not paths:
        return []
    spark = ctx.spark
    tasks = max(1, min(len(paths), default_parallelism(spark)))
    frame = distribute(spark, [(p,) for p in paths], "path string", tasks)
    base_uri = ctx.storage.base_uri
    with describe(spark, "delete files"):
        rows = map_in_arrow(frame, lambda b: delete_files_task(b, base_uri), _DELETED_DDL).collect()
    return [(r.path, r.size_bytes, r.deleted) for r in rows]


def plan_body(doomed: list[FileSlice], storage: Storage, policy: CleanerPolicy, earliest: str | None,
               readable: str | None, last_write: str | None) -> dict[str, Any]:
    per_partition: dict[str, list[dict[str, Any]]] = {}
    for s in doomed:
        for path in _files(s):
            per_partition.setdefault(s.partition_path, []).append(
                {"filePath": storage.uri(path), "isBootstrapBaseFile": False})
    return {
        "earliestInstantToRetain": ({"timestamp": earliest, "action": "commit", "state": "COMPLETED"}
                                    if earliest else None),
        "lastCompletedCommitTimestamp": last_write or "",
        "policy": policy.value,
        "filePathsToBeDeletedPerPartition": per_partition,
        "partitionsToBeDeleted": [],
        "version": 2,
        EARLIEST_READABLE_KEY: readable,
        "labformat.paths": sorted(p for s in doomed for p in _files(s)),
    }


def _completed_body(plan: dict[str, Any], instant: str, results: list[tuple[str, int, bool]], started: float) -> str:
    by_partition: dict[str, dict[str, Any]] = {}
    for path, _, _ in results:
        partition = path.rsplit("/", 1)[0] if "/" in path else ""
        entry = by_partition.setdefault(partition, {
            "partitionPath": partition, "policy": plan["policy"], "deletePathPatterns": [],
            "successDeleteFiles": [], "failedDeleteFiles": [], "isPartitionDeleted": False})
        name = path.rsplit("/", 1)[-1]
        entry["deletePathPatterns"].append(name)
        # A file already gone (a killed clean's, deleted before it died) counts as deleted.
        entry["successDeleteFiles"].append(name)
    earliest = plan.get("earliestInstantToRetain") or {}
    return json.dumps({
        "startCleanTime": instant,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": len(results),
        "earliestCommitToRetain": earliest.get("timestamp") or "",
        "lastCompletedCommitTimestamp": plan.get("lastCompletedCommitTimestamp", ""),
        "partitionMetadata": by_partition,
        "version": 2,
        "bootstrapPartitionMetadata": {},
        EARLIEST_READABLE_KEY: plan.get(EARLIEST_READABLE_KEY),
    }, indent=2)


@dataclass
class CleanPlan(Plan):
    body: dict[str, Any] | None = None  # what `<instant>.clean.requested` holds (HoodieCleanerPlan's fields)
    details: CleanDetails | None = None


class Clean(WriteOperation[CleanPlan, tuple[str, int, bool]]):
    """Clean the table by the policy in its options (see the module docstring). Nothing to delete:
    instant None. Each dead clean's plan is finished first, by a `Clean` that resumes its instant."""

    kind = Operation.CLEAN
    write_step = "delete"

    def __init__(self, resume: tuple[Instant, dict[str, Any]] | None = None, finished: tuple[str, ...] = ()):
        self.resume = resume  # (a dead clean's pending instant, its plan): finish it, plan nothing new
        self.finished = finished  # the dead cleans finished just before this one (its report says so)

    def action(self, ctx: TableContext) -> Action:
        return Action.CLEAN

    def plan(self, run: OperationRun) -> CleanPlan:
        ctx, options = run.ctx, run.options
        if self.resume is not None:
            instant, body = self.resume
            return CleanPlan(resume=instant, body=body, details=_resumed_details(body))
        with run.step("plan"):
            doomed, earliest, readable = plan_clean(ctx.timeline, options)
        policy = options.cleaner_policy
        replaced = set(FileSystemView(ctx.timeline).replaced)
        details = CleanDetails(
            policy.value, options.cleaner_commits_retained if policy is CleanerPolicy.KEEP_LATEST_COMMITS
            else options.cleaner_fileversions_retained, earliest, readable, len(doomed),
            len({(s.partition_path, s.file_id) for s in doomed} & replaced), self.finished)
        latest = ctx.timeline.latest_completed_write()
        body = plan_body(doomed, ctx.storage, policy, earliest, readable, latest.time if latest else None)
        return CleanPlan(nothing_to_do=not doomed, requested=body, body=body, details=details)

    def write(self, run: OperationRun, plan: CleanPlan, instant: Instant | None) -> list[tuple[str, int, bool]]:
        assert plan.body is not None  # a plan with something to do (or a dead clean's) has its body
        self.started = time.monotonic()
        return delete_files(run.ctx, list(plan.body.get("labformat.paths") or []))

    def commit(self, run: OperationRun, plan: CleanPlan, written: list[tuple[str, int, bool]]) -> None:
        assert plan.body is not None and run.tx.instant is not None  # started (or resumed) for this plan
        run.tx.publish(_completed_body(plan.body, run.tx.instant.time, written, self.started))

    def report(self, run: OperationRun, plan: CleanPlan, written: list[tuple[str, int, bool]] | None,
               instant: str | None) -> WriteReport:
        assert plan.details is not None  # every plan has its details, even one with nothing to do
        deleted = [(b, d) for _, b, d in written or ()]
        details = replace(plan.details, files_deleted=sum(1 for _, d in deleted if d),
                          bytes_freed=sum(b for b, d in deleted if d))
        return run.report(instant, details=details)


def _resumed_details(body: dict[str, Any]) -> CleanDetails:
    earliest = (body.get("earliestInstantToRetain") or {}).get("timestamp")
    return CleanDetails(str(body.get("policy")), 0, earliest, body.get(EARLIEST_READABLE_KEY),
                        len(body.get("labformat.paths") or ()), 0)


def dead_cleans(ctx: TableContext) -> list[tuple[Instant, dict[str, Any]]]:
    """The pending cleans labformat planned (their JSON plans): the ones whose writers died are resumed
    (the transaction checks the heartbeat under the lock). Apache Hudi's own (Avro) plans are not
    labformat's to finish."""
    out: list[tuple[Instant, dict[str, Any]]] = []
    for pending in [i for i in ctx.timeline.pending() if i.action is Action.CLEAN]:
        try:
            body = json.loads(ctx.storage.read_bytes(f"{TIMELINE_DIR}/{pending.to(State.REQUESTED).file_name}"))
        except (ValueError, FileNotFoundError):
            continue
        if isinstance(body, dict):
            out.append((pending, body))
    return out


def clean(ctx: TableContext, options: WriteOptions) -> WriteReport:
    """`Table.clean`: delete what rolled-back instants left behind, finish the dead cleans, then clean
    by the policy."""
    # No instant, no lock: files of an instant a rollback named can never become part of the table
    # (its writer's commit is fenced), so deleting them races with nothing.
    ctx.timeline.fresh().sweep_rolled_back()
    finished = []
    for pending, body in dead_cleans(ctx):
        if execute(Clean(resume=(pending, body)), ctx, options).instant is not None:
            finished.append(pending.time)
    if finished:
        ctx = ctx.refreshed()
    return execute(Clean(finished=tuple(finished)), ctx, options)
