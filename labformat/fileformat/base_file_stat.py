"""What a write task returns per base file it wrote: one frozen dataclass; its fields make the Spark DDL and Arrow schema."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterable

import pyarrow as pa

from labformat.model.commit import NULL_COMMIT, WriteStat
from labformat.model.report import FileReport
from labformat.model.enums import BloomFilterTypeCode

if TYPE_CHECKING:
    from pyspark.sql import Row

_ARROW_TYPE = "arrow_type"
# mapInArrow fails unless each batch's Arrow types are exactly the DDL's: Spark's int is
# Arrow's int32, its long int64. Only the types the stat uses are listed.
_SPARK_TYPES = {pa.string(): "string", pa.int64(): "long", pa.int32(): "int"}


def _column(arrow_type: pa.DataType, *default: Any) -> Any:
    if default:
        return field(default=default[0], metadata={_ARROW_TYPE: arrow_type})
    return field(metadata={_ARROW_TYPE: arrow_type})


@dataclass(frozen=True)
class BaseFileStat:
    """One base file a write task wrote, as the task saw it (Hudi's HoodieWriteStat is the part of
    it the commit keeps: `to_write_stat`). The driver turns each collected row into one with
    `from_row`; the field order is the Spark row's column order."""

    partition_path: str = _column(pa.string())
    file_id: str = _column(pa.string())
    path: str = _column(pa.string())  # relative to the table's base path
    prev_commit: str = _column(pa.string())  # the file group's previous base instant; "null": a new file group
    num_writes: int = _column(pa.int64())  # rows in the new base file
    num_inserts: int = _column(pa.int64())
    num_update_writes: int = _column(pa.int64())
    num_deletes: int = _column(pa.int64())
    file_size: int = _column(pa.int64())
    min_key: str | None = _column(pa.string())  # None: the base file has no rows
    max_key: str | None = _column(pa.string())
    write_ms: int = _column(pa.int64())
    bloom_ms: int = _column(pa.int64())
    task_partition: int = _column(pa.int32())
    task_attempt: int = _column(pa.int32())
    # The base file this one replaces (a merge into an existing file group; else None, None, 0).
    prev_min_key: str | None = _column(pa.string())
    prev_max_key: str | None = _column(pa.string())
    prev_size: int = _column(pa.int64())
    incoming_bytes: int = _column(pa.int64())  # the incoming rows alone as parquet: write amplification's denominator
    column_stats: str = _column(pa.string())  # JSON, per column: [min, max, nulls, values, NaNs]
    bloom: str | None = _column(pa.string())  # the encoded filter, only when the metadata table keeps them
    bloom_bytes: int = _column(pa.int64())  # the filter's bytes in the footer: per-file overhead, not per-record
    # Merge-on-read: set when the task wrote a log file (`path`) rather than a base file: the name of
    # its file slice's base file, and the log file's version. None and 0 for a base file.
    base_file: str | None = _column(pa.string(), None)
    log_version: int = _column(pa.int32(), 0)
    bloom_type: str = _column(pa.string(), BloomFilterTypeCode.SIMPLE.value)  # hoodie.bloom.index.filter.type

    @classmethod
    def arrow_schema(cls) -> pa.Schema:
        return pa.schema([(f.name, f.metadata[_ARROW_TYPE]) for f in fields(cls)])

    @classmethod
    def spark_ddl(cls) -> str:
        """The schema `mapInArrow` is given for the write tasks' output."""
        return ", ".join(f"{f.name} {_SPARK_TYPES[f.metadata[_ARROW_TYPE]]}" for f in fields(cls))

    @classmethod
    def record_batch(cls, stats: Iterable["BaseFileStat"]) -> pa.RecordBatch:
        """What a write task yields: its stats as one Arrow batch of `arrow_schema()`."""
        return pa.RecordBatch.from_pylist([asdict(s) for s in stats], schema=cls.arrow_schema())

    @classmethod
    def from_row(cls, row: Row) -> "BaseFileStat":
        """A row the write tasks returned, as collected by the driver (a Spark Row)."""
        return cls(**row.asDict())

    @property
    def created(self) -> bool:
        """Whether this base file starts a new file group (Hudi writes prevCommit "null" for one)."""
        return self.prev_commit == NULL_COMMIT

    @property
    def is_log_file(self) -> bool:
        return self.base_file is not None

    def to_write_stat(self) -> WriteStat:
        """The commit metadata's entry for this base file (or log file)."""
        log: dict[str, Any] = {"base_file": self.base_file, "log_files": (self.path.rsplit("/", 1)[-1],),
                               "log_version": self.log_version} if self.is_log_file else {}
        return WriteStat(
            partition_path=self.partition_path, file_id=self.file_id, path=self.path, prev_commit=self.prev_commit,
            num_writes=self.num_writes, num_inserts=self.num_inserts, num_update_writes=self.num_update_writes,
            num_deletes=self.num_deletes, file_size_bytes=self.file_size, total_write_bytes=self.file_size,
            create_time_ms=self.write_ms, **log,
        )

    def to_file_report(self) -> FileReport:
        """The write report's entry for this base file."""
        return FileReport(
            self.partition_path, self.file_id, self.path, self.num_writes, self.file_size, self.min_key, self.max_key,
            created=self.created, inserts=self.num_inserts, updates=self.num_update_writes, deletes=self.num_deletes,
            prev_size_bytes=self.prev_size, prev_min_key=self.prev_min_key, prev_max_key=self.prev_max_key,
            log_file=self.is_log_file,
        )
