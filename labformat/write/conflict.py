"""The conflict check at commit: did a write that completed after this write's snapshot rewrite one of its file groups?"""

from __future__ import annotations

from typing import Iterable

from labformat.errors import WriteConflictError
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


def committed_since(snapshot: Timeline, current: Timeline, own: Instant) -> list[Instant]:
    """The completed writes of `current` that `snapshot` did not have as completed: what other
    writers committed after this write read the table (whatever their instant times)."""
    seen = {i.time for i in snapshot.completed_writes()}
    return [i for i in current.completed_writes() if i.time not in seen and i.time != own.time]


def check_conflicts(snapshot: Timeline, current: Timeline, own: Instant, written: Iterable[WriteStat],
                    touched: Iterable[FileGroupId] = ()) -> None:
    """WriteConflictError when a write committed since `snapshot` changed a file group this write wrote.

    The write planned each of its file groups' new slices from the slice `snapshot` showed; a
    slice committed meanwhile would be hidden by this write's, and its rows lost. New file groups
    have fresh random ids, so writes that only add file groups never conflict (Hudi's
    file-group-level optimistic concurrency control). Two writers that each insert the same new
    record key into new file groups both commit: a conflict is a shared file group, not a key.
    `touched`: file groups this write changes without writing them (a clustering's replaced ones).
    """
    ours = {(w.partition_path, w.file_id) for w in written} | set(touched)
    for other in committed_since(snapshot, current, own):
        shared = sorted(ours & file_groups_written(current.commit_metadata(other)))
        if shared:
            named = ", ".join(f"{p}/{fid}" if p else fid for p, fid in shared[:_SHOWN])
            more = f" and {len(shared) - _SHOWN} more" if len(shared) > _SHOWN else ""
            raise WriteConflictError(
                f"write conflict: commit {other.time}, completed after this write read the table, also "
                f"wrote file group(s) {named}{more}. This write (instant {own.time}) was rolled back and "
                "the table is as it was before it; run it again to plan it on the new snapshot",
                instant=own.time, other=other.time, file_groups=tuple(shared))
