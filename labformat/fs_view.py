"""The file-system view: file groups and their latest file slice as of an instant, from commit metadata."""

from __future__ import annotations

from labformat.errors import CorruptTableError
from labformat.model.commit import LOG_KEYS_IN_BASE_KEY
from labformat.model.file_group import FileGroup, FileSlice
from labformat.storage import Storage
from labformat.timeline import Timeline


class FileSystemView:
    """Every file group the completed commits up to `as_of` wrote, and each one's latest slice.

    Built from the commits' write stats rather than by listing folders: a listing would
    also see files of failed or in-flight instants, which are not part of the table. So a
    file slice's log files are those of completed delta commits only (up to `as_of`); a log
    file of a rolled-back or in-flight instant is never in a slice.
    """

    def __init__(self, timeline: Timeline, as_of: str | None = None):
        self.as_of = as_of
        self._groups: dict[tuple[str, str], FileGroup] = {}
        replaced: dict[tuple[str, str], str] = {}
        for instant in timeline.completed_writes(as_of):
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
            group = self._groups.pop(key, None)
            if group is not None:
                self.replaced[key] = (group, replaced_at)

    def file_groups(self) -> list[FileGroup]:
        return sorted(self._groups.values(), key=lambda g: (g.partition_path, g.file_id))

    def latest_file_slices(self, partitions: set[str] | None = None) -> list[FileSlice]:
        """The latest slice of each file group (in the given partitions, or all), sorted by path."""
        slices = [
            g.latest_slice(self.as_of) for g in self._groups.values()
            if partitions is None or g.partition_path in partitions
        ]
        return sorted((s for s in slices if s is not None), key=lambda s: s.path)


def check_base_files(storage: Storage, slices: list[FileSlice]) -> None:
    """CorruptTableError naming the first base file of `slices` that is missing, or whose size differs
    from the one its commit recorded (a truncated file). One listing per partition, on the driver:
    no file is opened, so a reader fails here, with the file's name, rather than inside a Spark task."""
    sizes: dict[str, int] = {}
    for partition in sorted({s.partition_path for s in slices}):
        sizes.update((info.path, info.size) for info in storage.list(partition))
    for s in slices:
        for log in s.log_paths:
            if log not in sizes:
                raise CorruptTableError(f"log file {log} of file slice {s.path} is missing from {storage.base_uri}; "
                                        "the table cannot be read")
        if s.path not in sizes:
            raise CorruptTableError(f"base file {s.path} of commit {s.base_instant_time} is missing from "
                                    f"{storage.base_uri}; the table cannot be read")
        if s.size_bytes and sizes[s.path] != s.size_bytes:
            raise CorruptTableError(f"base file {s.path} of commit {s.base_instant_time} has {sizes[s.path]} "
                                    f"bytes, its commit recorded {s.size_bytes} (truncated or overwritten); "
                                    "the table cannot be read")
