"""File groups and file slices: a file group is one fileId's versions; a file slice is one version."""

from __future__ import annotations

from dataclasses import dataclass, field

from labformat.model.base_file import BaseFile


@dataclass(frozen=True)
class FileSlice:
    """One version of a file group: the base file written at `base_instant_time`.

    Copy-on-write tables have no log files, so a slice is exactly its base file.
    `path` is relative to the table's base path.
    """

    partition_path: str
    file_id: str
    base_instant_time: str
    path: str
    size_bytes: int = 0
    num_records: int = 0

    @property
    def base_file(self) -> BaseFile:
        return BaseFile.parse(self.path)


@dataclass
class FileGroup:
    """All slices of one fileId in one partition, keyed by the instant that wrote each."""

    partition_path: str
    file_id: str
    slices: dict[str, FileSlice] = field(default_factory=dict)

    def add(self, file_slice: FileSlice) -> None:
        self.slices[file_slice.base_instant_time] = file_slice

    def latest_slice(self, as_of: str | None = None) -> FileSlice | None:
        """The newest slice written at or before `as_of` (all slices when None)."""
        times = [t for t in self.slices if as_of is None or t <= as_of]
        return self.slices[max(times)] if times else None
