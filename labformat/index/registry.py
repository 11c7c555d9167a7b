"""Which index tags a write's records: one `Index` per index type (and bucket engine), from the write's index options."""

from __future__ import annotations

from labformat.index.base import Index, Lookup
from labformat.index.bloom import BloomIndex
from labformat.index.bucket import BucketIndex
from labformat.index.consistent_bucket import ConsistentBucketIndex
from labformat.index.global_index import GlobalIndex
from labformat.index.record_level import RecordLevelIndex
from labformat.index.simple import SimpleIndex
from labformat.model.enums import BucketEngine, IndexType


def index_for(lookup: Lookup, damaged: str | None = None) -> Index:
    """The index of `lookup.options.index_type`. BUCKET follows the table's bucket engine (its layout
    is fixed at creation: a write cannot switch to or from BUCKET). `damaged` (RECORD_INDEX): why the
    record index is to be built anew before the lookup."""
    kind = lookup.options.index_type
    if kind is IndexType.RECORD_INDEX:
        return RecordLevelIndex(lookup, damaged)
    if kind.is_global:
        return GlobalIndex(lookup)
    if kind is IndexType.BLOOM:
        return BloomIndex(lookup)
    if kind is IndexType.SIMPLE:
        return SimpleIndex(lookup)
    if lookup.ctx.config.bucket_engine is BucketEngine.CONSISTENT_HASHING:
        return ConsistentBucketIndex(lookup)
    return BucketIndex(lookup)
