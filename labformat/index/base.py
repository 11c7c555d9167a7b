"""What every index shares: helper column names, the lookup an index is given (table, typed options, schema), the tag result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import types as T

from labformat.context import TableConfig, TableContext
from labformat.helper_columns import KEY, PART
from labformat.keygen import KeyGenerator
from labformat.metadata import MetadataReader
from labformat.model.enums import BucketHash, IndexType
from labformat.model.file_group import FileSlice
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
    # A global index: move a record whose partition path changed (delete there, insert in the new
    # one), or keep it where it is (hoodie.{simple,bloom,record.level}.index.update.partition.path).
    update_partition_path: bool = True
    record_index_shards: int = 10  # RECORD_INDEX: shards of a new index (hoodie.metadata.record.index.min.filegroup.count)
    max_index_deltas: int = 10  # RECORD_INDEX: deltas before the index is compacted

    @classmethod
    def of_table(cls, config: TableConfig, index_type: IndexType, prune_by_ranges: bool = True,
                 use_metadata: bool = False, update_partition_path: bool = True, record_index_shards: int = 10,
                 max_index_deltas: int = 10) -> "IndexOptions":
        """A write's index options on a table of `config`."""
        return cls(index_type, config.bucket_num, prune_by_ranges, use_metadata, config.bucket_hash,
                   config.bucket_hash_fields, update_partition_path, record_index_shards, max_index_deltas)


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


@dataclass(frozen=True)
class TagRequest:
    """What a write asks an index: the records to tag and the file slices their keys may be in."""

    records: DataFrame  # the incoming records, one per key (KEY, PART and the data columns)
    slices: list[FileSlice]  # the latest file slices of the affected partitions (a global index: of all)
    files_in_snapshot: int  # base files in the table's snapshot, for the funnel
    deleting: bool = False  # a delete: a global index then drops a key's moved copy too
    # Step 1's count per partition path, not run yet (BLOOM on a table without a partition field):
    # counted in the lookup's Spark job. `count_stages` label the stages step 1 adds to that job;
    # `count_shuffles`: whether the count has a stage of its own (not when the records are in one
    # Spark partition, which already holds every group).
    counted: DataFrame | None = None
    count_stages: tuple[str, ...] = ("read input",)
    count_shuffles: bool = True


class Index(Protocol):
    """What every index does: tag each record with the file group holding its key (FILE_ID, null:
    an insert), and say what the lookup read (the funnel, its source). Made by
    `index.registry.index_for` from the write's typed index options (`Lookup.options`)."""

    @property
    def lookup(self) -> Lookup: ...

    def tag(self, request: TagRequest) -> TagResult: ...


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
