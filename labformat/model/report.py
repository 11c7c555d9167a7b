"""Reports: frozen, typed records of what an operation really did, with `to_pandas()` for charts.

What crosses from an operation to its caller is a type here: the index's `TagFunnel`, a query's
`ScanFunnel`, where each answer came from (`Source`), and one details class per operation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from labformat.model.enums import IndexType, Operation, QueryType, StatsSource

if TYPE_CHECKING:
    import pandas as pd

# The upsert's steps, in the order its reports list them (labformat.write.upsert runs them).
UPSERT_STEPS = ("validate", "deduplicate", "latest_file_slices", "tag", "small_files", "record_size",
                "assign_inserts", "start_instant", "write", "commit")

# What a report holds in place of a number that a Spark Connect session cannot measure.
NOT_ON_CONNECT = "not available on Spark Connect"


@dataclass(frozen=True)
class Source:
    """Where a stage or an index took what it judged by, and why when that was not its first choice
    (`footers` because the metadata table's stats were stale, ...) or what it left unjudged."""

    kind: StatsSource
    why: str | None = None

    def __str__(self) -> str:
        return self.kind.value if not self.why else f"{self.kind.value} ({self.why})"


@dataclass(frozen=True)
class Record:
    """A frozen record of counts: `as_dict()` for tables and frames (what `summary()` flattens)."""

    def as_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


def _plain(value: Any) -> Any:
    """A value as a table cell: a Source or an enum as its text."""
    if isinstance(value, Source):
        return str(value)
    return value.value if isinstance(value, (StatsSource, IndexType, Operation, QueryType)) else value


@dataclass(frozen=True)
class TagFunnel(Record):
    """What an index observed while tagging an upsert's records: file counts, then (key, file) pairs.
    None: the count does not apply to that index (`note` says why)."""

    files_in_snapshot: int
    files_in_affected_partitions: int | None = None
    files_scanned: int | None = None  # SIMPLE: every latest base file of the affected partitions
    after_range_pruning: int | None = None
    after_bloom: int | None = None
    matched: int | None = None  # file groups that really held an incoming key
    false_positives: int | None = None  # files the bloom filter let through in vain
    keys_after_range_pruning: int | None = None
    keys_after_bloom: int | None = None
    keys_matched: int | None = None
    keys_false_positives: int | None = None
    keys_read_by_exact_check: int | None = None
    keys_read: int | None = None  # record keys the index read from storage (SIMPLE: every key it scanned)
    index_entries_read: int | None = None  # RECORD_INDEX: entries of the record index its lookup read
    log_files_read: int | None = None  # merge-on-read: logs that may hold inserts, read by the exact check
    footers_read: int | None = None  # BLOOM: base-file footers opened for key ranges and bloom filters
    metadata_files_read: int | None = None  # BLOOM with hoodie.bloom.index.use.metadata: metadata-table files read
    note: str | None = None


@dataclass(frozen=True)
class ScanFunnel(Record):
    """File slices of a query's snapshot, after each pruning stage, and read."""

    files_in_snapshot: int
    after_partition_pruning: int
    after_bucket_pruning: int  # BUCKET tables fixing the key: the file groups of its buckets; else unchanged
    after_column_stats: int
    after_bloom: int
    files_read: int


@dataclass(frozen=True)
class Details(Record):
    """What one kind of operation adds to its report beyond rows, files and steps."""


@dataclass(frozen=True)
class BulkInsertDetails(Details):
    schema_changes: tuple[str, ...] = ()


@dataclass(frozen=True)
class UpsertDetails(Details):
    """An upsert's or a delete's sizing and lookup (steps 1 to 7); for an empty write only the first two."""

    index_type: IndexType
    shuffle_parallelism: int
    lookup_source: Source | None = None
    record_size: int | None = None
    record_size_source: str | None = None
    small_files: int | None = None
    # Step 6's plan, by the record-size estimate: inserts assigned to the small files. Rows reach a
    # file group by a hash of the key weighted by that plan (Hudi's UpsertPartitioner), so the
    # inserts each file really took differ by a few (FileReport.inserts).
    small_file_inserts_planned: int | None = None
    write_targets: int | None = None
    bytes_read: int | None = None
    incoming_bytes: int | None = None
    write_amplification: float | None = None
    schema_changes: tuple[str, ...] = ()
    # Merge-on-read with hoodie.compact.inline: the count that decided, and the setting.
    delta_commits_since_compaction: int | None = None
    compact_inline_max_delta_commits: int | None = None
    inline_compaction: str | None = None  # why no compaction followed although one was due


@dataclass(frozen=True)
class CompactionDetails(Details):
    strategy: str
    file_slices_compacted: int
    log_files_compacted: int
    log_bytes_compacted: int
    plan: tuple[dict[str, Any], ...] = ()
    bytes_read: int | None = None


@dataclass(frozen=True)
class ClusteringDetails(Details):
    sort_columns: tuple[str, ...]
    clustering_groups: int
    files_in: int
    bytes_in: int
    plan: tuple[dict[str, Any], ...] = ()
    files_out: int = 0
    bytes_out: int = 0
    bytes_read: int | None = None
    layout: str = "linear"  # hoodie.layout.optimize.strategy


@dataclass(frozen=True)
class CleanDetails(Details):
    policy: str
    retained: int
    earliest_commit_to_retain: str | None
    earliest_readable_instant: str | None
    file_slices_deleted: int
    replaced_file_groups_deleted: int
    finished_dead_cleans: tuple[str, ...] = ()
    files_deleted: int = 0
    bytes_freed: int = 0


@dataclass(frozen=True)
class IndexDetails(Details):
    """The metadata table rebuilt for the latest commit from the base files themselves."""

    files: int
    of_instant: str | None = None


@dataclass(frozen=True)
class StepReport:
    """One named step of an operation: wall time and the Spark tasks it really ran."""

    name: str
    seconds: float
    tasks: int
    jobs: int | str = 0  # NOT_ON_CONNECT on a Spark Connect session (its progress reports count no jobs)
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

    operation: Operation
    instant: str | None  # None when nothing was committed (an empty batch)
    rows_in: int
    rows_written: int
    rows_inserted: int
    rows_updated: int = 0
    rows_deleted: int = 0
    rows_deduplicated: int = 0
    steps: tuple[StepReport, ...] = ()
    files: tuple[FileReport, ...] = ()
    funnel: TagFunnel | None = None  # upserts and deletes: what the index observed
    options: dict[str, Any] = field(default_factory=dict)
    rolled_back: tuple[str, ...] = ()
    details: Details | None = None  # the operation's own: sizing, plans, bytes read, ...
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

    def to_pandas(self) -> pd.DataFrame:
        """One row per base file written (key range, rows, bytes), for charts."""
        import pandas as pd

        rows = [dict(asdict(f), instant=self.instant, operation=self.operation) for f in self.files]
        columns = ["instant", "operation"] + list(FileReport.__dataclass_fields__)
        return pd.DataFrame(rows, columns=columns)

    def steps_to_pandas(self) -> pd.DataFrame:
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
            **{f"funnel_{k}": v for k, v in (self.funnel.as_dict() if self.funnel else {}).items() if k != "note"},
            **{k: v for k, v in (self.details.as_dict() if self.details else {}).items() if k != "plan"},
            **{f"{s.name}_s": round(s.seconds, 3) for s in self.steps},
            **{f"{s.name}_tasks": s.tasks for s in self.steps},
            **({"compaction_instant": self.compaction.instant, "compaction_seconds": round(self.compaction.seconds, 3)}
               if self.compaction is not None else {}),
        }
