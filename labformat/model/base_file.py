"""Base file names: `<fileId>_<writeToken>_<instantTime>.parquet`, parsed and formatted."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from labformat.model.instant import INSTANT_TIME_RE

BASE_FILE_EXTENSION = ".parquet"
_PART_RE = re.compile(r"^[A-Za-z0-9-]+$")


@dataclass(frozen=True)
class BaseFile:
    """The name of one base file: which file group, which task wrote it, at which instant.

    Neither the file id nor the write token may hold `_`: readers split the name on it
    (Hudi's own reader silently returns nothing for such files).
    """

    file_id: str
    write_token: str
    instant_time: str

    def __post_init__(self) -> None:
        for label, part in (("file id", self.file_id), ("write token", self.write_token)):
            if not _PART_RE.match(part):
                raise ValueError(f"{label} must be letters, digits and '-', got {part!r}")
        if not INSTANT_TIME_RE.match(self.instant_time):
            raise ValueError(f"instant time must be 17 digits, got {self.instant_time!r}")

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant_time}{BASE_FILE_EXTENSION}"

    @classmethod
    def parse(cls, name: str) -> "BaseFile":
        """Parse a base file name (a bare name, or a path whose last part is one)."""
        leaf = name.rsplit("/", 1)[-1]
        if not leaf.endswith(BASE_FILE_EXTENSION):
            raise ValueError(f"not a base file name (no {BASE_FILE_EXTENSION}): {name!r}")
        parts = leaf[: -len(BASE_FILE_EXTENSION)].split("_")
        if len(parts) != 3:
            raise ValueError(f"base file name must be <fileId>_<writeToken>_<instant>.parquet: {name!r}")
        return cls(*parts)

    @classmethod
    def try_parse(cls, name: str) -> "BaseFile | None":
        try:
            return cls.parse(name)
        except ValueError:
            return None


def new_file_id(prefix: str | None = None) -> str:
    """A fresh file group id: a UUID with Hudi's `-0` suffix, optionally behind a prefix
    (the bucket index puts the bucket number first)."""
    base = f"{uuid.uuid4()}-0"
    return f"{prefix}-{base}" if prefix else base


def write_token(task_partition: int, stage: int, attempt: int) -> str:
    """Hudi's write token: `<task partition>-<stage id>-<attempt id>`: tells retried attempts apart."""
    return f"{task_partition}-{stage}-{attempt}"
