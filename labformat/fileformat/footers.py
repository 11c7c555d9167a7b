"""Base-file footers: the key-value entries Hudi writes, key ranges (read on the driver) and bloom filters (read in tasks).

Base files never change once written, so a footer read once stays true while its file is in the
table: a table's `FooterCache` reads each once, and after the first upsert only the new file slices
cost a read. A process keeps the caches of the tables it opened last (`FooterCache.of_table`), so a
table opened again (a daily job's loop, a notebook cell) finds its footers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
import threading
from collections import OrderedDict
from functools import lru_cache, partial

import pyarrow.parquet as pq

from labformat.errors import CorruptTableError
from labformat.fileformat.bloom_filter import DYNAMIC_V0, SIMPLE, RecordKeyFilter, decode
from labformat.fileformat.legacy_bloom import LEGACY_FOOTER, LEGACY_TYPE, LEGACY_TYPE_FOOTER
from labformat.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql.types import StructType
    from labformat.model.column_stats import ColumnStats

# Footer keys, Hudi's names (HoodieBloomFilterWriteSupport): the key range and the bloom filter.
MIN_KEY_FOOTER = "hoodie_min_record_key"
MAX_KEY_FOOTER = "hoodie_max_record_key"
BLOOM_FOOTER = "org.apache.hudi.bloomfilter"
OLD_BLOOM_FOOTER = "com.uber.hoodie.bloomfilter"  # Hudi still reads it: files of its Uber days
BLOOM_TYPE_FOOTER = "hoodie_bloom_filter_type_code"


@dataclass(frozen=True)
class KeyFooter:
    """The entries of a base file's footer the indexes read: its key range and its record-key bloom filter."""

    min_key: str | None  # None: a file without rows (or one Hudi wrote without meta fields)
    max_key: str | None
    bloom: str | None  # base64, as stored; None: the file has none
    bloom_type: str = SIMPLE  # SIMPLE, DYNAMIC_V0, or labformat's first layout (LEGACY_TYPE)

    def entries(self) -> dict[str, str]:
        """The key-value metadata to write (`ParquetWriter.add_key_value_metadata`), as Hudi writes
        it: the type code only for DYNAMIC_V0 (Hudi reads a filter without one as SIMPLE)."""
        out = {}
        if self.bloom is not None:
            if self.bloom_type not in (SIMPLE, DYNAMIC_V0):
                raise ValueError(f"base files get Hudi's bloom filters only, not {self.bloom_type!r}")
            out[BLOOM_FOOTER] = self.bloom
            if self.bloom_type == DYNAMIC_V0:
                out[BLOOM_TYPE_FOOTER] = self.bloom_type
        if self.min_key is not None and self.max_key is not None:
            out.update({MIN_KEY_FOOTER: self.min_key, MAX_KEY_FOOTER: self.max_key})
        return out

    @classmethod
    def parse(cls, kv: dict[bytes, bytes] | None) -> "KeyFooter":
        """From a parquet file's key-value metadata, as pyarrow returns it: Hudi's filter (also
        under its old key), else labformat's first layout; a filter of a kind unknown is None."""
        found = kv or {}

        def text(key: str) -> str | None:
            return found.get(key.encode(), b"").decode() or None

        low, high = text(MIN_KEY_FOOTER), text(MAX_KEY_FOOTER)
        hudi = text(BLOOM_FOOTER) or text(OLD_BLOOM_FOOTER)
        if hudi is not None:
            return cls(low, high, hudi, (text(BLOOM_TYPE_FOOTER) or SIMPLE).upper())
        if text(LEGACY_TYPE_FOOTER) == LEGACY_TYPE and text(LEGACY_FOOTER):
            return cls(low, high, text(LEGACY_FOOTER), LEGACY_TYPE)
        return cls(low, high, None)

    def bloom_filter(self) -> RecordKeyFilter | None:
        return None if self.bloom is None else decode(self.bloom, self.bloom_type)


def _read_info(storage: Storage, path: str) -> FooterInfo:
    meta = read_footer_of(storage, path)
    keys = KeyFooter.parse(meta.metadata)
    return FooterInfo(keys.min_key, keys.max_key, meta.num_rows, meta.num_row_groups)


def _read_stats(storage: Storage, path: str) -> tuple[tuple[Any, ...], ...]:
    return _footer_column_stats(read_footer_of(storage, path))


@dataclass(frozen=True)
class FooterInfo:
    min_key: str | None
    max_key: str | None
    num_rows: int
    num_row_groups: int = 0


def read_footer(base_uri: str, path: str) -> pq.FileMetaData:
    """A base file's parquet footer; CorruptTableError naming the file when it cannot be read."""
    return read_footer_of(Storage(base_uri), path)


