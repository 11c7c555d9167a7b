"""Log file names: `.<fileId>_<baseInstant>.log.<version>_<writeToken>`, parsed and formatted."""

from __future__ import annotations

import re
from dataclasses import dataclass

from labformat.model.instant import INSTANT_TIME_RE

LOG_FILE_EXTENSION = "log"
_PART_RE = re.compile(r"^[A-Za-z0-9-]+$")


@dataclass(frozen=True, order=True)
class LogFile:
    """The name of one log file of a merge-on-read file slice.

    In a version-6 table a log file carries the instant of its file slice's base file
    (`base_instant_time`), not the delta commit that wrote it: every log file of a slice has
    the same time, and `version` orders them. The delta commit's instant is in each block's
    header. As for base files, neither the file id nor the write token may hold `_`.
    """

    file_id: str
    base_instant_time: str
    version: int
    write_token: str

    def __post_init__(self) -> None:
        for label, part in (("file id", self.file_id), ("write token", self.write_token)):
            if not _PART_RE.match(part):
                raise ValueError(f"{label} must be letters, digits and '-', got {part!r}")
        if not INSTANT_TIME_RE.match(self.base_instant_time):
            raise ValueError(f"instant time must be 17 digits, got {self.base_instant_time!r}")
        if self.version < 1:
            raise ValueError(f"log version starts at 1, got {self.version}")

    @property
    def name(self) -> str:
        return f".{self.file_id}_{self.base_instant_time}.{LOG_FILE_EXTENSION}.{self.version}_{self.write_token}"

    @classmethod
    def parse(cls, name: str) -> "LogFile":
        """Parse a log file name (a bare name, or a path whose last part is one)."""
        leaf = name.rsplit("/", 1)[-1]
        if not leaf.startswith("."):
            raise ValueError(f"a log file name starts with '.': {name!r}")
        file_id, sep, rest = leaf[1:].partition("_")
        middle, sep2, token = rest.rpartition("_")
        parts = middle.split(".")
        if not sep or not sep2 or len(parts) != 3 or parts[1] != LOG_FILE_EXTENSION or not parts[2].isdigit():
            raise ValueError(f"log file name must be .<fileId>_<instant>.log.<version>_<writeToken>: {name!r}")
        return cls(file_id, parts[0], int(parts[2]), token)

    @classmethod
    def try_parse(cls, name: str) -> "LogFile | None":
        try:
            return cls.parse(name)
        except ValueError:
            return None
