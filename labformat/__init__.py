"""labformat: a teaching table format modelled on Apache Hudi (copy-on-write and merge-on-read tables), on PySpark."""

from labformat.errors import (
    ConcurrentWriteError,
    ConfigError,
    CorruptTableError,
    CleanedInstantError,
    InstantNotFoundError,
    InvalidInputError,
    JavaNotFoundError,
    LabformatError,
    LockTimeoutError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    TimelineHoleError,
    WriteConflictError,
    from_task_failure,
    task_errors,
)
from labformat.spark import ship_labformat, spark_session
from labformat.table import Table
from labformat.model import Instant, WriteReport

__version__ = "0.1.0"

__all__ = [
    "ConcurrentWriteError",
    "ConfigError",
    "CorruptTableError",
    "CleanedInstantError",
    "InstantNotFoundError",
    "InvalidInputError",
    "JavaNotFoundError",
    "LabformatError",
    "LockTimeoutError",
    "SchemaMismatchError",
    "TableExistsError",
    "TableNotFoundError",
    "TimelineHoleError",
    "WriteConflictError",
    "from_task_failure",
    "task_errors",
    "Instant",
    "Table",
    "WriteReport",
    "ship_labformat",
    "spark_session",
]
