"""Pure data of the format: instants, base file names, file groups and slices, commit metadata, reports."""

from labformat.model.base_file import BaseFile
from labformat.model.commit import CommitMetadata, WriteStat
from labformat.model.enums import IndexType, Operation
from labformat.model.file_group import FileGroup, FileSlice
from labformat.model.instant import Action, Instant, State
from labformat.model.report import FileReport, StepReport, WriteReport

__all__ = [
    "Action", "BaseFile", "CommitMetadata", "FileGroup", "FileReport", "FileSlice", "IndexType", "Instant",
    "Operation", "State", "StepReport", "WriteReport", "WriteStat",
]