def read_footer_of(storage: Storage, path: str) -> pq.FileMetaData:
    try:
        return pq.read_metadata(storage.full_path(path), filesystem=storage.fs)
    except (OSError, ValueError) as exc:
        raise CorruptTableError(f"cannot read the footer of base file {path}: {exc}") from None


class FooterCache:
    """One table's footers as the driver plans with them (key ranges, row counts, column stats), each
    read once: a base file never changes, so what its footer said stays true while its path is in
    the table. Held by the `Table` (its contexts share it), so it lives and goes with the table; at
    most `maxsize` files are remembered, the least recently used forgotten first."""

    def __init__(self, storage: Storage, maxsize: int = 65536):
        self.storage = storage
        # Over the storage, not bound to self: a dropped cache is freed at once, not at the next collection.
        self._info = lru_cache(maxsize=maxsize)(partial(_read_info, storage))
        self._stats = lru_cache(maxsize=maxsize)(partial(_read_stats, storage))

    @classmethod
    def of_table(cls, storage: Storage) -> "FooterCache":
        """The cache of the table at `storage`'s base path: the one this process made for it, if it is
        among the last `_KEPT` tables opened, else a new one."""
        key = storage.base_uri
        with _RECENT_LOCK:
            cache = _RECENT.pop(key, None) or cls(storage)
            _RECENT[key] = cache
            while len(_RECENT) > _KEPT:
                _RECENT.popitem(last=False)
        return cache

    def key_ranges(self, paths: list[str]) -> dict[str, FooterInfo]:
        """Footer key range of each base file; read in parallel threads (pyarrow releases the GIL)."""
        with ThreadPoolExecutor(max_workers=8) as pool:
            return dict(zip(paths, pool.map(self._info, paths)))

    def column_stats(self, paths: list[str]) -> dict[str, dict[str, ColumnStats]]:
        """Per base file, per column: ColumnStats from the parquet footer (the fallback when the
        metadata table has none). Floating columns get no NaN count: parquet does not keep one."""
        from labformat.model.column_stats import ColumnStats

        def one(path: str) -> dict[str, ColumnStats]:
            stats = {}
            for name, low, high, nulls, rows, bounded in self._stats(path):
                if isinstance(low, datetime) and low.tzinfo is None:
                    low, high = low.replace(tzinfo=timezone.utc), high.replace(tzinfo=timezone.utc)
                stats[name] = ColumnStats(low if bounded else None, high if bounded else None, nulls, rows,
                                          None if isinstance(low, float) else 0)
            return stats

        with ThreadPoolExecutor(max_workers=8) as pool:
            return dict(zip(paths, pool.map(one, paths)))


def bloom_filter(base_uri: str, path: str) -> RecordKeyFilter | None:
    """A base file's bloom filter from its footer; None when it has none (Hudi writes none without
    meta fields): the caller then checks every candidate key against the file itself."""
    footer = KeyFooter.parse(read_footer(base_uri, path).metadata)
    try:
        return footer.bloom_filter()
    except ValueError as exc:
        raise CorruptTableError(f"cannot read the bloom filter of base file {path}: {exc}") from None


def base_file_schema(base_uri: str, path: str) -> StructType:
    """A base file's Spark schema, from its parquet footer alone (no row is read)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(read_footer(base_uri, path).schema.to_arrow_schema())


# The caches of the tables this process opened last, most recent at the end: per table, bounded.
_KEPT = 8
_RECENT: OrderedDict[str, FooterCache] = OrderedDict()
_RECENT_LOCK = threading.Lock()


def _footer_column_stats(meta: pq.FileMetaData) -> tuple[tuple[Any, ...], ...]:
    """Row-group statistics of one base file, folded per column: (name, min, max, nulls, rows, bounded)."""
    out: dict[str, list[Any]] = {}  # name: [min, max, nulls, rows, bounded]
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


def row_group_column_stats(meta: pq.FileMetaData, g: int) -> dict[str, ColumnStats]:
    """Per column, ColumnStats of row group `g` alone (what a reader skips a row group by)."""
    from labformat.model.column_stats import ColumnStats

    group, out = meta.row_group(g), {}
    for c in range(group.num_columns):
        chunk = group.column(c)
        stats = chunk.statistics
        if stats is None:
            continue
        low = high = None
        if stats.has_min_max:
            low, high = stats.min, stats.max
            if isinstance(low, datetime) and low.tzinfo is None:
                low, high = low.replace(tzinfo=timezone.utc), high.replace(tzinfo=timezone.utc)
        elif stats.null_count != group.num_rows:
            continue  # no bounds for some non-null values: unknown
        out[chunk.path_in_schema] = ColumnStats(low, high, stats.null_count, group.num_rows,
                                                None if isinstance(low, float) else 0)
    return out

