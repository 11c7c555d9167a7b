"""The write transaction: an operation's instant through Hudi's commit protocol; only it locks the table or completes instants."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Callable, Literal, Sequence

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from labformat import config as C
from labformat import markers
from labformat.hooks import crash_point
from labformat.context import TableContext
from labformat.errors import ConcurrentWriteError, ConfigError, LabformatError, from_task_failure, storage_error
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.fs_view import FileSystemView, refuse_nested_partitions
from labformat.heartbeat import Heartbeat, delete_heartbeats, heartbeat_status
from labformat.lock import TableLock
from labformat.metadata import record_index, write_metadata
from labformat.metadata.table import IndexedBaseFile, delete_metadata_of
from labformat.model.base_file import BaseFile
from labformat.model.commit import (
    BLOOM_FILTER_BYTES_KEY,
    COMPLETION_TIME_KEY,
    SPARK_SCHEMA_KEY,
    CommitMetadata,
    WriteStat,
)
from labformat.model.file_group import FileSlice
from labformat.model.enums import BucketEngine, ConcurrencyMode, IndexType, Operation
from labformat.model.instant import WRITE_ACTIONS, Action, Instant, State
from labformat.model.report import WriteReport
from labformat.schema import avro_schema_json
from labformat.spark.compat import is_connect
from labformat.timeline import Timeline
from labformat.write import cdc
from labformat.write.conflict import check_conflicts

PARTITION_METADATA = ".hoodie_partition_metadata"


class WriteTransaction:
    """One operation (a write or a table service) of one table, from its plan to its completed instant.
    `write/operation.py` drives it for every operation::

        with WriteTransaction(ctx, Operation.UPSERT, Action.COMMIT, options) as tx:
            ...                                  # validate and plan: no instant yet
            if nothing_to_write:
                tx.abandon()                     # an empty write: no instant left behind
            tx.start(plan)                       # requested -> inflight
            stats = write_tasks(tx.instant.time)
            tx.commit(stats, data_schema)        # completed commit published atomically

    The rules every write path shares:

    - The table lock (`labformat/lock.py`) is held only around timeline changes: in `start`
      (roll back dead writers, take an instant time, request, inflight) and in `commit` (conflict
      check, reconcile, metadata table, publish), as in Hudi's optimistic concurrency control;
      never while Spark writes base files.
    - From `start` to its end the writer's heartbeat (`labformat/heartbeat.py`) says it is alive.
      `start` rolls back only instants whose heartbeat expired (their writers died). A live
      writer's instant is left alone; in SINGLE_WRITER mode (the default) it refuses this write
      with ConcurrentWriteError, in OPTIMISTIC_CONCURRENCY_CONTROL mode both go on. (Hudi's single-writer
      mode checks no conflict: its default EAGER failed-writes policy rolls back every pending write
      instant but compactions and clusterings at start. labformat reads the heartbeats in both modes,
      so a live writer is never rolled back.)
    - `commit` fails with WriteConflictError when a write completed after this write's snapshot
      (the timeline pinned in `ctx` when it was planned) wrote one of its file groups; in both
      modes, since a plan made on a stale snapshot loses rows whoever wrote in between.
    - An exception inside the block aborts: a started instant is rolled back at once (its base
      files and metadata table files deleted, a rollback instant recorded), so the table is as it
      was before the write; a write task's bad-input failure is re-raised as InvalidInputError.
    - An empty write commits nothing and leaves no instant behind: the report's instant is None,
      no timeline file of it remains, and no file is written. Upsert and delete know they are
      empty before `start` (their plan has no target file group) and never start an instant;
      bulk insert learns it only from its write tasks (knowing earlier would cost a pass over the
      input) and `abandon` then removes the markers of the instant it started.
    - Leaving the block after `start` with neither `commit` nor `abandon` is a bug in the write
      path; the instant is rolled back as if the write had failed.
    """

    def __init__(self, ctx: TableContext, operation: Operation, action: Action = Action.COMMIT,
                 options: C.WriteOptions | None = None):
        self.ctx = ctx
        # The operation's options (concurrency mode, lock and heartbeat settings); defaults when None.
        self.options = options if options is not None else C.write_options()
        # The transaction's own timeline: its transitions reload it, so it follows this write's
        # instant, while the plan keeps reading the snapshot in `ctx`.
        self.timeline: Timeline | None = None
        self.operation = operation
        self.action = action
        self.instant: Instant | None = None  # this write's instant, once started
        self.rolled_back: tuple[str, ...] = ()  # instants of dead writers that `start` rolled back
        self.completed: Instant | None = None
        self._abandoned = False
        self._heartbeat: Heartbeat | None = None
        # Run by the operation protocol once this transaction has committed (inline compaction).
        self.after_commit: list[Callable[[WriteReport], WriteReport]] = []

    @property
    def operation_type(self) -> str:
        """Hudi's `operationType` for the commit metadata: BULK_INSERT, UPSERT, DELETE, COMPACT, ..."""
        return self.operation.hudi_name

    # ---- the protocol -----------------------------------------------------------------------

    def start(self, plan: dict[str, Any] | None = None) -> Instant:
        """Under the table lock: roll back the instants dead writers left, take an instant time,
        start this writer's heartbeat, request the instant (holding `plan`, if any, beside the
        operation type) and mark it inflight."""
        self._check_store_supports_concurrency()
        with self._lock() as lock:
            self.ctx.check_same_table()  # a table deleted and created again is not the one planned for
            timeline = self.timeline = self.ctx.timeline.fresh()
            self.rolled_back = self._roll_back_dead_writers(timeline)
            at = timeline.new_instant_time()
            # The heartbeat first: no moment exists in which the instant is pending without one.
            self._heartbeat = Heartbeat(self.ctx.storage, at, self.options.heartbeat_interval_ms / 1000,
                                        self.options.heartbeat_tolerable_misses).start()
            try:
                self.instant = timeline.request(self.action, {"operationType": self.operation_type, **(plan or {})},
                                                at=at)
            except BaseException as exc:
                self._stop_heartbeat(exc)
                raise
            crash_point("after_requested")
            # A writer frozen here past the lock's expiry may have been rolled back meanwhile: the lock
            # tells, and `to_inflight` never marks inflight an instant whose requested file is gone.
            lock.verify()
            self.instant = timeline.to_inflight(self.instant)
            self._fence(lock)
        crash_point("after_start")
        return self.instant

    def resume(self, pending: Instant) -> Instant | None:
        """Under the table lock: take over `pending`, an instant of this action a dead writer left (its
        heartbeat missing or expired), to finish its plan; None when it is no longer pending or its
        writer is alive. A clean is resumed, never rolled back: what it deleted cannot come back."""
        interval_s, misses = self.options.heartbeat_interval_ms / 1000, self.options.heartbeat_tolerable_misses
        with self._lock():
            self.ctx.check_same_table()
            timeline = self.timeline = self.ctx.timeline.fresh()
            current = next((i for i in timeline.pending() if (i.time, i.action) == (pending.time, self.action)), None)
            if current is None or heartbeat_status(self.ctx.storage, pending.time, interval_s, misses).alive:
                return None
            self._heartbeat = Heartbeat(self.ctx.storage, pending.time, interval_s, misses).start()
            self.instant = current if current.state is State.INFLIGHT else timeline.to_inflight(current)
        crash_point("after_start")
        return self.instant

    def replace_metadata(self, of: Instant, slices: list[FileSlice], stats: Sequence[IndexedBaseFile],
                         expected_latest: Instant) -> None:
        """Under the table lock: replace the metadata table's entries of the completed instant `of`
        (the rebuild's), unless another write completed since `expected_latest` was read (then
        ConcurrentWriteError, nothing replaced): a commit meanwhile would carry stats over from a
        half-replaced snapshot."""
        conf = self.ctx.config
        with self._lock() as lock:
            self.ctx.check_same_table()
            timeline = self.ctx.timeline.fresh()
            now = timeline.completed_writes_by_completion()
            if not now or now[-1] != expected_latest:
                raise ConcurrentWriteError(f"commit {now[-1].time if now else None} completed while the metadata table "
                                           f"was being rebuilt for {expected_latest.time}; nothing was replaced, run "
                                           "the rebuild again")
            crash_point("before_publish")
            lock.verify()
            delete_metadata_of(self.ctx.storage, of.time)
            write_metadata(self.ctx.storage, timeline, of.time, slices, stats, conf.column_stats_enable,
                           conf.bloom_filter_enable, carry_over=False, columns=conf.column_stats_columns)
        crash_point("after_commit")

    def commit(self, stats: list[BaseFileStat], data_schema: T.StructType,
               extra: dict[str, str] | None = None,
               replaced: dict[str, tuple[str, ...]] | None = None,
               ring_nodes: tuple[tuple[str, str], ...] = ()) -> Instant:
        """Complete the instant from its write tasks' stats, under the table lock: check for
        conflicts, delete files of failed task attempts, write the metadata table, then publish
        `<instant>.commit` atomically. `replaced` (a replacecommit's `partitionToReplaceFileIds`):
        file groups this instant ends; they count as written for the conflict check. `ring_nodes`
        (a consistent-hashing resize): the file groups its new rings name, none of which another
        commit may have replaced meanwhile."""
        if self.instant is None:
            raise RuntimeError("commit() before start(): no instant to complete")
        crash_point("after_write")
        write_stats = tuple(s.to_write_stat() for s in sorted(stats, key=lambda s: s.path))
        # Known only now for a bulk insert (its tasks computed the partition paths): checked before publishing.
        refuse_nested_partitions({w.partition_path for w in write_stats},
                                 {g.partition_path for g in FileSystemView(self.ctx.timeline).file_groups()})
        replaced = {p: tuple(ids) for p, ids in sorted((replaced or {}).items()) if ids}
        # Before the lock: the changes are this instant's own (the conflict check keeps others off its
        # file groups), and a rollback deletes them with its other metadata.
        self._keep_record_index(stats, replaced)
        extra = {**(extra or {}), **self._keep_changes(stats, replaced, data_schema)}
        with self._lock() as lock:
            self.ctx.check_same_table()
            timeline = self._timeline().reload()
            self._fence(lock)  # early, before the metadata table is written; again just before publishing
            conf = self.ctx.config
            check_conflicts(self.ctx.timeline, timeline, self.instant, write_stats,
                            touched=[(p, fid) for p, ids in replaced.items() for fid in ids],
                            by_bucket=conf.index_type is IndexType.BUCKET and conf.bucket_engine is BucketEngine.SIMPLE,
                            ring_nodes=ring_nodes)
            metadata = CommitMetadata(
                operation_type=self.operation_type,
                replaced_file_ids=replaced,
                write_stats=write_stats,
                extra_metadata={
                    # A table Hudi wrote keeps its own Avro schema text (record names, fixed sizes).
                    "schema": self.ctx.avro_schema_text(data_schema) or avro_schema_json(data_schema, self.ctx.config.name),
                    SPARK_SCHEMA_KEY: data_schema.json(),
                    BLOOM_FILTER_BYTES_KEY: str(sum(s.bloom_bytes for s in stats)),
                    COMPLETION_TIME_KEY: timeline.next_completion_time(),
                    **(extra or {}),
                },
            )
            self._reconcile({s.path for s in write_stats}, {s.partition_path for s in write_stats})
            self._mark_new_partitions(write_stats)
            if self.ctx.config.metadata_enable:
                # The metadata table lists base files and their stats; log files are not in it.
                self._write_metadata(tuple(w for w in write_stats if not w.is_log_file),
                                     [s for s in stats if not s.is_log_file], replaced)

            def before_publish() -> None:
                crash_point("before_publish")
                self._fence(lock)  # the last moment a lost lock or a rolled-back instant can still stop it

            self.completed = timeline.complete(self.instant, metadata.to_json(), before_publish=before_publish)
            # Published: its log files are the table's now, and no rollback will look for them.
            markers.delete_all(self.ctx.storage, self.instant.time)
        self._stop_heartbeat()
        crash_point("after_commit")
        return self.completed

    def publish(self, body: str) -> Instant:
        """Complete an instant that holds no data (a clean) with `body`, under the table lock; no
        conflict check, since it changes no snapshot."""
        if self.instant is None:
            raise RuntimeError("publish() before start(): no instant to complete")
        crash_point("after_write")
        with self._lock() as lock:
            timeline = self._timeline().reload()
            self._fence(lock)

            def before_publish() -> None:
                crash_point("before_publish")
                self._fence(lock)

            self.completed = timeline.complete(self.instant, body, before_publish=before_publish)
        self._stop_heartbeat()
        crash_point("after_commit")
        return self.completed

    def abort(self, exc: BaseException | None = None) -> None:
        """Roll back this write's instant now, if it started and was not published; then re-raise the
        write's failure as the LabformatError it stands for, where it is one: a write task's bad input
        (InvalidInputError), a LabformatError a task raised, a storage refusal (StorageError)."""
        # A failed write rolls itself back rather than leaving it to the next writer: its files
        # go at once, and the rollback instant records that it happened. Only while the instant
        # is pending: a failure just after publishing must not undo a completed commit.
        not_rolled_back = None
        try:
            if self.action is Action.CLEAN and self.instant is not None and self.completed is None and exc is not None:
                # A clean is never rolled back (what it deleted cannot come back): it stays pending, its
                # heartbeat stops (below), and the next clean finishes its plan.
                exc.add_note(f"labformat: clean {self.instant.time} stays pending; the next clean finishes it")
            elif self.instant is not None and self.completed is None and not self._abandoned:
                # A failed task fails the job at once, but its sibling tasks run on and may still write
                # their base files: rolled back before they finish, such a file would outlive the
                # rollback, and readers (hudi-rs among them) take an uncommitted base file for data.
                _wait_for_running_tasks(self.ctx.spark)
                try:
                    try:
                        self._roll_back_own_instant()
                    except OSError:
                        # A full disk refuses even the rollback's plan: delete this write's own files
                        # first (no lock needed: its heartbeat keeps others away), then try again.
                        # A crash in between leaves a pending instant with fewer files, which the
                        # next writer rolls back as any other.
                        self._timeline().delete_files_of(self.instant.time)
                        self._roll_back_own_instant()
                except Exception as rollback_exc:  # noqa: BLE001 - the write's own error comes first
                    # Left pending, with its heartbeat gone (below): the next writer rolls it back.
                    if exc is None:
                        raise
                    not_rolled_back = (f"labformat: instant {self.instant.time} was not rolled back "
                                       f"({type(rollback_exc).__name__}: {rollback_exc}); the next writer rolls it back")
                else:
                    _sweep_stragglers(self._timeline(), self.instant.time)
        finally:
            self._stop_heartbeat(exc)
        if not isinstance(exc, Exception):
            return
        translated = (storage_error(exc, f"{self.operation} of {self.ctx.storage.base_uri}")
                      if isinstance(exc, OSError) and not isinstance(exc, LabformatError) else from_task_failure(exc))
        if not_rolled_back:
            exc.add_note(not_rolled_back)
        if translated is not None and translated is not exc:
            # The cleanup's notes (a rollback or heartbeat delete that failed) go with the error raised.
            for note in getattr(exc, "__notes__", ()):
                if note.startswith("labformat: ") and note not in getattr(translated, "__notes__", ()):
                    translated.add_note(note)
            raise translated from None

    def abandon(self) -> None:
        """End an empty write: remove the started instant's markers, if any; nothing is committed and
        no instant of it is left behind."""
        if self.completed is not None:
            raise RuntimeError(f"instant {self.completed.time} is already committed")
        if self.instant is not None and not self._abandoned:
            # Markers first, heartbeat last: a pending instant without a heartbeat looks dead.
            self._timeline().abandon(self.instant)
        self._abandoned = True
        self._stop_heartbeat()

    def __enter__(self) -> "WriteTransaction":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        try:
            if exc is not None:
                self.abort(exc)
            elif self.instant is not None and self.completed is None and not self._abandoned:
                self.abort()
        except BaseException as raised:
            self._stop_heartbeat(raised)
            raise
        self._stop_heartbeat(exc)
        return False  # the exception, if any, goes on (abort may have replaced it)

    # ---- concurrency ------------------------------------------------------------------------

    def _started(self) -> Instant:
        """This write's instant; called only once `start` or `resume` gave it one."""
        assert self.instant is not None, "no instant started"
        return self.instant

    def _timeline(self) -> Timeline:
        """The transaction's own timeline; set by `start` and `resume`, before the instant."""
        assert self.timeline is not None, "no instant started"
        return self.timeline

    def _lock(self) -> TableLock:
        return TableLock(self.ctx.storage, wait_s=self.options.lock_wait_time_ms / 1000,
                         expire_s=self.options.lock_expire_minutes * 60)

    def _check_store_supports_concurrency(self) -> None:
        """ConfigError when this write asks for optimistic concurrency control on a store that
        ignores conditional writes: two writers could both take the lock and both commit."""
        if self.options.concurrency_mode is not ConcurrencyMode.OPTIMISTIC_CONCURRENCY_CONTROL:
            return
        if not self.ctx.storage.honours_conditional_writes():
            raise ConfigError(
                f"{self.ctx.storage.base_uri}: this store ignores conditional writes (a second PUT with "
                "If-None-Match: * replaced the first), so writers cannot exclude each other; "
                "hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL is refused here: "
                "use SINGLE_WRITER with one writer at a time, or a store that honours If-None-Match")

    def _stop_heartbeat(self, failing: BaseException | None = None) -> None:
        """Stop the heartbeat and delete its file. While `failing` (the write's own error) goes on, a
        storage that refuses the delete (an S3 server gone) adds a note to it instead of replacing it:
        the file left behind only makes the instant look alive until its tolerance runs out."""
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is None:
            return
        try:
            heartbeat.stop()
        except Exception as cleanup:  # noqa: BLE001 - the write's own error comes first
            if failing is None:
                raise
            failing.add_note(f"labformat: the heartbeat {heartbeat.path} was not deleted "
                             f"({type(cleanup).__name__}: {cleanup}); the instant counts as dead once it is "
                             "older than its tolerance")

    def _roll_back_dead_writers(self, timeline: Timeline) -> tuple[str, ...]:
        """Under the lock: roll back the pending write instants whose heartbeat expired; refuse to
        start (single-writer mode) while a live writer's instant is in flight."""
        interval_s, misses = self.options.heartbeat_interval_ms / 1000, self.options.heartbeat_tolerable_misses
        pending = [i for i in timeline.pending() if i.action in WRITE_ACTIONS]
        status = {i.time: heartbeat_status(self.ctx.storage, i.time, interval_s, misses) for i in pending}
        live = [s for s in status.values() if s.alive]
        if live and self.options.concurrency_mode is not ConcurrencyMode.OPTIMISTIC_CONCURRENCY_CONTROL:
            other = live[0]
            raise ConcurrentWriteError(
                f"instant {other.instant_time} of another writer is in flight ({other.describe()}); "
                "single-writer mode (hoodie.write.concurrency.mode=SINGLE_WRITER) lets one writer at a "
                "time write the table: set hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL "
                f"or retry once it has finished (a writer that died counts as dead "
                f"{other.tolerance_s:g} s after its last heartbeat)")
        results = timeline.rollback_pending(is_dead=lambda i: not status[i.time].alive)
        delete_heartbeats(self.ctx.storage, keep={i.time for i in timeline.pending()})
        return tuple(r.rolled_back for r in results)

    def _fence(self, lock: TableLock) -> None:
        """Under the lock: ConcurrentWriteError unless this writer may still complete its instant, as
        Hudi re-checks a writer's heartbeat and instant before completing. Read from storage now, in
        this order: the instant (requested and inflight files there, no rollback naming it), the
        heartbeat (still this writer's file), the lock last. A rollback runs only under the lock, and a
        lock once broken never becomes this writer's again, so a lock still ours after the instant was
        seen pending means no rollback ran in between; what is left is a freeze between this check
        and the publish that follows it, longer than the lock's expiry (no lease-based lock closes that)."""
        self._timeline().check_pending(self._started())
        if self._heartbeat is not None:
            self._heartbeat.check()
        lock.verify()

    def _roll_back_own_instant(self) -> None:
        """Under the lock: roll back this write's instant if still pending; if another writer rolled it
        back already, delete whatever this write wrote after that."""
        instant = self._started()
        with self._lock():
            timeline = self._timeline().reload()
            if any((i.time, i.action) == (instant.time, self.action) for i in timeline.pending()):
                timeline.rollback(instant)
            else:
                timeline.delete_files_of(instant.time)

    # ---- inside commit ----------------------------------------------------------------------

    def _reconcile(self, written_paths: set[str], partitions: set[str]) -> None:
        """Delete files this instant's failed or duplicate task attempts left behind (not in the stats)."""
        storage = self.ctx.storage
        instant_time = self._started().time
        for log_path in markers.marked_files(storage, instant_time):
            if log_path not in written_paths:
                storage.delete(log_path)
        for partition in partitions:
            for info in storage.list(partition):
                base = BaseFile.try_parse(info.path)
                if base is not None and base.instant_time == instant_time and info.path not in written_paths:
                    storage.delete(info.path)

    def _mark_new_partitions(self, write_stats: tuple[WriteStat, ...]) -> None:
        """In a table whose partition folders carry Hudi's `.hoodie_partition_metadata` (one Apache Hudi
        wrote: Hudi's own file listing finds partitions by it), a folder this write created gets one
        too. labformat's own tables have none, and get none."""
        storage = self.ctx.storage
        known = next((s.partition_path for s in FileSystemView(self.ctx.timeline).latest_file_slices()
                      if s.partition_path), None)
        if known is None or not storage.exists(f"{known}/{PARTITION_METADATA}"):
            return
        for partition in sorted({w.partition_path for w in write_stats if w.partition_path}):
            marker = f"{partition}/{PARTITION_METADATA}"
            if not storage.exists(marker):
                text = (f"#partition metadata\ncommitTime={self._started().time}\n"
                        f"partitionDepth={partition.count('/') + 1}\n")
                storage.publish(marker, text.encode("utf-8"))

    def _keep_record_index(self, stats: list[BaseFileStat], replaced: dict[str, tuple[str, ...]]) -> None:
        """The record index's delta for this instant, when the table keeps one or this write asks for
        one (`record_index_asked`); a write asking on a table with commits and no usable index builds
        its base first, from the table as of the write's plan."""
        storage, spark = self.ctx.storage, self.ctx.spark
        asked = record_index_asked(self.ctx, self.options, check=False)
        if not (asked or record_index.exists(storage)):
            return
        plan_timeline = self.ctx.timeline
        view, _ = record_index.current(storage, plan_timeline)
        newest = record_index.newest_completed(plan_timeline)
        latest = {(s.partition_path, s.file_id): s for s in FileSystemView(plan_timeline).latest_file_slices()}
        shards = record_index.shards_of(storage) or self.options.record_index_shards
        if view is None and asked and newest is not None:
            view = record_index.build(spark, storage, newest, list(latest.values()), shards)
        before, after = self._slices_before_after(stats, replaced, latest)
        # A global lookup placed this write's inserts where no copy was; any other write may have
        # stored a key a second time, which its delta checks against the index it follows.
        looked_up = (self.operation in (Operation.UPSERT, Operation.DELETE)
                     and (self.options.index_type or self.ctx.config.index_type).is_global)
        record_index.write_delta(spark, storage, self._started().time,
                                 [(s.path, s.file_id, list(s.log_paths)) for s in after],
                                 [(s.path, s.file_id, list(s.log_paths)) for s in before], shards,
                                 before=None if looked_up else view)

    def _slices_before_after(self, stats: list[BaseFileStat], replaced: dict[str, tuple[str, ...]],
                             latest: dict[tuple[str, str], FileSlice]) -> tuple[list[FileSlice], list[FileSlice]]:
        """The file slices of every file group this instant wrote: before (as of the write's plan) and
        after (its new base file, or the slice with its new log file); a replaced file group's before
        only. What the record index's delta and the change records compare."""
        instant_time = self._started().time
        before: list[FileSlice] = []
        after: list[FileSlice] = []
        for s in stats:
            old = latest.get((s.partition_path, s.file_id))
            if old is not None:
                before.append(old)
            if s.is_log_file:
                if old is None:  # a log-only file group, which labformat never writes
                    raise RuntimeError(f"log file {s.path} was written to file group {s.file_id}, which has no "
                                       "file slice: labformat appends log files to existing slices only")
                after.append(old.with_log(s.path, s.file_size))
            elif s.num_writes:
                after.append(FileSlice(s.partition_path, s.file_id, instant_time, s.path, s.file_size,
                                       s.num_writes))
        before += [latest[(p, fid)] for p, ids in replaced.items() for fid in ids if (p, fid) in latest]
        return before, after

    def _keep_changes(self, stats: list[BaseFileStat], replaced: dict[str, tuple[str, ...]],
                      data_schema: T.StructType) -> dict[str, str]:
        """A CDC table's change records of this instant (`write/cdc.py`), before the commit publishes;
        the commit's entry listing their files."""
        conf = self.ctx.config
        if not conf.cdc_enabled:
            return {}
        latest = {(s.partition_path, s.file_id): s for s in FileSystemView(self.ctx.timeline).latest_file_slices()}
        before, after = self._slices_before_after(stats, replaced, latest)
        instant_time = self._started().time
        records = cdc.changes(self.ctx.spark, self.ctx.storage, instant_time, before, after,
                              self.ctx.schema(), data_schema, conf.precombine_field, conf.merge_mode)
        return cdc.commit_entry(cdc.write_changes(self.ctx.spark, self.ctx.storage, instant_time, records))

    def _write_metadata(self, write_stats: tuple[WriteStat, ...], task_stats: list[BaseFileStat],
                        replaced: dict[str, tuple[str, ...]] | None = None) -> None:
        """The metadata table's entries for this instant, written before the commit is published;
        replaced file groups leave the files listing (and so the column stats)."""
        conf = self.ctx.config
        timeline, instant_time = self._timeline().reload(), self._started().time
        latest = {(s.partition_path, s.file_id): s for s in FileSystemView(timeline).latest_file_slices()}
        for partition, file_ids in (replaced or {}).items():
            for file_id in file_ids:
                latest.pop((partition, file_id), None)
        for w in write_stats:
            latest[(w.partition_path, w.file_id)] = FileSlice(w.partition_path, w.file_id, instant_time,
                                                              w.path, w.file_size_bytes, w.num_writes)
        write_metadata(self.ctx.storage, timeline, instant_time, sorted(latest.values(), key=lambda s: s.path),
                       task_stats, conf.column_stats_enable, conf.bloom_filter_enable,
                       columns=conf.column_stats_columns)


