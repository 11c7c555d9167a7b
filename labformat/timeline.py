"""The timeline: instants under `.hoodie/`, their transitions, and the rollback of failed ones."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from labformat import markers
from labformat.errors import CleanedInstantError, ConcurrentWriteError, CorruptTableError, InstantNotFoundError
from labformat.model.base_file import BaseFile
from labformat.model.commit import COMPLETION_TIME_KEY, CommitMetadata
from labformat.model.instant import WRITE_ACTIONS, Action, Instant, State, next_instant_time
from labformat.storage import Storage

log = logging.getLogger(__name__)

TIMELINE_DIR = ".hoodie"
# The metadata table lives under the timeline folder, as in Hudi: rollback deletes its files too.
METADATA_DIR = f"{TIMELINE_DIR}/metadata"
BUCKET_INDEX_DIR = f"{TIMELINE_DIR}/.bucket_index"  # consistent-hashing rings (`index/consistent_bucket.py`)
CDC_DIR = f"{TIMELINE_DIR}/cdc"  # change data capture's records, per commit (`write/cdc.py`)
_STATE_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}
# A completed clean's body: the earliest instant whose snapshot it left whole (labformat's key beside
# Hudi's `earliestCommitToRetain`, which KEEP_LATEST_FILE_VERSIONS does not set).
EARLIEST_READABLE_KEY = "labformat.earliestReadableInstant"


@dataclass(frozen=True)
class RollbackResult:
    rollback_instant: str
    rolled_back: str
    deleted_files: tuple[str, ...]


class Timeline:
    """The instants of one table, each in its furthest state, oldest first.

    A snapshot: `fresh()` loads a new one, `reload()` re-reads `.hoodie/` into this one (the
    transitions do, so a write's own timeline follows its instant). Completed commit metadata
    is cached, since completed instants never change.
    """

    def __init__(self, storage: Storage, metadata_cache: dict[str, CommitMetadata] | None = None):
        self.storage = storage
        # Shared by the timelines `fresh` makes: a completed instant's metadata never changes.
        self._metadata_cache: dict[str, CommitMetadata] = {} if metadata_cache is None else metadata_cache
        self.reload()

    def fresh(self) -> "Timeline":
        """A new snapshot of the same table, loaded now; this one stays as it is."""
        return Timeline(self.storage, self._metadata_cache)

    def reload(self) -> "Timeline":
        furthest: dict[tuple[str, Action], Instant] = {}
        for info in self.storage.list(TIMELINE_DIR):
            instant = Instant.parse(info.path.rsplit("/", 1)[-1])
            if instant is None:
                continue
            key = (instant.time, instant.action)
            if key not in furthest or _STATE_RANK[instant.state] > _STATE_RANK[furthest[key].state]:
                furthest[key] = instant
        # A compaction that completed is its `<time>.commit`; its requested and inflight files name it
        # `compaction`, which would otherwise look pending forever.
        committed = {t for (t, a), i in furthest.items() if a is Action.COMMIT and i.is_completed}
        for key in [k for k in furthest if k[1] is Action.COMPACTION and k[0] in committed]:
            del furthest[key]
        self.instants: tuple[Instant, ...] = tuple(sorted(furthest.values(), key=lambda i: (i.time, i.action.value)))
        return self

    # ---- queries --------------------------------------------------------------------------

    def completed_writes(self, as_of: str | None = None) -> list[Instant]:
        """Completed commits and replacecommits, oldest first, up to `as_of` inclusive."""
        return [
            i for i in self.instants
            if i.is_completed and i.action in WRITE_ACTIONS and (as_of is None or i.time <= as_of)
        ]

    def latest_completed_write(self) -> Instant | None:
        writes = self.completed_writes()
        return writes[-1] if writes else None

    def completion_time(self, instant: Instant) -> str:
        """When a completed write completed: its commit's completion time, else (a commit written
        before labformat recorded one, or by another writer) its instant time."""
        return self.commit_metadata(instant).extra_metadata.get(COMPLETION_TIME_KEY) or instant.time

    def completed_writes_by_completion(self, as_of: str | None = None) -> list[Instant]:
        """`completed_writes(as_of)` in the order they completed, the last completed last.

        Not the order of their times once writers overlap: an instant that started earlier may
        complete after a later one, and what it wrote (the metadata table's snapshots) is newer.
        """
        return sorted(self.completed_writes(as_of), key=lambda i: (self.completion_time(i), i.time))

    def next_completion_time(self) -> str:
        """A completion time for the commit about to be published: later than every instant's time
        and every completed write's completion time."""
        latest = max([self.last_time() or ""] + [self.completion_time(i) for i in self.completed_writes()])
        return next_instant_time(latest or None)

    def pending(self) -> list[Instant]:
        return [i for i in self.instants if not i.is_completed]

    def last_time(self) -> str | None:
        return self.instants[-1].time if self.instants else None

    def new_instant_time(self) -> str:
        """A time later than every instant's; CorruptTableError when the latest one leaves no such time."""
        try:
            return next_instant_time(self.last_time())
        except (OverflowError, ValueError) as exc:
            # An instant dated 9999-12-31 23:59:59.999 (or not a date at all) sorts after every time a
            # writer could take; deleting it by hand is the table owner's call, not a writer's.
            raise CorruptTableError(f"{TIMELINE_DIR}/{self.instants[-1].file_name}: no instant time can follow "
                                    f"{self.last_time()} ({exc}); a new write cannot be ordered after it") from None

    def resolve_as_of(self, as_of: str) -> Instant:
        """The completed write instant whose time `as_of` is; InstantNotFoundError otherwise, and
        CleanedInstantError when a clean deleted file slices its snapshot needs."""
        found = next((i for i in self.completed_writes() if i.time == as_of), None)
        if found is None:
            known = ", ".join(i.time for i in self.completed_writes()[-5:]) or "none"
            raise InstantNotFoundError(f"{as_of!r} is not a completed commit of this table (latest: {known})")
        readable, clean = self.readable_from()
        if readable is not None and as_of < readable:
            raise CleanedInstantError(
                f"{as_of!r} is older than what cleaning kept: clean {clean} deleted file slices its snapshot "
                f"needs; the earliest instant still readable is {readable} (hoodie.cleaner.commits.retained "
                "sets how many commits a clean keeps)")
        return found

    def readable_from(self) -> tuple[str | None, str | None]:
        """(the earliest instant every completed clean left readable, the clean that set it), or (None, None)."""
        best: tuple[str | None, str | None] = (None, None)
        for clean, body in self._clean_bodies():
            readable = body.get(EARLIEST_READABLE_KEY) or body.get("earliestCommitToRetain")
            if readable and (best[0] is None or readable > best[0]):
                best = (readable, clean.time)
        return best

    def cleaned_paths(self) -> set[str]:
        """The files completed cleans deleted (table-relative paths)."""
        out: set[str] = set()
        for _, body in self._clean_bodies():
            for partition, entry in (body.get("partitionMetadata") or {}).items():
                out.update(f"{partition}/{name}" if partition else name for name in entry.get("successDeleteFiles") or ())
        return out

    def _clean_bodies(self) -> list[tuple[Instant, dict[str, Any]]]:
        """The completed cleans' JSON bodies. Apache Hudi writes its cleans in Avro: those are skipped,
        so time travel into what one deleted meets the missing file (CorruptTableError) instead."""
        out = []
        for clean in (i for i in self.instants if i.action is Action.CLEAN and i.is_completed):
            try:
                body = json.loads(self.storage.read_bytes(f"{TIMELINE_DIR}/{clean.file_name}").decode("utf-8"))
            except ValueError:  # UnicodeDecodeError included
                continue
            if isinstance(body, dict):
                out.append((clean, body))
        return out

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        if instant.time not in self._metadata_cache:
            rel = f"{TIMELINE_DIR}/{instant.file_name}"
            try:
                self._metadata_cache[instant.time] = CommitMetadata.from_json(self.storage.read_text(rel))
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptTableError(f"{rel}: unreadable commit metadata ({exc})") from None
        return self._metadata_cache[instant.time]

    # ---- transitions ----------------------------------------------------------------------

    def request(self, action: Action, plan: dict[str, Any] | None = None, at: str | None = None) -> Instant:
        """Start an instant: `<time>.<action>.requested`, holding the plan (may be empty), at time `at`
        (default: `new_instant_time()`). The file is created exclusively: two writers can never
        share an instant (they take times under the table lock; this is the second guard)."""
        instant = Instant(at or self.new_instant_time(), action, State.REQUESTED)
        rel = f"{TIMELINE_DIR}/{instant.file_name}"
        if not self.storage.create_exclusive(rel, json.dumps(plan or {}).encode()):
            raise ConcurrentWriteError(f"{rel} already exists: another writer requested instant {instant.time}")
        self.reload()
        return instant

    def to_inflight(self, instant: Instant) -> Instant:
        """Mark a requested instant inflight; ConcurrentWriteError when its requested file is gone (a
        writer that took it for dead rolled it back).

        The inflight file is created only beside a requested file read just now, never overwritten,
        and withdrawn if the requested file vanished meanwhile: a writer resumed after its rollback
        must not bring its instant back as pending (an inflight file alone would pass for one)."""
        requested = f"{TIMELINE_DIR}/{instant.to(State.REQUESTED).file_name}"
        inflight = instant.to(State.INFLIGHT)
        rel = f"{TIMELINE_DIR}/{inflight.file_name}"
        if not self.storage.exists(requested):
            raise self._rolled_back_error(instant.time)
        created = self.storage.create_exclusive(rel, b"")
        if not self.storage.exists(requested):
            if created:
                self.storage.delete(rel)
            raise self._rolled_back_error(instant.time)
        self.reload()
        return inflight

    def check_pending(self, instant: Instant) -> None:
        """ConcurrentWriteError unless `instant` is still this writer's to complete, read from storage
        now (not from this snapshot): its requested and inflight files are there and no rollback,
        pending or completed, names it. A rollback that died after deleting some of its files leaves
        both files in place, so its plan must be looked at too."""
        for state in (State.REQUESTED, State.INFLIGHT):
            if not self.storage.exists(f"{TIMELINE_DIR}/{instant.to(state).file_name}"):
                raise self._rolled_back_error(instant.time)
        now = Timeline(self.storage, self._metadata_cache)
        # A completed rollback deleted both files before completing: only a pending one needs its plan read.
        if any((now._rollback_target(r) or ("",))[0] == instant.time
               for r in now.pending() if r.action is Action.ROLLBACK):
            raise self._rolled_back_error(instant.time)

    def rolled_back_times(self) -> set[str]:
        """The instant times the rollbacks of this snapshot (pending or completed) name: their plans
        and bodies. Rollbacks Apache Hudi wrote (Avro) are skipped."""
        out = set()
        for rollback in (i for i in self.instants if i.action is Action.ROLLBACK):
            if not rollback.is_completed:
                target = self._rollback_target(rollback)
                if target is not None:
                    out.add(target[0])
                continue
            try:
                body = json.loads(self.storage.read_bytes(f"{TIMELINE_DIR}/{rollback.file_name}").decode("utf-8"))
            except (ValueError, FileNotFoundError):
                continue
            if isinstance(body, dict):
                out.update(t for t in body.get("commitsRollback") or () if isinstance(t, str))
        return out

    @staticmethod
    def _rolled_back_error(instant_time: str) -> ConcurrentWriteError:
        return ConcurrentWriteError(
            f"instant {instant_time} of this write was rolled back by another writer, which found its heartbeat "
            "expired (this writer stalled for longer than hoodie.client.heartbeat.interval_in_ms x (tolerable "
            "misses + 1)); nothing was committed")

    def complete(self, instant: Instant, body: str, before_publish: Callable[[], None] | None = None) -> Instant:
        """Publish the completed instant atomically; from here on readers see it.

        `before_publish` runs just before the rename (the crash tests hook in there).
        """
        done = instant.to(State.COMPLETED)
        payload = body.encode("utf-8")
        if before_publish is not None:
            before_publish()
        self.storage.publish(f"{TIMELINE_DIR}/{done.file_name}", payload)
        self.reload()
        return done

    # ---- rollback -------------------------------------------------------------------------

    def rollback_pending(self, is_dead: Callable[[Instant], bool] = lambda instant: True) -> list[RollbackResult]:
        """Roll back every unfinished write instant whose writer died (`is_dead`, by its heartbeat):
        delete its base files and its timeline files, and record a completed rollback instant for each.

        Called under the table lock: rollbacks only ever run under it, so a pending rollback
        found here is one whose writer died, and is finished. A pending rollback whose plan is
        empty or unreadable is dropped (see `_rollback_target`).
        """
        results = []
        for rollback in [i for i in self.pending() if i.action is Action.ROLLBACK]:
            target = self._rollback_target(rollback)
            if target is None:
                self.abandon(rollback)
            else:
                results.append(self._execute_rollback(rollback, *target))
        for failed in [i for i in self.pending() if i.action in WRITE_ACTIONS and is_dead(i)]:
            results.append(self.rollback(failed))
        return results

    def _rollback_target(self, rollback: Instant) -> tuple[str, str] | None:
        """The (time, action) a pending rollback's plan names, or None when the plan is empty or unreadable.

        Why dropping such a rollback's markers loses nothing: its plan is written in full before
        it deletes anything, so a plan cut short means its writer died before deleting a file. A
        plan damaged later may belong to a rollback that deleted some files; but a failed
        instant's timeline files are deleted only after all its other files, so its target is
        either still pending (and `rollback_pending` rolls it back as any failed write) or has no
        file left.
        """
        rel = f"{TIMELINE_DIR}/{rollback.to(State.REQUESTED).file_name}"
        try:
            if not self.storage.exists(rel):
                return None
            plan = json.loads(self.storage.read_text(rel))
            target = (plan["instant"], plan["action"])
            Instant(target[0], Action(target[1]), State.REQUESTED)  # a time and an action we know
        except (ValueError, KeyError, TypeError):
            return None
        return target

    def rollback(self, failed: Instant) -> RollbackResult:
        """Roll back one unfinished write instant: delete its base files and metadata table files,
        then its timeline files, and record a completed rollback instant naming it."""
        rollback = self.request(Action.ROLLBACK, {"instant": failed.time, "action": failed.action.value})
        return self._execute_rollback(rollback, failed.time, failed.action.value)

    def abandon(self, instant: Instant) -> None:
        """Remove the requested and inflight files of an instant that wrote no file.

        With nothing written there is nothing to roll back, so no rollback is recorded: the
        timeline ends as if the instant had never been requested.
        """
        for state in (State.INFLIGHT, State.REQUESTED):
            self.storage.delete(f"{TIMELINE_DIR}/{instant.to(state).file_name}")
        self.reload()

    def delete_files_of(self, *instant_times: str) -> list[str]:
        """Delete the base files (half-written and temp files too), log files (found by their write
        markers) and metadata table files the instants wrote; the paths deleted. Their timeline files
        are left to the caller. One listing of the table, however many instants."""
        deleted = []
        for instant_time in instant_times:
            deleted += self._delete_marked_files_of(instant_time)
        times = set(instant_times)
        for info in self.storage.list("", recursive=True):
            leaf = info.path.rsplit("/", 1)[-1]
            if info.path.startswith(METADATA_DIR + "/") or info.path.startswith(CDC_DIR + "/"):
                # The metadata table's and change records' files of the failed instant go with its base files.
                if leaf.split(".", 1)[0] in times or (leaf.startswith(".") and any(t in leaf for t in times)):
                    self.storage.delete(info.path)
                    deleted.append(info.path)
                continue
            if info.path.startswith(BUCKET_INDEX_DIR + "/"):
                # A failed resize's hash ring: no reader counts it, but Hudi's loaders list every ring file.
                if leaf.split(".", 1)[0] in times:
                    self.storage.delete(info.path)
                    deleted.append(info.path)
                continue
            if info.path.startswith(TIMELINE_DIR + "/"):
                continue
            base = BaseFile.try_parse(leaf)
            # Half-written files and temp files from the failed instant carry its time too.
            if (base is not None and base.instant_time in times) or (leaf.startswith(".") and any(t in leaf for t in times)):
                self.storage.delete(info.path)
                deleted.append(info.path)
        return deleted

    def leftovers_of_rollbacks(self) -> set[str]:
        """Instants a rollback of this timeline named that are neither pending nor completed: any file
        of theirs still in the table outlived its rollback. A writer frozen past its heartbeat's
        tolerance, rolled back, then resumed, writes its files after the rollback deleted the others;
        killed before its commit (which its fence refuses), it leaves them with no pending instant for
        any rollback to look for."""
        live = {i.time for i in self.instants if i.action is not Action.ROLLBACK}
        return self.rolled_back_times() - live

    def sweep_rolled_back(self) -> list[str]:
        """Delete the files of `leftovers_of_rollbacks()` (the cleaner's and every rollback's sweep)."""
        leftover = self.leftovers_of_rollbacks()
        return self.delete_files_of(*sorted(leftover)) if leftover else []

    def _delete_marked_files_of(self, instant_time: str) -> list[str]:
        """The log files an instant's markers name (and their temp files), then the markers."""
        deleted = []
        marked = markers.marked_files(self.storage, instant_time)
        for path in marked:
            folder, _, leaf = path.rpartition("/")
            # The log file, and the temp file a task killed before publishing it left beside it.
            for info in self.storage.list(folder):
                name = info.path.rsplit("/", 1)[-1]
                if name == leaf or (name.startswith(f".{leaf}.") and name.endswith(".tmp")):
                    self.storage.delete(info.path)
                    deleted.append(info.path)
        if marked:
            markers.delete_all(self.storage, instant_time)  # last: a crash before this finds them again
        return deleted

    def _execute_rollback(self, rollback: Instant, failed_time: str, failed_action: str) -> RollbackResult:
        started = time.monotonic()
        inflight = self.to_inflight(rollback) if rollback.state is State.REQUESTED else rollback
        # The same listing finds what earlier rolled-back instants' resumed writers left behind.
        deleted = self.delete_files_of(failed_time, *sorted(self.leftovers_of_rollbacks() - {failed_time}))
        # Timeline files last: until they are gone, a crash here just means rolling back again.
        for state in (State.INFLIGHT, State.REQUESTED):
            self.storage.delete(f"{TIMELINE_DIR}/{Instant(failed_time, Action(failed_action), state).file_name}")
        partitions: dict[str, list[str]] = {}
        for path in deleted:
            partitions.setdefault(path.rsplit("/", 1)[0] if "/" in path else "", []).append(path)
        body = {
            "startRollbackTime": rollback.time,
            "timeTakenInMillis": int((time.monotonic() - started) * 1000),
            "totalFilesDeleted": len(deleted),
            "commitsRollback": [failed_time],
            "instantsRollback": [{"commitTime": failed_time, "action": failed_action}],
            "partitionMetadata": {
                p: {"partitionPath": p, "successDeleteFiles": files, "failedDeleteFiles": []}
                for p, files in partitions.items()
            },
        }
        self.complete(inflight, json.dumps(body, indent=2))
        log.info("%s: rolled back %s %s (rollback %s): %d files deleted", self.storage.base_uri, failed_action,
                 failed_time, rollback.time, len(deleted))
        return RollbackResult(rollback.time, failed_time, tuple(deleted))
