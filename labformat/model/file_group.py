"""File groups and file slices: a file group is one fileId's versions; a file slice is one version."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from labformat.model.base_file import BaseFile
from labformat.model.log_file import LogFile


@dataclass(frozen=True)
class FileSlice:
    """One version of a file group: the base file written at `base_instant_time`, and the log
    files that delta commits appended to it since (merge-on-read tables only).

    A copy-on-write slice is exactly its base file. `path` (the base file) and `log_paths` are
    relative to the table's base path; log files in the order they were written.
    """

    partition_path: str
    file_id: str
    base_instant_time: str
    path: str
    size_bytes: int = 0
    num_records: int = 0
    log_paths: tuple[str, ...] = ()
    log_bytes: int = 0
    log_sizes: tuple[int, ...] = ()  # each log file's size as its commit recorded it (0: not recorded)
    log_appended: frozenset[str] = frozenset()  # log files several commits appended to (Hudi's writers)
    # Every key of the log files is one the base file holds (see commit.LOG_KEYS_IN_BASE_KEY):
    # then the base file's key range, bloom filter and record-key stats stand for the whole slice.
    log_keys_in_base: bool = True

    @property
    def base_file(self) -> BaseFile:
        return BaseFile.parse(self.path)

    @property
    def has_logs(self) -> bool:
        return bool(self.log_paths)

    @property
    def keyed_by_base_file(self) -> bool:
        """The base file alone says which record keys the slice holds: no logs, or logs of updates
        and deletes only. A slice with a log that may hold inserts is not (its keys are unknown
        until its logs are read)."""
        return not self.log_paths or self.log_keys_in_base

    @property
    def log_files(self) -> tuple[LogFile, ...]:
        return tuple(LogFile.parse(p) for p in self.log_paths)

    def with_log(self, path: str, size_bytes: int, keys_in_base: bool = False) -> "FileSlice":
        """This slice with one more log file, kept in log version order (`keys_in_base`: the log holds
        only keys of the base file)."""
        # Logs arrive in version order (commit by commit): appending is the rule, sorting the
        # exception. Sorting on every add made building the file-system view quadratic in a slice's
        # logs: 50 ms of every query's planning on the `late` month's merge-on-read table.
        sizes = dict(zip(self.log_paths, self.log_sizes))
        if path in self.log_paths:
            # Apache Hudi appends blocks of later delta commits to a log file: each commit records the
            # size it left, so the latest is a lower bound on the file (time travel reads it larger).
            return replace(self, log_sizes=tuple(max(sizes[p], size_bytes) if p == path else sizes[p]
                                                 for p in self.log_paths),
                           log_appended=self.log_appended | {path})
        sizes[path] = size_bytes
        if not self.log_paths or _log_order(path) > _log_order(self.log_paths[-1]):
            paths = (*self.log_paths, path)
        else:
            paths = tuple(sorted((*self.log_paths, path), key=_log_order))
        return replace(self, log_paths=paths, log_sizes=tuple(sizes[p] for p in paths),
                       log_bytes=self.log_bytes + size_bytes, log_keys_in_base=self.log_keys_in_base and keys_in_base)

    def base_only(self) -> "FileSlice":
        """This slice without its log files: what a read-optimized query reads."""
        return replace(self, log_paths=(), log_sizes=(), log_appended=frozenset(), log_bytes=0, log_keys_in_base=True)


def _log_order(path: str) -> tuple[int, str]:
    return LogFile.parse(path).version, path


@dataclass
class FileGroup:
    """All slices of one fileId in one partition, keyed by the instant that wrote each."""

    partition_path: str
    file_id: str
    slices: dict[str, FileSlice] = field(default_factory=dict)

    def add(self, file_slice: FileSlice) -> None:
        self.slices[file_slice.base_instant_time] = file_slice

    def add_log(self, path: str, size_bytes: int, keys_in_base: bool = False) -> None:
        """A log file of the slice its name's base instant names; ignored when that slice is unknown
        (a log-only file group, which labformat never writes and hudi-rs does not read either)."""
        base_instant = LogFile.parse(path).base_instant_time
        if base_instant in self.slices:
            self.slices[base_instant] = self.slices[base_instant].with_log(path, size_bytes, keys_in_base)

    def latest_slice(self, as_of: str | None = None) -> FileSlice | None:
        """The newest slice written at or before `as_of` (all slices when None)."""
        times = [t for t in self.slices if as_of is None or t <= as_of]
        return self.slices[max(times)] if times else None