def record_index_problem(ctx: TableContext) -> str | None:
    """Why labformat cannot keep a record index on this table, or None."""
    conf = ctx.config
    if not conf.metadata_enable:
        return "a table without the metadata table (hoodie.metadata.enable=false)"
    if not conf.populate_meta_fields:
        return "a table without meta fields"
    if conf.index_type is IndexType.BUCKET:
        return "a BUCKET table (its hash already names each key's file group)"
    return None


def record_index_asked(ctx: TableContext, options: C.WriteOptions, check: bool = True) -> bool:
    """Whether a write asks for the record index (RECORD_INDEX, or `hoodie.metadata.record.index.enable`);
    with `check`, ConfigError (before any instant) where labformat cannot keep one."""
    asked = options.record_index_enable or (options.index_type or ctx.config.index_type) is IndexType.RECORD_INDEX
    problem = record_index_problem(ctx) if asked else None
    if problem and check:
        raise ConfigError(f"the record-level index (hoodie.index.type=RECORD_INDEX, hoodie.metadata.record.index."
                          f"enable=true) is not supported on {problem} yet")
    return asked and problem is None


def _sweep_stragglers(timeline: Timeline, instant_time: str, settle_s: float = 1.0) -> None:
    """Delete base files of the rolled-back instant that appear after its rollback.

    Once Spark kills a failed job's remaining tasks its executor reports them finished, but
    their Python workers may still be closing a base file: under load one landed just after
    the rollback (a test_table failure seen twice in full-suite runs on a loaded machine). Listing again
    until nothing has turned up for `settle_s` catches it; it costs only a failed write.
    """
    import time

    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < settle_s:
        time.sleep(0.1)
        if timeline.delete_files_of(instant_time):
            quiet_since = time.monotonic()


def _wait_for_running_tasks(spark: SparkSession | None, timeout_s: float = 120.0) -> None:
    """Block until no executor of this application runs a task (or `timeout_s` passed).

    Asked of the executors, not the stages: a job that failed drops its stages from the active
    list at once, while their remaining task attempts still run to the end.
    """
    import time

    if spark is None or is_connect(spark):  # a Connect client cannot see executors: the sweep's settling covers it
        return
    # PySpark's StatusTracker has no executor view; the JVM's has (numRunningTasks per executor).
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(info.numRunningTasks() for info in tracker.getExecutorInfos()) == 0:
            return
        time.sleep(0.05)
