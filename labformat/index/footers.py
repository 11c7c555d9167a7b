"""Base-file footers read on the driver (key ranges) or in tasks (bloom filters), with a cache.

Base files never change once written, so a footer read once is good for the life of the
process; after the first upsert only the new file slices cost a read.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache

import pyarrow.parquet as pq

from labformat.errors import CorruptTableError
from labformat.index.bloom_filter import BloomFilter
from labformat.storage import Storage
from labformat.write.arrow_writer import BLOOM_FOOTER, MAX_KEY_FOOTER, MIN_KEY_FOOTER


@dataclass(frozen=True)
class FooterInfo:
    min_key: str | None
    max_key: str | None
    num_rows: int


@lru_cache(maxsize=65536)
def _footer(base_uri: str, path: str) -> FooterInfo:
    storage = Storage(base_uri)
    try:
        meta = pq.read_metadata(storage._full(path), filesystem=storage.fs)
    except (OSError, ValueError) as exc:
        raise CorruptTableError(f"cannot read the footer of base file {path}: {exc}") from None
    kv = meta.metadata or {}
    decode = lambda key: kv[key].decode() if key in kv else None  # noqa: E731
    return FooterInfo(decode(MIN_KEY_FOOTER.encode()), decode(MAX_KEY_FOOTER.encode()), meta.num_rows)


def key_ranges(base_uri: str, paths: list[str]) -> dict[str, FooterInfo]:
    """Footer key range of each base file; read in parallel threads (pyarrow releases the GIL)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(paths, pool.map(lambda p: _footer(base_uri, p), paths)))


def bloom_filter(base_uri: str, path: str) -> BloomFilter:
    storage = Storage(base_uri)
    meta = pq.read_metadata(storage._full(path), filesystem=storage.fs)
    raw = (meta.metadata or {}).get(BLOOM_FOOTER.encode())
    if raw is None:
        raise CorruptTableError(f"base file {path} has no bloom filter in its footer")
    return BloomFilter.from_base64(raw)
