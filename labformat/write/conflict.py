"""The conflict check at commit: did a write that completed after this write's snapshot rewrite one of its file groups?"""

from __future__ import annotations

from typing import Iterable

from labformat.errors import WriteConflictError
from labformat.index.bucket import bucket_of_file_id, is_bucket_file_id
from labformat.model.commit import CommitMetadata, WriteStat
from labformat.model.instant import Instant
from labformat.timeline import Timeline

FileGroupId = tuple[str, str]  # (partition path, file id)
_SHOWN = 5  # file groups named in an error message; the rest are counted


def file_groups_written(metadata: CommitMetadata) -> set[FileGroupId]:
    """The file groups a completed write changed: those it wrote a slice of, and those it replaced."""
    groups = {(s.partition_path, s.file_id) for s in metadata.write_stats}
    groups.update((p, fid) for p, ids in metadata.replaced_file_ids.items() for fid in ids)
    return groups


def file_groups_replaced(metadata: CommitMetadata) -> set[FileGroupId]:
    return {(p, fid) for p, ids in metadata.replaced_file_ids.items() for fid in ids}


def committed_since(snapshot: Timeline, current: Timeline, own: Instant) -> list[Instant]:
    """The completed writes of `current` that `snapshot` did not have as completed: what other
    writers committed after this write read the table (whatever their instant times)."""
    seen = {i.time for i in snapshot.completed_writes()}
    return [i for i in current.completed_writes() if i.time not in seen and i.time != own.time]


def _bucket(group: FileGroupId) -> FileGroupId:
    """A SIMPLE-engine bucket table's file group as its (partition, bucket): Hudi names a bucket's file
    group `<bucket as 8 digits>-<random uuid>-0`, so two first writes into one bucket make two file ids."""
    partition, file_id = group
    return (partition, f"bucket {bucket_of_file_id(file_id)}") if is_bucket_file_id(file_id) else group


def _named(groups: list[FileGroupId]) -> str:
    named = ", ".join(f"{p}/{fid}" if p else fid for p, fid in groups[:_SHOWN])
    return named + (f" and {len(groups) - _SHOWN} more" if len(groups) > _SHOWN else "")


def check_conflicts(snapshot: Timeline, current: Timeline, own: Instant, written: Iterable[WriteStat],
                    touched: Iterable[FileGroupId] = (), *, by_bucket: bool = False,
                    ring_nodes: Iterable[FileGroupId] = ()) -> None:
    """WriteConflictError when a write committed since `snapshot` changed a file group this write wrote.

    The write planned each of its file groups' new slices from the slice `snapshot` showed; a
    slice committed meanwhile would be hidden by this write's, and its rows lost. New file groups
    have fresh random ids, so writes that only add file groups never conflict (Hudi's
    file-group-level optimistic concurrency control). Two writers that each insert the same new
    record key into new file groups both commit: a conflict is a shared file group, not a key.
    `touched`: file groups this write changes without writing them (a clustering's replaced ones).

    `by_bucket` (a SIMPLE-engine BUCKET table): file groups compare by (partition, bucket number),
    as Hudi's BucketIndexConcurrentFileWritesConflictResolutionStrategy does, since the file ids of
    one bucket differ by their random part: two first writes into one bucket would otherwise both
    commit, and the bucket then holds two file groups no lookup can choose between.

    `ring_nodes` (a consistent-hashing resize): the file groups its new rings name. The ring was
    derived from the snapshot's; a resize committed meanwhile that replaced one of those nodes has a
    ring of its own that this one would hide, leaving the newest ring naming a file group no reader
    sees (every later write into that bucket lost).
    """
    claim = _bucket if by_bucket else (lambda g: g)
    ours_by_claim: dict[FileGroupId, FileGroupId] = {}
    for group in [(w.partition_path, w.file_id) for w in written] + list(touched):
        ours_by_claim.setdefault(claim(group), group)
    named_by_ring = set(ring_nodes)
    for other in committed_since(snapshot, current, own):
        metadata = current.commit_metadata(other)
        theirs = {claim(g): g for g in file_groups_written(metadata)}
        shared = sorted(ours_by_claim.keys() & theirs.keys())
        if shared:
            groups = sorted({theirs[c] for c in shared} | {ours_by_claim[c] for c in shared})
            what = (f"bucket(s) {', '.join(f'{p}/{b}' if p else b for p, b in shared[:_SHOWN])} (file groups "
                    f"{_named(groups)})") if by_bucket else f"file group(s) {_named(groups)}"
            raise WriteConflictError(
                f"write conflict: commit {other.time}, completed after this write read the table, also "
                f"wrote {what}. This write (instant {own.time}) was rolled back and "
                "the table is as it was before it; run it again to plan it on the new snapshot",
                instant=own.time, other=other.time, file_groups=tuple(groups))
        stale = sorted(named_by_ring & file_groups_replaced(metadata))
        if stale:
            raise WriteConflictError(
                f"write conflict: commit {other.time}, completed after this resize read the table, replaced "
                f"file group(s) {_named(stale)}, which this resize's new hash ring still names: both rings "
                f"cannot count. This resize (instant {own.time}) was rolled back and the table is as it was "
                "before it; run it again to plan it on the new ring",
                instant=own.time, other=other.time, file_groups=tuple(stale))
