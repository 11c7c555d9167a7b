"""Write operations and index types as enums; each member equals the plain string reports, commits and configs hold."""

from __future__ import annotations

import enum


class Operation(enum.StrEnum):
    """A write operation, named as reports name it (the commit's `operationType` is the upper case)."""

    BULK_INSERT = "bulk_insert"
    UPSERT = "upsert"
    DELETE = "delete"


class IndexType(enum.StrEnum):
    """An index type, as `hoodie.index.type` spells it."""

    SIMPLE = "SIMPLE"
    BLOOM = "BLOOM"
    BUCKET = "BUCKET"


class BloomFilterTypeCode(enum.StrEnum):
    """A bloom filter's layout, as Hudi's `hoodie.bloom.index.filter.type` and the footer entry
    `hoodie_bloom_filter_type_code` spell it (Hudi's BloomFilterTypeCode)."""

    SIMPLE = "SIMPLE"
    DYNAMIC_V0 = "DYNAMIC_V0"


class MergeMode(enum.StrEnum):
    """How a merge-on-read file slice's record versions meet (Hudi's `hoodie.record.merge.mode`):
    the later instant wins (COMMIT_TIME_ORDERING), or the higher precombine value (EVENT_TIME_ORDERING)."""

    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
