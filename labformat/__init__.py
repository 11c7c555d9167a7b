"""labformat: a teaching table format modelled on Apache Hudi copy-on-write tables, on PySpark."""

from labformat.errors import (
    ConfigError,
    CorruptTableError,
    InstantNotFoundError,
    InvalidInputError,
    JavaNotFoundError,
    LabformatError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
)
from labformat.spark import spark_session
from labformat.table import Table
from labformat.model import Instant, WriteReport

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CorruptTableError",
    "InstantNotFoundError",
    "InvalidInputError",
    "JavaNotFoundError",
    "LabformatError",
    "SchemaMismatchError",
    "TableExistsError",
    "TableNotFoundError",
    "Instant",
    "Table",
    "WriteReport",
    "spark_session",
]
