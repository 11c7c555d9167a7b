"""Cleaning: Hudi's `clean` action deletes the file slices no retained instant needs, in one Spark job.

`run` plans on the driver from commit metadata alone (which slices the policy keeps, the rest
to delete: base files with their log files, and whole file groups clustering replaced), records
the plan in `<instant>.clean.requested` (Hudi's HoodieCleanerPlan fields), marks it inflight,
deletes the files in Spark tasks (executors delete; the driver gets back paths and sizes), then
publishes `<instant>.clean` (HoodieCleanMetadata's fields) through the write transaction.

The policies (`hoodie.cleaner.policy`):
- KEEP_LATEST_COMMITS keeps, for each of the last `hoodie.cleaner.commits.retained` completed
  writes, the file slices its snapshot reads; the oldest of them is `earliestCommitToRetain`,
  and time travel to anything older is CleanedInstantError, whether or not a file of it is gone.
- KEEP_LATEST_FILE_VERSIONS keeps the newest `hoodie.cleaner.fileversions.retained` slices of each
  file group and no slice of a replaced one; the earliest readable instant is then computed: the
  oldest instant from which on every snapshot is whole.

The timeline files are JSON, as labformat's other instants; Hudi writes clean instants in Avro.
hudi-rs reads only commits, delta commits and replacecommits, so it skips them (as it skips
rollbacks) and lists what is left. A clean killed midway stays pending; the next clean finishes
its plan once its heartbeat has expired (deleting a file twice is harmless).
"""

from __future__ import annotations

import json
import time
from typing import Iterator

import pyarrow as pa

from labformat.config import Config
from labformat.context import TableContext
from labformat.fs_view import FileSystemView
from labformat.heartbeat import heartbeat_status
from labformat.lock import TableLock
from labformat.model.file_group import FileSlice
from labformat.model.instant import Action, State
from labformat.model.report import WriteReport
from labformat.spark.jobs import StepRecorder, describe
from labformat.storage import Storage
from labformat.timeline import EARLIEST_READABLE_KEY, TIMELINE_DIR, Timeline
from labformat.write.transaction import WriteTransaction

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
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


def plan_clean(timeline: Timeline, cfg: Config) -> tuple[list[FileSlice], str | None, str | None]:
    """(the file slices to delete, the earliest commit the policy retains, the earliest instant
    still readable after deleting them); nothing to delete: ([], ..., ...)."""
    writes = [i.time for i in timeline.completed_writes()]
    view = FileSystemView(timeline)
    gone_already = timeline.cleaned_paths()
    everything = [s for s in _all_slices(view) if s.path not in gone_already]
    if cfg.cleaner_policy == KEEP_LATEST_COMMITS:
        retained = cfg.cleaner_commits_retained
        if len(writes) <= retained:
            return [], None, None
        kept_instants = writes[-retained:]
        keep: set[SliceId] = set()
        for instant in kept_instants:
            keep |= _needed(timeline, instant)
        doomed = [s for s in everything if _slice_id(s) not in keep]
        return doomed, kept_instants[0], kept_instants[0]
    versions = cfg.cleaner_fileversions_retained
    keep = set()
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
        out = {"path": [], "size_bytes": [], "deleted": []}
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
    tasks = max(1, min(len(paths), spark.sparkContext.defaultParallelism))
    frame = spark.createDataFrame(spark.sparkContext.parallelize([(p,) for p in paths], tasks), "path string")
    base_uri = ctx.storage.base_uri
    with describe(spark, "delete files"):
        rows = frame.mapInArrow(lambda b: delete_files_task(b, base_uri), _DELETED_DDL).collect()
    return [(r.path, r.size_bytes, r.deleted) for r in rows]


def plan_body(doomed: list[FileSlice], storage: Storage, policy: str, earliest: str | None,
               readable: str | None, last_write: str | None) -> dict:
    per_partition: dict[str, list[dict]] = {}
    for s in doomed:
        for path in _files(s):
            per_partition.setdefault(s.partition_path, []).append(
                {"filePath": storage.uri(path), "isBootstrapBaseFile": False})
    return {
        "earliestInstantToRetain": ({"timestamp": earliest, "action": "commit", "state": "COMPLETED"}
                                    if earliest else None),
        "lastCompletedCommitTimestamp": last_write or "",
        "policy": policy,
        "filePathsToBeDeletedPerPartition": per_partition,
        "partitionsToBeDeleted": [],
        "version": 2,
        EARLIEST_READABLE_KEY: readable,
        "labformat.paths": sorted(p for s in doomed for p in _files(s)),
    }


