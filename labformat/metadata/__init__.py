"""The metadata table: per-commit file listings, column stats and bloom filters under `.hoodie/metadata/`."""

from labformat.metadata.rebuild import RebuildReport, rebuild_metadata
from labformat.metadata.table import (
    BLOOM_FILTERS,
    COLUMN_STATS,
    FILES,
    MetadataReader,
    write_metadata,
)

__all__ = ["RebuildReport", "rebuild_metadata", "BLOOM_FILTERS", "COLUMN_STATS", "FILES", "MetadataReader", "write_metadata"]
