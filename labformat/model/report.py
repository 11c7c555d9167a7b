"""Reports: frozen, typed records of what an operation really did, with `to_pandas()` for charts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

# The upsert's steps, in the order its reports list them (labformat.write.upsert runs them).
UPSERT_STEPS = ("validate", "deduplicate", "latest_file_slices", "tag", "small_files", "record_size",
                "assign_inserts", "start_instant", "write", "commit")


@dataclass(frozen=True)
class StepReport:
    """One named step of an operation: wall time and the Spark tasks it really ran."""

    name: str
    seconds: float
    tasks: int
    jobs: int = 0
    # The Spark job group the step ran under (for the UI's task timelines); for a step whose work ran
    # inside a later step's job (jobs 0, see StepRecorder.ran_in), that step's group.
    group: str | None = None


@dataclass(frozen=True)
class FileReport:
    """One file an operation wrote: a base file (a new file slice of a new or existing file group)
    or, on a merge-on-read table, a log file appended to a file group's latest slice."""

    partition_path: str
    file_id: str
    path: str
    rows: int
    size_bytes: int
    min_key: str | None
    max_key: str | None
    created: bool  # a new file group (True) or a new slice of an existing one (False)
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    prev_size_bytes: int = 0
    prev_min_key: str | None = None
    prev_max_key: str | None = None
    log_file: bool = False  # merge-on-read: a log file appended to the file group's latest slice


@dataclass(frozen=True)
class WriteReport:
    """What one write did. Every number comes from the run: task counts from Spark, files
    and sizes from the stats the write tasks returned."""

    operation: str
    instant: str | None  # None when nothing was committed (an empty batch)
    rows_in: int
    rows_written: int
    rows_inserted: int
    rows_updated: int = 0
    rows_deleted: int = 0
    rows_deduplicated: int = 0
    steps: tuple[StepReport, ...] = ()
    files: tuple[FileReport, ...] = ()
    funnel: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    rolled_back: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)  # index type, parallelism, bytes read, ...
    # Merge-on-read with hoodie.compact.inline: the compaction this write's writer ran after it committed.
    compaction: "WriteReport | None" = None

    @property
    def files_created(self) -> int:
        return sum(1 for f in self.files if f.created)

    @property
    def files_rewritten(self) -> int:
        """Base files written as a new slice of an existing file group (copy-on-write's cost)."""
        return sum(1 for f in self.files if not f.created and not f.log_file)

    @property
    def log_files_written(self) -> int:
        """Log files appended to existing file slices (merge-on-read)."""
        return sum(1 for f in self.files if f.log_file)

    @property
    def bytes_written(self) -> int:
        return sum(f.size_bytes for f in self.files)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def step(self, name: str) -> StepReport:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(f"no step {name!r}; steps: {[s.name for s in self.steps]}")

    def to_pandas(self):
        """One row per base file written (key range, rows, bytes), for charts."""
        import pandas as pd

        rows = [dict(asdict(f), instant=self.instant, operation=self.operation) for f in self.files]
        columns = ["instant", "operation"] + list(FileReport.__dataclass_fields__)
        return pd.DataFrame(rows, columns=columns)

    def steps_to_pandas(self):
        import pandas as pd

        return pd.DataFrame([asdict(s) for s in self.steps], columns=list(StepReport.__dataclass_fields__))

    def summary(self) -> dict[str, Any]:
        """The headline numbers, flat, for tables and logs."""
        return {
            "operation": self.operation,
            "instant": self.instant,
            "rows_in": self.rows_in,
            "rows_written": self.rows_written,
            "rows_inserted": self.rows_inserted,
            "rows_updated": self.rows_updated,
            "rows_deleted": self.rows_deleted,
            "rows_deduplicated": self.rows_deduplicated,
            "files_created": self.files_created,
            "files_rewritten": self.files_rewritten,
            "log_files_written": self.log_files_written,
            "bytes_written": self.bytes_written,
            "seconds": round(self.seconds, 3),
            **{f"funnel_{k}": v for k, v in self.funnel.items() if k != "note"},
            **{k: v for k, v in self.details.items()},
            **{f"{s.name}_s": round(s.seconds, 3) for s in self.steps},
            **{f"{s.name}_tasks": s.tasks for s in self.steps},
            **({"compaction_instant": self.compaction.instant, "compaction_seconds": round(self.compaction.seconds, 3)}
               if self.compaction is not None else {}),
        }