def _completed_body(plan: dict, instant: str, results: list[tuple[str, int, bool]], started: float) -> str:
    by_partition: dict[str, dict] = {}
    for path, _, deleted in results:
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


def finish_dead_cleans(ctx: TableContext, cfg: Config) -> list[str]:
    """Complete the pending cleans whose writers died (heartbeat expired): run their plans again and
    publish them. A clean is never rolled back: files it deleted cannot come back, and its plan
    deletes only what no retained instant reads."""
    finished = []
    interval_s, misses = cfg.heartbeat_interval_ms / 1000, cfg.heartbeat_tolerable_misses
    for pending in [i for i in ctx.timeline.pending() if i.action is Action.CLEAN]:
        if heartbeat_status(ctx.storage, pending.time, interval_s, misses).alive:
            continue
        started = time.monotonic()
        try:
            plan = json.loads(ctx.storage.read_bytes(f"{TIMELINE_DIR}/{pending.to(State.REQUESTED).file_name}"))
        except (ValueError, FileNotFoundError):
            continue  # Apache Hudi's own (Avro) plan, or none: not labformat's to finish
        if not isinstance(plan, dict):
            continue
        results = delete_files(ctx, list(plan.get("labformat.paths") or []))
        with TableLock(ctx.storage, wait_s=cfg.lock_wait_time_ms / 1000, expire_s=cfg.lock_expire_minutes * 60):
            timeline = ctx.timeline.fresh()
            if any(i.time == pending.time and i.action is Action.CLEAN for i in timeline.pending()):
                inflight = pending.to(State.INFLIGHT)
                if pending.state is State.REQUESTED:
                    inflight = timeline.to_inflight(pending)
                timeline.complete(inflight, _completed_body(plan, pending.time, results, started))
                finished.append(pending.time)
    return finished


def run(ctx: TableContext, cfg: Config) -> WriteReport:
    """Clean the table by the policy in `cfg` (see the module docstring). Nothing to delete: instant None."""
    steps = StepRecorder(ctx.spark)
    finished = finish_dead_cleans(ctx, cfg)
    if finished:
        ctx = TableContext(ctx.spark, ctx.storage, ctx.config, ctx.timeline.fresh())
    with WriteTransaction(ctx, "clean", Action.CLEAN, options=cfg) as tx:
        with steps.step("plan"):
            doomed, earliest, readable = plan_clean(ctx.timeline, cfg)
        details = {"policy": cfg.cleaner_policy,
                   "retained": (cfg.cleaner_commits_retained if cfg.cleaner_policy == KEEP_LATEST_COMMITS
                                else cfg.cleaner_fileversions_retained),
                   "earliest_commit_to_retain": earliest, "earliest_readable_instant": readable,
                   "file_slices_deleted": len(doomed),
                   "replaced_file_groups_deleted": len({(s.partition_path, s.file_id) for s in doomed} &
                                                       set(FileSystemView(ctx.timeline).replaced)),
                   "finished_dead_cleans": finished}
        if not doomed:
            return tx.abandon(steps=tuple(steps.steps), options=dict(cfg),
                              details={**details, "files_deleted": 0, "bytes_freed": 0})
        latest = ctx.timeline.latest_completed_write()
        plan = plan_body(doomed, ctx.storage, cfg.cleaner_policy, earliest, readable,
                          latest.time if latest else None)
        started = time.monotonic()
        with steps.step("start_instant"):
            instant = tx.start(plan=plan)
        with steps.step("delete"):
            results = delete_files(ctx, plan["labformat.paths"])
        with steps.step("commit"):
            tx.publish(_completed_body(plan, instant.time, results, started))
    details.update(files_deleted=sum(1 for _, _, d in results if d), bytes_freed=sum(b for _, b, d in results if d))
    return WriteReport("clean", instant.time, rows_in=0, rows_written=0, rows_inserted=0, steps=tuple(steps.steps),
                       options=dict(cfg), rolled_back=tx.rolled_back, details=details)

