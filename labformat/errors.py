"""The one exception tree of labformat: every error a caller can act on is a LabformatError."""

from __future__ import annotations

import errno
import json
from contextlib import contextmanager
from typing import Iterator


class LabformatError(Exception):
    """Base of every error labformat raises on purpose."""


class ConfigError(LabformatError, ValueError):
    """An option is unknown, or its value cannot be parsed or is out of range."""


class JavaNotFoundError(LabformatError, RuntimeError):
    """No Java 17+ runtime to start Spark with."""


class TableNotFoundError(LabformatError, FileNotFoundError):
    """The path holds no labformat/Hudi table (no `.hoodie/hoodie.properties`)."""


class TableExistsError(LabformatError, FileExistsError):
    """`Table.create` was pointed at a path that already holds a table."""


class CorruptTableError(LabformatError):
    """A file the table depends on (properties, an instant, a base file footer) cannot be read."""


class CorruptIndexError(CorruptTableError):
    """A file of the metadata table's record index fails its checksums or disagrees with its manifest.
    Its own class so that a RECORD_INDEX upsert can tell it from damaged data: the index is derived
    from the base files, so it is rebuilt from them, where a damaged base file stops the write."""


class InvalidInputError(LabformatError, ValueError):
    """An input is not acceptable: a write's (missing columns, null or empty record keys, ...)
    or a query's (a condition Spark cannot resolve against the table)."""


class SchemaMismatchError(InvalidInputError):
    """The input's schema conflicts with the table's schema."""


class InstantNotFoundError(LabformatError, LookupError):
    """An `as_of` instant that is not a completed instant of the timeline."""


class CleanedInstantError(InstantNotFoundError):
    """An `as_of` instant older than what the table's cleaning kept: its file slices were deleted."""


class StorageError(LabformatError, OSError):
    """The storage under the table refused a read or a write: disk full, a read-only file system, no
    permission. Raised with the path and the system's reason; a write that meets it is rolled back."""


class DatasetNotCachedError(LabformatError, FileNotFoundError):
    """A cached dataset was asked for before `generate()` completed it."""


class ConcurrentWriteError(LabformatError):
    """Another writer is in the way: in single-writer mode a live writer's instant is in flight, or
    this write's own instant was rolled back by a writer that took it for dead."""


class TableChangedError(ConcurrentWriteError):
    """The table at this path is no longer the one this `Table` object opened: it was deleted and
    created again, or its `hoodie.properties` changed. Open it again (`Table.open`)."""


class TimelineHoleError(ConcurrentWriteError):
    """An incremental read whose range ends past an instant still in flight (a hole in the timeline):
    the rows that instant writes would complete behind the range's `end`, and a consumer keeping `end`
    as its checkpoint would never read them (`hoodie.read.timeline.holes.resolution.policy=FAIL`)."""

    def __init__(self, message: str, pending: str | None = None, end: str | None = None):
        super().__init__(message)
        self.pending = pending  # the oldest instant in flight
        self.end = end  # the range's end the read would have had


class LockTimeoutError(ConcurrentWriteError, TimeoutError):
    """The table's lock stayed held by another writer for longer than `hoodie.write.lock.wait_time_ms`."""


class WriteConflictError(ConcurrentWriteError):
    """A write that completed after this write's snapshot wrote one of the file groups this write
    rewrote: committing would lose its rows, so this write was rolled back instead."""

    def __init__(self, message: str, instant: str | None = None, other: str | None = None,
                 file_groups: tuple[tuple[str, str], ...] = ()):
        super().__init__(message)
        self.instant = instant  # this write's instant, rolled back
        self.other = other  # the commit it lost to
        self.file_groups = file_groups  # (partition path, file id) both wrote


# ---- failures that come back from Spark tasks ------------------------------------------------------
#
# A Python task can hand the driver nothing but text when it fails: Spark sends the worker's traceback
# and nothing else (PySpark's PythonException; a SQL expression's `raise_error` sends its message). So a
# task never lets a LabformatError leave as such: `spark.tasks` wraps every labformat task and raises a
# TaskFailure instead, whose message is one line of data, `TASK_ERROR_TAG` then JSON (the class, its
# arguments, its fields). The driver decodes that line (`from_task_failure`) into the same class with
# the same fields; nothing is guessed from a message's words.

