"""The metadata rebuild's task: a base file's column stats recomputed, its bloom filter read (see `write/metadata_rebuild.py`)."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from labformat.fileformat.column_stats import ColumnStatsCollector
from labformat.fileformat.footers import KeyFooter
from labformat.fileformat.parquet_io import unreadable
from labformat.storage import Storage

STATS_DDL = "path string, column_stats string, bloom string, bloom_type string"


def stats_of_files(batches: Iterator[pa.RecordBatch], base_uri: str, columns: tuple[str, ...]) -> Iterator[pa.RecordBatch]:
    """Task: read each listed base file and compute its column stats; take its bloom filter from the footer."""
    storage = Storage(base_uri)
    for batch in batches:
        rows = []
        for path in batch.column("path").to_pylist():
            full = storage.full_path(path)
            try:
                parquet = pq.ParquetFile(full, filesystem=storage.fs, page_checksum_verification=True)
                # A file written before a column was added has none: its stats stay unknown.
                present = [c for c in columns if c in parquet.schema_arrow.names]
                collector = ColumnStatsCollector(tuple(present))
                for group in range(parquet.num_row_groups):
                    collector.add(parquet.read_row_group(group, columns=present))
            except (OSError, ValueError) as exc:
                raise unreadable(path, exc) from None
            footer = KeyFooter.parse(parquet.metadata.metadata)
            rows.append({"path": path, "column_stats": collector.to_json(), "bloom": footer.bloom,
                         "bloom_type": footer.bloom_type})
        yield pa.RecordBatch.from_pylist(rows, schema=pa.schema(
            [("path", pa.string()), ("column_stats", pa.string()), ("bloom", pa.string()),
             ("bloom_type", pa.string())]))
