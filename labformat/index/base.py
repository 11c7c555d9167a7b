"""What every index shares: helper column names, the lookup an index is given (table, typed options, schema), the tag result."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import types as T

from labformat.context import TableConfig, TableContext
from labformat.helper_columns import KEY, PART
from labformat.keygen import KeyGenerator
from labformat.metadata import MetadataReader
from labformat.model.enums import BucketHash, IndexType
from labformat.model.report import Source, TagFunnel


@dataclass(frozen=True)
class IndexOptions:
    """The index options of one write (Hudi's `hoodie.index.*`, `hoodie.bloom.index.*`)."""

    index_type: IndexType
    bucket_num: int
    prune_by_ranges: bool = True  # BLOOM: hoodie.bloom.index.prune.by.ranges
    use_metadata: bool = False  # BLOOM: ranges and filters from the metadata table (hoodie.bloom.index.use.metadata)
    bucket_hash: BucketHash = BucketHash.JAVA_HASHCODE  # BUCKET: the table's hash
    bucket_hash_fields: tuple[str, ...] = ()  # BUCKET: hoodie.bucket.index.hash.field (empty: every key field)

    @classmethod
    def of_table(cls, config: TableConfig, index_type: IndexType, prune_by_ranges: bool = True,
                 use_metadata: bool = False) -> "IndexOptions":
        """A write's index options on a table of `config`."""
        return cls(index_type, config.bucket_num, prune_by_ranges, use_metadata, config.bucket_hash,
                   config.bucket_hash_fields)


@dataclass(frozen=True)
class Lookup:
    """What an index looks keys up in: the table as of the write's plan, its options, the data schema,
    and (with `use_metadata`) the metadata table's reader."""

    ctx: TableContext
    options: IndexOptions
    schema: T.StructType  # the table's data schema (column stats decoding, computed keys)
    metadata: MetadataReader | None = None

    @property
    def spark(self) -> SparkSession:
        return self.ctx.spark

    @property
    def base_uri(self) -> str:
        return self.ctx.storage.base_uri

    @property
    def record_key(self) -> str:
        return self.ctx.config.record_key

    @property
    def keygen(self) -> KeyGenerator:
        return self.ctx.config.keygen

    @property
    def meta_fields(self) -> bool:
        """False for a table without meta fields: stored keys are computed from the key fields."""
        return self.ctx.config.populate_meta_fields

    @property
    def partitioned(self) -> bool:
        return bool(self.ctx.config.partition_field)

    @property
    def join_keys(self) -> list[str]:
        # The keys step 1 partitioned the records by, so that a join on them leaves the records where
        # that shuffle put them: KEY alone without a partition field, or for a global index (one
        # record per key, looked up in every partition).
        return [PART, KEY] if self.partitioned and not self.options.index_type.is_global else [KEY]


@dataclass
class TagResult:
    """Incoming records tagged with their file group (FILE_ID null: insert), plus what the lookup did."""

    tagged: DataFrame
    funnel: TagFunnel
    lookup_source: Source
    cleanup: list[DataFrame] = field(default_factory=list)  # persisted DataFrames to release after the write
    # (partition, file group, records) the index itself counted, when it did: the workload profile
    # then needs no pass over the tagged records, and `tagged` is left lazy for the write to consume.
    updates: list[tuple[str, str, int]] | None = None
    # (partition, records, input rows, rows with a null precombine value, rows with a null or blank
    # key): step 1's counts, when the index counted them in its own job (`counted` given to BLOOM's tag).
    partition_counts: list[tuple[str, int, int, int, int]] | None = None
    # Counts the index makes as the tagged records are first computed, named as TagFunnel's fields
    # (SIMPLE: `keys_read`, the keys its scan read; RECORD_INDEX: `index_entries_read`).
    keys_observed: Observation | None = None
