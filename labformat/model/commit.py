"""Commit metadata: what a completed instant wrote, in Hudi's JSON shape (`partitionToWriteStats`, ...)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

NULL_COMMIT = "null"  # Hudi writes the string "null" as prevCommit of a new file group
# extraMetadata key: bytes of the record-key bloom filters in the footers of the files a commit
# wrote (sized by bloom_num_entries, not by the rows: per-file overhead the record size excludes).
BLOOM_FILTER_BYTES_KEY = "labformat.bloomFilterBytes"
SPARK_SCHEMA_KEY = "labformat.sparkSchema"  # extraMetadata key: the exact Spark schema of the data columns
# extraMetadata key: when the commit completed, as an instant-style time later than every instant
# and completion before it. With concurrent writers an instant may complete after a later one;
# version-6 timeline file names hold no completion time (Hudi 1.x added one), so it lives here.
COMPLETION_TIME_KEY = "labformat.completionTime"
# extraMetadata key of a delta commit: "true" when its log files hold only keys their file slice's
# base file already holds (updates and deletes: its writer's index sends inserts to base files, as
# BLOOM and SIMPLE do). A slice whose logs all say so is keyed by its base file alone: range
# pruning, bloom filters and record-key stats of the base file cover the whole slice. Hudi writes
# no such key (and its bucket or Flink writers put inserts in logs), so its logs never count.
LOG_KEYS_IN_BASE_KEY = "labformat.logKeysInBaseFile"
# extraMetadata key of a CDC table's commit: its change-record files (a JSON list of paths), the ones
# its successful task attempts wrote. A retried task's earlier attempt may have published a file too;
# readers take the listed files only.
CDC_FILES_KEY = "labformat.cdcFiles"


@dataclass(frozen=True)
class WriteStat:
    """One base file written by one instant (Hudi's HoodieWriteStat, the fields we fill)."""

    partition_path: str
    file_id: str
    path: str
    prev_commit: str = NULL_COMMIT
    num_writes: int = 0
    num_inserts: int = 0
    num_update_writes: int = 0
    num_deletes: int = 0
    file_size_bytes: int = 0
    total_write_bytes: int = 0
    create_time_ms: int = 0
    # Merge-on-read log files: `path` is the log file, `base_file` the name of its file slice's base
    # file, `log_files` the log file's name, `log_version` its version (Hudi's MOR write stat fields).
    base_file: str | None = None
    log_files: tuple[str, ...] = ()
    log_version: int = 0

    @property
    def is_log_file(self) -> bool:
        return bool(self.log_files)

    def to_json_dict(self) -> dict[str, Any]:
        out = self._common_json()
        if self.is_log_file:
            out.update(logVersion=self.log_version, logOffset=0, baseFile=self.base_file, logFiles=list(self.log_files))
        return out

    def _common_json(self) -> dict[str, Any]:
        return {
            "fileId": self.file_id,
            "path": self.path,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": 0,
            "tempPath": None,
            "partitionPath": self.partition_path,
            "totalLogRecords": 0,
            "totalLogFilesCompacted": 0,
            "totalLogSizeCompacted": 0,
            "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size_bytes,
            "minEventTime": None,
            "maxEventTime": None,
            "runtimeStats": {"totalScanTime": 0, "totalUpsertTime": 0, "totalCreateTime": self.create_time_ms},
        }

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> "WriteStat":
        """A write stat from the commit's JSON; ValueError naming the field when one has the wrong type
        (a path or file id that is no string would break every reader and writer downstream)."""
        if not isinstance(d, dict):
            raise ValueError(f"a write stat is no JSON object: {d!r}"[:200])
        for name, required in (("fileId", True), ("path", True), ("partitionPath", False), ("prevCommit", False),
                               ("baseFile", False)):
            value = d.get(name)
            if (value is None and required) or (value is not None and not isinstance(value, str)):
                raise ValueError(f"write stat field {name!r} must be a string, got {value!r}"[:200])
        logs = d.get("logFiles") or ()
        if not isinstance(logs, (list, tuple)) or not all(isinstance(x, str) for x in logs):
            raise ValueError(f"write stat field 'logFiles' must be a list of strings, got {logs!r}"[:200])
        runtime = d.get("runtimeStats") or {}
        if not isinstance(runtime, dict):
            raise ValueError(f"write stat field 'runtimeStats' must be an object, got {runtime!r}"[:200])
        return cls(
            partition_path=d.get("partitionPath") or "",
            file_id=d["fileId"],
            path=d["path"],
            prev_commit=d.get("prevCommit") or NULL_COMMIT,
            num_writes=int(d.get("numWrites") or 0),
            num_inserts=int(d.get("numInserts") or 0),
            num_update_writes=int(d.get("numUpdateWrites") or 0),
            num_deletes=int(d.get("numDeletes") or 0),
            file_size_bytes=int(d.get("fileSizeInBytes") or 0),
            total_write_bytes=int(d.get("totalWriteBytes") or 0),
            create_time_ms=int(runtime.get("totalCreateTime") or 0),
            base_file=d.get("baseFile") or None,
            log_files=tuple(d.get("logFiles") or ()),
            log_version=int(d.get("logVersion") or 0),
        )


@dataclass(frozen=True)
class CommitMetadata:
    """The JSON body of a completed commit: its write stats, schema and operation type.

    `replaced_file_ids` (partition -> fileIds) is set by replacecommits: those file groups
    end at this instant.
    """

    operation_type: str
    write_stats: tuple[WriteStat, ...] = ()
    extra_metadata: dict[str, str] = field(default_factory=dict)
    replaced_file_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def schema(self) -> str | None:
        return self.extra_metadata.get("schema")

    @property
    def bloom_filter_bytes(self) -> int:
        """Bytes of bloom filters in the footers of the files written (0 when not recorded)."""
        return int(self.extra_metadata.get(BLOOM_FILTER_BYTES_KEY) or 0)

    def partition_to_write_stats(self) -> dict[str, list[WriteStat]]:
        out: dict[str, list[WriteStat]] = {}
        for stat in self.write_stats:
            out.setdefault(stat.partition_path, []).append(stat)
        return out

    def to_json(self) -> str:
        body: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_json_dict() for s in stats] for p, stats in self.partition_to_write_stats().items()
            },
            "compacted": False,
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }
        if self.replaced_file_ids:
            body["partitionToReplaceFileIds"] = {p: list(ids) for p, ids in self.replaced_file_ids.items()}
        return json.dumps(body, indent=2, sort_keys=False)

    @classmethod
    def from_json(cls, text: str) -> "CommitMetadata":
        """Parse a commit body; raises ValueError (with the reason) when it is not one."""
        try:
            body = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from exc
        if not isinstance(body, dict) or "partitionToWriteStats" not in body:
            raise ValueError("no partitionToWriteStats")
        per_partition = body["partitionToWriteStats"] or {}
        if not isinstance(per_partition, dict) or not all(isinstance(v, list) for v in per_partition.values()):
            raise ValueError("partitionToWriteStats is not an object of lists")
        stats = tuple(WriteStat.from_json_dict(s) for stats in per_partition.values() for s in stats)
        replaced_raw = body.get("partitionToReplaceFileIds") or {}
        if not isinstance(replaced_raw, dict) or not all(
                isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in replaced_raw.values()):
            raise ValueError("partitionToReplaceFileIds is not an object of lists of file ids")
        replaced = {p: tuple(ids) for p, ids in replaced_raw.items()}
        extra = body.get("extraMetadata") or {}
        if not isinstance(extra, dict):
            raise ValueError("extraMetadata is not an object")
        return cls(
            operation_type=body.get("operationType") or "UNKNOWN",
            write_stats=stats,
            extra_metadata=dict(extra),
            replaced_file_ids=replaced,
        )
