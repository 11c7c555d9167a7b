"""Steps 3-6 of an upsert, planned on the driver: the workload profile, small files, record size, inserts packed."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import AbstractSet, Any, NamedTuple


from labformat.config import WriteOptions
from labformat.context import TableContext
from labformat.helper_columns import (
    BUCKET, FILE_ID, PART
)
from labformat.index.base import TagResult
from labformat.index.bucket import bucket_prefix
from labformat.model.base_file import new_file_id
from labformat.model.enums import IndexType, Operation
from labformat.model.file_group import FileSlice
from labformat.spark.partitioning import grouped_counts
from labformat.write import sizing
from labformat.write.merge import Target
from labformat.write.dedupe import PartitionCount


class ProfileRow(NamedTuple):
    partition: str
    file_id: str | None  # None: inserts
    bucket: int | None  # BUCKET index only
    records: int


@dataclass(frozen=True)
class Profile:
    """The workload profile: records per (partition, file group or bucket), and the input's totals."""

    rows: list[ProfileRow]
    rows_in: int  # input rows, before deduplication
    records: int  # records after deduplication

    def inserts_per_partition(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            if r.file_id is None:
                out[r.partition] = out.get(r.partition, 0) + r.records
        return out

    def updates_per_file_group(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for r in self.rows:
            if r.file_id is not None:
                out[(r.partition, r.file_id)] = out.get((r.partition, r.file_id), 0) + r.records
        return dict(sorted(out.items()))  # in key order: the rows come in the order Spark collected them

    def updated_file_groups(self) -> list[tuple[str, str]]:
        return list(self.updates_per_file_group())


def workload_profile(tag: TagResult, counts: dict[str, PartitionCount], index_type: IndexType,
                     tasks: int) -> Profile:
    """Records per file group (updates) and per partition (inserts).

    BLOOM counted its matches per file group while checking keys, so inserts are step 1's
    count less those; the other indexes count their tagged records in one more pass.
    """
    rows_in = sum(c.rows_in for c in counts.values())
    records = sum(c.records for c in counts.values())
    if tag.updates is not None:
        matched: dict[str, int] = {}
        rows = []
        for part, file_id, n in tag.updates:
            rows.append(ProfileRow(part, file_id, None, n))
            matched[part] = matched.get(part, 0) + n
        rows += [ProfileRow(part, None, None, c.records - matched.get(part, 0))
                 for part, c in sorted(counts.items()) if c.records > matched.get(part, 0)]
        return Profile(rows, rows_in, records)
    by_bucket = index_type is IndexType.BUCKET
    columns = [PART, FILE_ID] + ([BUCKET] if by_bucket else [])
    grouped = grouped_counts(tag.tagged, columns, {"records": None}, tasks).collect()
    rows = [ProfileRow(r[PART], r[FILE_ID], r[BUCKET] if by_bucket else None, r.records) for r in grouped]
    if tag.keys_observed is not None:  # the count above computed the (persisted) tagged records: the join ran
        observed: dict[str, Any] = {name: int(n) for name, n in tag.keys_observed.get.items()}  # TagFunnel's int fields
        tag.funnel = replace(tag.funnel, **observed)
    return Profile(rows, rows_in, records)


def find_small_files(slices: list[FileSlice], options: WriteOptions) -> dict[str, list[FileSlice]]:
    """Step 4: small files per partition, the first place inserts go."""
    out: dict[str, list[FileSlice]] = {}
    for s in sizing.small_files(slices, options.small_file_limit):
        out.setdefault(s.partition_path, []).append(s)
    return out


def estimate_record_size(ctx: TableContext, options: WriteOptions) -> tuple[int, str]:
    """Step 5: average bytes per record from the commit history."""
    timeline = ctx.timeline
    commits = [timeline.commit_metadata(i) for i in timeline.completed_writes()]
    return sizing.average_record_size(commits, options.record_size_estimation_threshold, options.small_file_limit,
                                      options.record_size_estimate)


@dataclass
class WritePlan:
    """The targets of the write (one Spark task each) and how records are routed to them."""

    targets: list[Target]
    update_routes: list[tuple[str, str, int]]  # (partition, file id, target)
    insert_routes: list[tuple[str, float, float, int]]  # (partition, lo, hi, target): hash share of inserts
    bucket_routes: list[tuple[str, int, int]]  # BUCKET: (partition, bucket, target)
    insert_buckets: list[sizing.InsertBucket]


# An incoming row costs a write task about five times a row carried over from the old base file:
# it crosses from the JVM, is sorted and hashed into a new bloom filter. Measured at `medium`:
# ~6.6 us per inserted row against ~1.2 us per carried-over row (2-core machine).
INCOMING_ROW_COST = 5


def task_cost(old: FileSlice | None, incoming_records: int, record_size: int) -> int:
    """A write task's expected work, in bytes of carried-over rows: its old base file, plus its
    incoming records weighted by INCOMING_ROW_COST."""
    return (old.size_bytes if old else 0) + INCOMING_ROW_COST * incoming_records * record_size


def assign_inserts(profile: Profile, slices: list[FileSlice], small: dict[str, list[FileSlice]],
                   record_size: int, options: WriteOptions, index_type: IndexType, operation: Operation,
                   merge_on_read: bool = False) -> WritePlan:
    """Step 6: every update's file group is a target; inserts fill small files, then new file groups.
    On a merge-on-read table, update-only and delete targets append log files (`with_log_appends`)."""
    latest = {(s.partition_path, s.file_id): s for s in slices}
    targets: list[Target] = []
    index_of: dict[tuple[str, str], int] = {}

    def target_for(part: str, file_id: str | None, prefix: str | None = None) -> int:
        if file_id is None:
            file_id = new_file_id(prefix)
        key = (part, file_id)
        if key not in index_of:
            old = latest.get(key)
            index_of[key] = len(targets)
            targets.append(Target(part, file_id, old.path if old else None,
                                  old.base_instant_time if old else "null", prefix))
        return index_of[key]

    if index_type is IndexType.BUCKET:
        routes: list[tuple[str, int, int]] = []
        for r in profile.rows:
            assert r.bucket is not None  # a BUCKET index's profile counts per bucket
            # A consistent-hashing bucket's file id comes from its ring, whether its file group exists yet or not.
            exists = r.file_id is not None and (r.partition, r.file_id) in latest
            if operation is Operation.DELETE and not exists:
                continue  # no file group in that bucket: nothing to delete
            prefix = bucket_prefix(r.bucket) if r.file_id is None or exists else r.file_id
            routes.append((r.partition, r.bucket, target_for(r.partition, r.file_id, prefix)))
        plan = WritePlan(targets, [], [], sorted(set(routes)), [])
        # Merge-on-read: a bucket's file group is fixed, so its inserts go to its log with its updates
        # (Hudi's bucket index can index log files); only a bucket's first records make a base file.
        return with_log_appends(plan, latest, bucket=True) if merge_on_read else plan

    updated = profile.updated_file_groups()
    if operation is Operation.DELETE:
        by_size = sorted(updated, key=lambda pf: -(latest[pf].size_bytes if pf in latest else 0))
        plan = WritePlan(targets, [(p, f, target_for(p, f)) for p, f in by_size], [], [], [])
        return with_log_appends(plan, latest) if merge_on_read else plan
    buckets = sizing.assign_inserts(profile.inserts_per_partition(), small, record_size, options.max_file_size)
    # New file groups are named now, so that each can be ranked with the others before it has a task.
    bucket_keys = [(b.partition_path, b.file_id or new_file_id()) for b in buckets]
    incoming = profile.updates_per_file_group()
    for key, b in zip(bucket_keys, buckets):
        incoming[key] = incoming.get(key, 0) + b.records
    # Spark starts a stage's tasks in partition order, and a file group's task is its target's
    # index: the costliest first (longest processing time first), so that no long task starts
    # last while the other cores idle. Ties keep the order above (file groups sorted, then insert
    # buckets): never the random new file ids, since the task index is written into every
    # row's commit seqno, and with it the file's size.
    for key in sorted(incoming, key=lambda k: -task_cost(latest.get(k), incoming[k], record_size)):
        target_for(*key)
    update_routes = [(p, f, index_of[(p, f)]) for p, f in updated]
    insert_routes = []
    cumulative: dict[str, float] = {}
    last_of_partition = {b.partition_path: i for i, b in enumerate(buckets)}
    for i, (key, b) in enumerate(zip(bucket_keys, buckets)):
        lo = cumulative.get(b.partition_path, 0.0)
        hi = 2.0 if last_of_partition[b.partition_path] == i else lo + b.weight  # the last share takes the rest
        cumulative[b.partition_path] = hi
        insert_routes.append((b.partition_path, lo, hi, index_of[key]))
    plan = WritePlan(targets, update_routes, insert_routes, [], buckets)
    return with_log_appends(plan, latest, insert_targets={t for *_, t in insert_routes}) if merge_on_read else plan


def with_log_appends(plan: WritePlan, latest: dict[tuple[str, str], FileSlice],
                     insert_targets: AbstractSet[int] = frozenset(), bucket: bool = False) -> WritePlan:
    """Merge-on-read: each existing file group that takes updates or deletes only appends a log file
    to its latest slice; one that also takes inserts (a small file, which has no logs) is merged
    into a new base file, as on copy-on-write."""
    targets = []
    for i, t in enumerate(plan.targets):
        old = latest.get((t.partition_path, t.file_id))
        if old is not None and i not in insert_targets:
            t = replace(t, log_version=max((f.version for f in old.log_files), default=0) + 1,
                        slice_logs=old.log_paths if bucket else None)
        targets.append(t)
    return replace(plan, targets=targets)
