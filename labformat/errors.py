"""The one exception tree of labformat: every error a caller can act on is a LabformatError."""

from __future__ import annotations

import errno
import re
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

# A LabformatError raised inside a Spark task reaches the driver as text (PySpark's PythonException
# carries the worker's traceback, whose last line is `labformat.errors.<Class>: <message>`).
_TASK_ERROR = re.compile(r"labformat\.errors\.(?P<cls>[A-Za-z]+Error): (?P<message>[^\n]*)")
# What the storage says when it refuses a write, in the words of the OS (and of Java, for Spark's own
# reads and writes).
_STORAGE_REFUSALS = {
    errno.ENOSPC: "No space left on device", errno.EROFS: "Read-only file system",
    errno.EACCES: "Permission denied", errno.EPERM: "Operation not permitted", errno.EDQUOT: "Disk quota exceeded",
}


def storage_error(exc: OSError, doing: str) -> StorageError:
    """`exc` (an OSError of the storage) as a StorageError saying what labformat was doing."""
    reason = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno is None:  # pyarrow's and obstore's errors carry none; "[Errno None]" would lead the message
        return StorageError(f"{doing}: {reason}{where}")
    return StorageError(exc.errno, f"{doing}: {reason}{where}")


def from_task_failure(exc: BaseException) -> LabformatError | None:
    """The LabformatError a failed Spark job stands for, or None when it is none of labformat's: a
    LabformatError a task raised (same class, same message), or a storage refusal (StorageError).
    A bad-input marker is handled by `fileformat.invalid_input`."""
    if isinstance(exc, LabformatError):
        return exc
    text = str(exc)
    found = _TASK_ERROR.findall(text) if "labformat.errors." in text else []
    if found:
        name, message = found[-1]
        cls = globals().get(name)
        if isinstance(cls, type) and issubclass(cls, LabformatError):
            if cls is StorageError:
                return StorageError(message)
            return cls(message)
    for code, words in _STORAGE_REFUSALS.items():
        if words in text:
            return StorageError(code, f"the storage refused a write or read inside a Spark task: {words}")
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
