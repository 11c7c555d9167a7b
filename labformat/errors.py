"""The one exception tree of labformat: every error a caller can act on is a LabformatError."""

from __future__ import annotations


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


class InvalidInputError(LabformatError, ValueError):
    """An input is not acceptable: a write's (missing columns, null or empty record keys, ...)
    or a query's (a condition Spark cannot resolve against the table)."""


class SchemaMismatchError(InvalidInputError):
    """The input's schema conflicts with the table's schema."""


class InstantNotFoundError(LabformatError, LookupError):
    """An `as_of` instant that is not a completed instant of the timeline."""


class CleanedInstantError(InstantNotFoundError):
    """An `as_of` instant older than what the table's cleaning kept: its file slices were deleted."""


class DatasetNotCachedError(LabformatError, FileNotFoundError):
    """A cached dataset was asked for before `generate()` completed it."""


class ConcurrentWriteError(LabformatError):
    """Another writer is in the way: in single-writer mode a live writer's instant is in flight, or
    this write's own instant was rolled back by a writer that took it for dead."""


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
