"""The format's closed sets of names, one enum each: operations, index and table types, every option's choices, stats sources.

Each member equals the string that reports, commits, `hoodie.properties` and options hold (they are
`StrEnum`s), so a value read from a file or given by a caller compares equal to its member; the code
itself names members, never the strings.
"""

from __future__ import annotations

import enum


class Operation(enum.StrEnum):
    """Every operation labformat writes to the timeline, named as reports name it; `hudi_name` is the
    commit's `operationType` (Apache Hudi's WriteOperationType: BULK_INSERT, UPSERT, DELETE, COMPACT,
    CLUSTER, INDEX; CLEAN is labformat's, as Hudi's cleans carry no operation type)."""

    BULK_INSERT = "bulk_insert"
    UPSERT = "upsert"
    DELETE = "delete"
    COMPACT = "compact"
    CLUSTER = "cluster"
    CLEAN = "clean"
    INDEX = "index"  # the metadata table rebuilt (Hudi's INDEX builds metadata-table indexes)

    @property
    def hudi_name(self) -> str:
        return self.value.upper()

    @property
    def writes_rows(self) -> bool:
        """Whether the operation's input is rows to store (a delete's is keys; services take none)."""
        return self in (Operation.BULK_INSERT, Operation.UPSERT)


class IndexType(enum.StrEnum):
    """An index type, as `hoodie.index.type` spells it."""

    SIMPLE = "SIMPLE"
    BLOOM = "BLOOM"
    BUCKET = "BUCKET"
    # Global: a key is unique across partitions, so its lookup reads every partition (seed 004).
    GLOBAL_SIMPLE = "GLOBAL_SIMPLE"
    GLOBAL_BLOOM = "GLOBAL_BLOOM"
    # Global too: each key's file group read from the metadata table's record-level index (Hudi 0.14).
    RECORD_INDEX = "RECORD_INDEX"

    @property
    def is_global(self) -> bool:
        return self in (IndexType.GLOBAL_SIMPLE, IndexType.GLOBAL_BLOOM, IndexType.RECORD_INDEX)

    @property
    def lookup(self) -> "IndexType":
        """The lookup a global index runs over every partition: SIMPLE's join or BLOOM's funnel."""
        return {IndexType.GLOBAL_SIMPLE: IndexType.SIMPLE, IndexType.GLOBAL_BLOOM: IndexType.BLOOM}.get(self, self)


class BucketHash(enum.StrEnum):
    """How a BUCKET table turns a record key into its bucket (`labformat.bucket.index.hash` in
    hoodie.properties)."""

    # Apache Hudi's: Java's List<String>.hashCode of the hash fields' values, & Integer.MAX_VALUE,
    # modulo the bucket count (BucketIdentifier). Every table labformat creates uses it.
    JAVA_HASHCODE = "JAVA_HASHCODE"
    # labformat's own before it learned Hudi's: Spark's murmur3 `hash` of the record key, pmod the
    # bucket count. Kept for the BUCKET tables it wrote then, which say so by storing no hash field.
    SPARK_MURMUR3 = "SPARK_MURMUR3"


class BucketEngine(enum.StrEnum):
    """How a BUCKET table maps hashes to buckets (`hoodie.index.bucket.engine`)."""

    # A fixed count: the hash modulo `hoodie.bucket.index.num.buckets`, fixed when the table is made.
    SIMPLE = "SIMPLE"
    # A hash ring per partition (Hudi 0.13, RFC-42): each bucket owns a range of XXH32 hashes, and a
    # clustering splits a bucket grown past the split threshold in two, moving only its own records.
    CONSISTENT_HASHING = "CONSISTENT_HASHING"


class TableType(enum.StrEnum):
    """`hoodie.table.type`."""

    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"


class BloomFilterTypeCode(enum.StrEnum):
    """A bloom filter's layout, as Hudi's `hoodie.bloom.index.filter.type` and the footer entry
    `hoodie_bloom_filter_type_code` spell it (Hudi's BloomFilterTypeCode)."""

    SIMPLE = "SIMPLE"
    DYNAMIC_V0 = "DYNAMIC_V0"


