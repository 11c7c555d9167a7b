"""The file-system view: file groups and their latest file slice as of an instant, from commit metadata."""

from __future__ import annotations

from typing import Iterable, Sequence
from labformat.errors import CorruptTableError, InvalidInputError
from labformat.model.commit import LOG_KEYS_IN_BASE_KEY
from labformat.model.file_group import FileGroup, FileSlice
from labformat.model.instant import Instant
from labformat.storage import Storage
from labformat.timeline import Timeline


class FileSystemView:
    """Every file group the completed commits up to `as_of` wrote, and each one's latest slice.

    Built from the commits' write stats rather than by listing folders: a listing would
    also see files of failed or in-flight instants, which are not part of the table. So a
    file slice's log files are those of completed delta commits only (up to `as_of`); a log
    file of a rolled-back or in-flight instant is never in a slice.
    """

    def __init__(self, timeline: Timeline, as_of: str | None = None, writes: list[Instant] | None = None):
        """`writes`: the completed writes to build the view from, instead of every one up to `as_of`
        (an incremental read by completion time: what had completed by then)."""
        self.as_of = as_of
        self._groups: dict[tuple[str, str], FileGroup] = {}
        replaced: dict[tuple[str, str], str] = {}
        for instant in (timeline.completed_writes(as_of) if writes is None else sorted(writes)):
            metadata = timeline.commit_metadata(instant)
            keys_in_base = metadata.extra_metadata.get(LOG_KEYS_IN_BASE_KEY) == "true"
            for stat in metadata.write_stats:
                key = (stat.partition_path, stat.file_id)
                group = self._groups.setdefault(key, FileGroup(stat.partition_path, stat.file_id))
                if stat.is_log_file:
                    group.add_log(stat.path, stat.file_size_bytes, keys_in_base)
                    continue
                group.add(FileSlice(stat.partition_path, stat.file_id, instant.time, stat.path,
                                    stat.file_size_bytes, stat.num_writes))
            for partition, file_ids in metadata.replaced_file_ids.items():
                replaced.update(((partition, fid), instant.time) for fid in file_ids)
        # Replaced file groups leave every view; cleaning still needs their slices to delete them.
        self.replaced: dict[tuple[str, str], tuple[FileGroup, str]] = {}
        for key, replaced_at in replaced.items():
            if key in self._groups:
                self.replaced[key] = (self._groups.pop(key), replaced_at)

    def file_groups(self) -> list[FileGroup]:
        return sorted(self._groups.values(), key=lambda g: (g.partition_path, g.file_id))

    def latest_file_slices(self, partitions: set[str] | None = None) -> list[FileSlice]:
        """The latest slice of each file group (in the given partitions, or all), sorted by path."""
        slices = [
            g.latest_slice(self.as_of) for g in self._groups.values()
            if partitions is None or g.partition_path in partitions
        ]
        return sorted((s for s in slices if s is not None), key=lambda s: s.path)


def check_base_files(storage: Storage, slices: Sequence[FileSlice]) -> None:
    """CorruptTableError naming the first base file or log file of `slices` that is missing, or whose
    size differs from the one its commit recorded (a truncated, emptied or swapped file). One listing
    per partition, on the driver: no file is opened, so a reader fails here, with the file's name,
    rather than inside a Spark task."""
    sizes: dict[str, int] = {}
    for partition in sorted({s.partition_path for s in slices}):
        sizes.update((info.path, info.size) for info in storage.list(partition))
    for s in slices:
        for log, recorded in zip(s.log_paths, s.log_sizes or (0,) * len(s.log_paths)):
            if log not in sizes:
                raise CorruptTableError(f"log file {log} of file slice {s.path} is missing from {storage.base_uri}; "
                                        "the table cannot be read")
            if recorded and (sizes[log] < recorded if log in s.log_appended else sizes[log] != recorded):
                raise CorruptTableError(f"log file {log} of file slice {s.path} has {sizes[log]} bytes, its commit "
                                        f"recorded {recorded} (truncated, emptied or swapped); the table cannot be read")
        if s.path not in sizes:
            raise CorruptTableError(f"base file {s.path} of commit {s.base_instant_time} is missing from "
                                    f"{storage.base_uri}; the table cannot be read")
        if s.size_bytes and sizes[s.path] != s.size_bytes:
            raise CorruptTableError(f"base file {s.path} of commit {s.base_instant_time} has {sizes[s.path]} "
                                    f"bytes, its commit recorded {s.size_bytes} (truncated or overwritten); "
                                    "the table cannot be read")


def nested_partition_paths(paths: Iterable[str]) -> list[tuple[str, str]]:
    """(outer, inner) pairs of partition paths where one's folder lies inside the other's (`a` and `a/b`,
    `p=a` and `p=a/b`): readers list a partition's folder for its files, and Hudi's readers take the
    inner partition's files for the outer's or lose the outer's rows (hudi-rs does), so a table must
    never hold both. The table root ('') holds every partition and is left out."""
    known = {p for p in paths if p}
    out = []
    for path in sorted(known):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            outer = "/".join(parts[:depth])
            if outer in known:
                out.append((outer, path))
    return out


def refuse_nested_partitions(new: set[str], existing: set[str]) -> None:
    """InvalidInputError when a write's partition paths `new` would nest inside, or around, a partition
    of `existing` or of `new` itself."""
    nested = [pair for pair in nested_partition_paths(new | existing) if pair[0] in new or pair[1] in new]
    if nested:
        shown = ", ".join(f"{inner!r} inside {outer!r}" for outer, inner in nested[:3])
        raise InvalidInputError(f"partition path(s) would nest one partition's folder inside another's ({shown}"
                                f"{', ...' if len(nested) > 3 else ''}); Hudi's readers cannot tell their files "
                                "apart. Use values that never extend one another (such as a fixed depth); "
                                "table unchanged")
