"""Base-file footers: the key-value entries labformat writes, read on the driver (key ranges) or in tasks (bloom filters).

Base files never change once written, so a footer read once is good for the life of the
process; after the first upsert only the new file slices cost a read.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache

import pyarrow.parquet as pq

from labformat.errors import CorruptTableError
from labformat.fileformat.bloom_filter import BloomFilter
from labformat.storage import Storage

# Footer keys: Hudi's names for the key range; our own for the bloom filter (Hudi's
# org.apache.hudi.bloomfilter is a Java serialization we do not produce).
MIN_KEY_FOOTER = "hoodie_min_record_key"
MAX_KEY_FOOTER = "hoodie_max_record_key"
BLOOM_FOOTER = "labformat_bloom_filter"
BLOOM_TYPE_FOOTER = "labformat_bloom_filter_type"
BLOOM_TYPE = "LFBF1_SIPHASH_DOUBLE_HASHING"


@dataclass(frozen=True)
class KeyFooter:
    """The entries labformat keeps in a base file's footer: its key range and its record-key bloom filter."""

    min_key: str | None  # None: a file without rows
    max_key: str | None
    bloom: str | None  # base64, in BLOOM_TYPE's layout; None when the file carries another kind (not ours)

    def entries(self) -> dict[str, str]:
        """The key-value metadata to write (`ParquetWriter.add_key_value_metadata`)."""
        out = {BLOOM_FOOTER: self.bloom, BLOOM_TYPE_FOOTER: BLOOM_TYPE} if self.bloom is not None else {}
        if self.min_key is not None:
            out.update({MIN_KEY_FOOTER: self.min_key, MAX_KEY_FOOTER: self.max_key})
        return out

    @classmethod
    def parse(cls, kv: dict[bytes, bytes] | None) -> "KeyFooter":
        """From a parquet file's key-value metadata, as pyarrow returns it."""
        kv = kv or {}
        text = lambda key: kv.get(key.encode(), b"").decode() or None  # noqa: E731
        ours = text(BLOOM_TYPE_FOOTER) == BLOOM_TYPE
        return cls(text(MIN_KEY_FOOTER), text(MAX_KEY_FOOTER), text(BLOOM_FOOTER) if ours else None)


@dataclass(frozen=True)
class FooterInfo:
    min_key: str | None
    max_key: str | None
    num_rows: int
    num_row_groups: int = 0


@lru_cache(maxsize=65536)
def _footer(base_uri: str, path: str) -> FooterInfo:
    storage = Storage(base_uri)
    try:
        meta = pq.read_metadata(storage.full_path(path), filesystem=storage.fs)
    except (OSError, ValueError) as exc:
        raise CorruptTableError(f"cannot read the footer of base file {path}: {exc}") from None
    keys = KeyFooter.parse(meta.metadata)
    return FooterInfo(keys.min_key, keys.max_key, meta.num_rows, meta.num_row_groups)


def key_ranges(base_uri: str, paths: list[str]) -> dict[str, FooterInfo]:
    """Footer key range of each base file; read in parallel threads (pyarrow releases the GIL)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(paths, pool.map(lambda p: _footer(base_uri, p), paths)))


def bloom_filter(base_uri: str, path: str) -> BloomFilter:
    found = bloom_filter_if_any(base_uri, path)
    if found is None:
        raise CorruptTableError(f"base file {path} has no labformat bloom filter in its footer")
    return found


def bloom_filter_if_any(base_uri: str, path: str) -> BloomFilter | None:
    """The file's labformat bloom filter, or None for a file written without one (by Apache Hudi:
    its own filter is another format), which every key then passes."""
    storage = Storage(base_uri)
    meta = pq.read_metadata(storage.full_path(path), filesystem=storage.fs)
    raw = KeyFooter.parse(meta.metadata).bloom
    return BloomFilter.from_base64(raw) if raw is not None else None


def base_file_schema(base_uri: str, path: str):
    """A base file's Spark schema, from its parquet footer alone (no row is read)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    storage = Storage(base_uri)
    try:
        schema = pq.read_schema(storage.full_path(path), filesystem=storage.fs)
    except (OSError, ValueError) as exc:
        raise CorruptTableError(f"cannot read the footer of base file {path}: {exc}") from None
    return from_arrow_schema(schema)


@lru_cache(maxsize=65536)
def _footer_column_stats(base_uri: str, path: str) -> tuple:
    """Row-group statistics of one base file, folded per column: (name, min, max, nulls, rows)."""
    storage = Storage(base_uri)
    meta = pq.read_metadata(storage.full_path(path), filesystem=storage.fs)
    out = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            name = chunk.path_in_schema
            stats = chunk.statistics
            entry = out.setdefault(name, [None, None, 0, 0, True])
            entry[3] += group.num_rows
            if stats is None or not stats.has_min_max:
                if stats is None or stats.null_count != group.num_rows:
                    entry[4] = False  # no bounds for some non-null values: unknown
                if stats is not None:
                    entry[2] += stats.null_count
                continue
            entry[2] += stats.null_count
            entry[0] = stats.min if entry[0] is None else min(entry[0], stats.min)
            entry[1] = stats.max if entry[1] is None else max(entry[1], stats.max)
    return tuple((name, *values) for name, values in out.items())


def footer_column_stats(base_uri: str, paths: list[str]) -> dict[str, dict[str, object]]:
    """Per base file, per column: ColumnStats from the parquet footer (the fallback when the
    metadata table has none). Floating columns get no NaN count: parquet does not keep one."""
    from labformat.model.column_stats import ColumnStats

    def one(path: str) -> dict:
        stats = {}
        for name, low, high, nulls, rows, bounded in _footer_column_stats(base_uri, path):
            if isinstance(low, datetime) and low.tzinfo is None:
                low, high = low.replace(tzinfo=timezone.utc), high.replace(tzinfo=timezone.utc)
            stats[name] = ColumnStats(low if bounded else None, high if bounded else None, nulls, rows,
                                      None if isinstance(low, float) else 0)
        return stats

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(paths, pool.map(one, paths)))