TASK_ERROR_TAG = "labformat-task-error:"
# The storage's refusals, by errno: a task's OSError with one of these is the table's storage saying no.
_STORAGE_REFUSALS = {
    errno.ENOSPC: "No space left on device", errno.EROFS: "Read-only file system",
    errno.EACCES: "Permission denied", errno.EPERM: "Operation not permitted", errno.EDQUOT: "Disk quota exceeded",
}


class TaskFailure(Exception):
    """What a labformat task raises for a LabformatError: its message is the error as one line of
    data (`TASK_ERROR_TAG` + JSON), the only thing Spark carries from a task to the driver."""

    @classmethod
    def of(cls, error: LabformatError) -> "TaskFailure":
        return cls(task_payload(error))


def task_payload(error: LabformatError) -> str:
    """`error` as one line: its class, its arguments and its fields, as JSON carries them (a tuple
    comes back a list, an argument that is neither str nor int its str; a field JSON cannot hold is
    left out). Every LabformatError class is rebuilt by its first argument, the message
    (tests/test_errors.py round-trips each)."""
    fields = {}
    for name, value in vars(error).items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        fields[name] = value
    data = {"class": type(error).__name__, "args": [a if isinstance(a, (int, str)) else str(a) for a in error.args],
            "fields": fields}
    return TASK_ERROR_TAG + json.dumps(data, ensure_ascii=True)


def _error_classes() -> dict[str, type[LabformatError]]:
    found: dict[str, type[LabformatError]] = {}
    todo: list[type[LabformatError]] = [LabformatError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def error_from_payload(payload: str) -> LabformatError | None:
    """The LabformatError a `task_payload` line stands for; None when it is not one."""
    try:
        # The JSON value first; what follows it on the line (Spark's SQLSTATE after a `raise_error`) is not ours.
        data, _ = json.JSONDecoder().raw_decode(payload)
        cls = _error_classes()[data["class"]]
        error = cls(*data["args"])
        vars(error).update(data.get("fields") or {})  # e.g. WriteConflictError's instant, an error's notes
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return error


def storage_refusal(exc: OSError, doing: str) -> StorageError | None:
    """A task's OSError as the StorageError it stands for when the storage refused (disk full, read-only,
    no permission), else None. pyarrow's file systems raise an OSError with no errno whose message
    quotes the system's words: those words are looked for there, in this one place."""
    for code, words in _STORAGE_REFUSALS.items():
        if exc.errno == code or (exc.errno is None and words in str(exc)):
            return StorageError(code, f"{doing}: {words}")
    return None


def storage_error(exc: OSError, doing: str) -> StorageError:
    """`exc` (an OSError of the storage) as a StorageError saying what labformat was doing."""
    reason = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno is None:  # pyarrow's and obstore's errors carry none; "[Errno None]" would lead the message
        return StorageError(f"{doing}: {reason}{where}")
    return StorageError(exc.errno, f"{doing}: {reason}{where}")


def from_task_failure(exc: BaseException) -> LabformatError | None:
    """The LabformatError a failed Spark job stands for, or None when it is none of labformat's: the
    error a labformat task raised (`TaskFailure`: the same class, arguments and fields), found in
    the failure Spark raised on the driver, which holds the task's message as it was sent."""
    if isinstance(exc, LabformatError):
        return exc
    sent = str(exc)  # Spark's exception: the task's traceback and message, as the worker sent them
    # The last whole payload: a message may quote the tag (a refused value holding it) and a JVM
    # stack trace may end in a copy cut short, so each occurrence is tried from the last back.
    at = sent.rfind(TASK_ERROR_TAG)
    while at >= 0:
        found = error_from_payload(sent[at + len(TASK_ERROR_TAG):])
        if found is not None:
            return found
        at = sent.rfind(TASK_ERROR_TAG, 0, at)
    return None


@contextmanager
def task_errors() -> Iterator[None]:
    """Run an action on a lazy DataFrame labformat returned (`read`, `changes`, `scan(...).to_dataframe()`)
    inside this block to get the LabformatError a failed task stands for, instead of Spark's exception.

    A DataFrame's tasks run when the caller acts on it (`collect`, `count`, a write), after labformat
    returned: an error a task raised then reaches the caller as Spark's (PySpark's `PythonException`
    for a Python task, holding the worker's traceback as text), never as a LabformatError, so
    `except LabformatError` alone misses it. Here it comes back as the same class with the same
    message (Spark's exception as its cause); any other error goes on unchanged."""
    try:
        yield
    except LabformatError:
        raise
    except Exception as exc:
        translated = from_task_failure(exc)
        if translated is None:
            raise
        raise translated from exc
