"""File sizing for upserts: small files, the average record size, and bin packing of inserts (steps 4-6)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from labformat.model.commit import CommitMetadata
from labformat.model.file_group import FileSlice


@dataclass(frozen=True)
class InsertBucket:
    """Where a share of a partition's inserts goes: an existing small file group, or a new one.

    `weight` is the bucket's share of the partition's inserts; inserts are routed by a hash
    of their key into [0, 1), bucket by bucket, so the split needs no coordination.
    """

    partition_path: str
    file_id: str | None  # None: a new file group, named when the write starts
    records: int
    weight: float
    small_file: FileSlice | None = None


def small_files(slices: Iterable[FileSlice], small_file_limit: int) -> list[FileSlice]:
    """Step 4: base files below `hoodie.parquet.small.file.limit`, smallest first (0 turns it off).

    A file slice with log files is never a small file (merge-on-read): an insert into it would
    rewrite its base file while its logs stay apart, and Hudi's BLOOM index, which cannot index
    logs, picks small files among slices without logs only.
    """
    if small_file_limit <= 0:
        return []
    return sorted((s for s in slices if s.size_bytes < small_file_limit and not s.has_logs),
                  key=lambda s: (s.size_bytes, s.path))


def average_record_size(commits: Iterable[CommitMetadata], threshold: float, small_file_limit: int,
                        default: int) -> tuple[int, str]:
    """Step 5: bytes per record from the newest commit that wrote enough bytes to be a fair sample.

    Returns (bytes per record, where it came from). A commit counts when its bytes written
    exceed `threshold * small_file_limit` (Hudi's hoodie.record.size.estimation.threshold);
    tiny commits would give a noisy, footer-dominated estimate. The bytes exclude the files'
    bloom filters: sized by `bloom_num_entries` whatever a file holds (60,000 keys at 1e-9 is
    ~420 KB per footer), they are per-file overhead, like the footer `max_file_size` leaves out.
    (Hudi counts them; at its file sizes they are a fraction of a percent.)
    """
    for commit in reversed(list(commits)):
        # Base files only: a delta commit's log files hold Avro records, not the parquet rows sized here.
        stats = [s for s in commit.write_stats if not s.is_log_file]
        written = sum(s.total_write_bytes for s in stats) - commit.bloom_filter_bytes
        records = sum(s.num_writes for s in stats)
        if records > 0 and written > threshold * small_file_limit:
            return max(1, math.ceil(written / records)), "commit history"
    return default, "hoodie.copyonwrite.record.size.estimate"


def assign_inserts(inserts: dict[str, int], small_by_partition: dict[str, list[FileSlice]],
                   record_size: int, max_file_size: int) -> list[InsertBucket]:
    """Step 6: fill each partition's small files up to the max size, then open new file groups.

    Mirrors Hudi's UpsertPartitioner: a small file takes `(max - size) / record size` more
    records; the rest go to new file groups of `max / record size` records each.
    """
    per_file = max(1, max_file_size // record_size)
    buckets: list[InsertBucket] = []
    for partition in sorted(inserts):
        total = inserts[partition]
        if total <= 0:
            continue
        left = total
        for small in small_by_partition.get(partition, []):
            if left <= 0:
                break
            room = (max_file_size - small.size_bytes) // record_size
            take = min(left, room)
            if take > 0:
                buckets.append(InsertBucket(partition, small.file_id, take, take / total, small))
                left -= take
        new_groups = math.ceil(left / per_file) if left > 0 else 0
        for _ in range(new_groups):
            take = min(per_file, left)
            buckets.append(InsertBucket(partition, None, take, take / total))
            left -= take
    return buckets