class SortMode(enum.StrEnum):
    """`hoodie.bulkinsert.sort.mode`: how a bulk insert lays rows out across its write tasks."""

    NONE = "NONE"
    GLOBAL_SORT = "GLOBAL_SORT"
    PARTITION_SORT = "PARTITION_SORT"
    PARTITION_PATH_REPARTITION = "PARTITION_PATH_REPARTITION"


class LayoutStrategy(enum.StrEnum):
    """`hoodie.layout.optimize.strategy`: the order clustering writes a group's rows in, over its sort columns."""

    LINEAR = "linear"  # by the first column, ties by the next: serves filters on the first column
    ZORDER = "z-order"  # along a Z-order (Morton) curve: every column's filter prunes some
    HILBERT = "hilbert"  # along a Hilbert curve: as z-order, with no jumps between neighbouring cells


class ParallelismMode(enum.StrEnum):
    """How the upsert's deduplication shuffle is sized: as Hudi >= 0.13 does, or as before (LEGACY)."""

    HUDI_0_13 = "HUDI_0_13"
    LEGACY = "LEGACY"


class CleanerPolicy(enum.StrEnum):
    """`hoodie.cleaner.policy`."""

    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"


class ConcurrencyMode(enum.StrEnum):
    """`hoodie.write.concurrency.mode`."""

    SINGLE_WRITER = "SINGLE_WRITER"
    OPTIMISTIC_CONCURRENCY_CONTROL = "OPTIMISTIC_CONCURRENCY_CONTROL"


class QueryType(enum.StrEnum):
    """`hoodie.datasource.query.type`."""

    SNAPSHOT = "SNAPSHOT"
    READ_OPTIMIZED = "READ_OPTIMIZED"
    INCREMENTAL = "INCREMENTAL"  # the records commits in (begin, end] wrote (`read/incremental.py`)


class IncrementalFormat(enum.StrEnum):
    """`hoodie.datasource.query.incremental.format`: what an incremental query returns."""

    LATEST_STATE = "latest_state"  # the latest version of each record the range wrote
    CDC = "cdc"  # every change the range made: op, ts_ms, before, after (change data capture)


class HolesPolicy(enum.StrEnum):
    """`hoodie.read.timeline.holes.resolution.policy`: what an incremental query does when an instant
    older than its range's end is still in flight (a hole: its rows would land behind a consumer's
    checkpoint)."""

    FAIL = "FAIL"  # refuse the read (TimelineHoleError), Hudi's default
    BLOCK = "BLOCK"  # end the range before the oldest instant in flight
    USE_TRANSITION_TIME = "USE_TRANSITION_TIME"  # begin and end are completion times, not instant times


class CdcLoggingMode(enum.StrEnum):
    """`hoodie.table.cdc.supplemental.logging.mode`: what a change record keeps of the record."""

    OP_KEY_ONLY = "op_key_only"
    DATA_BEFORE = "data_before"
    DATA_BEFORE_AFTER = "data_before_after"


class CompressionCodec(enum.StrEnum):
    """`hoodie.parquet.compression.codec`, as pyarrow names the codecs."""

    SNAPPY = "snappy"
    GZIP = "gzip"
    ZSTD = "zstd"
    UNCOMPRESSED = "uncompressed"


class MergeMode(enum.StrEnum):
    """How a merge-on-read file slice's record versions meet (Hudi's `hoodie.record.merge.mode`):
    the later instant wins (COMMIT_TIME_ORDERING), or the higher precombine value (EVENT_TIME_ORDERING)."""

    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"


class StatsSource(enum.StrEnum):
    """Where a pruning stage or an index lookup took what it judged by; `model.report.Source` pairs it
    with the reason when it is not the first choice."""

    METADATA_TABLE = "metadata table"
    FOOTERS = "footers"  # the base files' parquet footers
    PARTITION_PATHS = "partition paths"
    BASE_FILES = "base files"  # every stored key read (SIMPLE)
    HASH = "hash"  # BUCKET: the key's hash names the file group
    NONE = "none"  # nothing to look up (no file in the affected partitions)
    NOT_USED = "not used"  # the stage does not apply to this table or condition
    OFF = "off"  # data skipping disabled
