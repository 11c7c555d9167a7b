"""The metadata table: per-commit file listings, column stats and bloom filters under `.hoodie/metadata/`."""

from labformat.metadata.rebuild import STATS_DDL, stats_of_files
from labformat.metadata.table import (
    BLOOM_FILTERS,
    COLUMN_STATS,
    FILES,
    MetadataReader,
    write_metadata,
)

__all__ = ["STATS_DDL", "stats_of_files", "BLOOM_FILTERS", "COLUMN_STATS", "FILES", "MetadataReader", "write_metadata"]
