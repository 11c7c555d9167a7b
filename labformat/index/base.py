"""What every index shares: the helper column names, the tagging context, and the tag result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

# Helper columns carried next to the data while a write is planned (never written to files).
PART = "_lf_partition_path"
KEY = "_lf_key"
FILE_ID = "_lf_file_id"  # the file group an incoming record updates; null: an insert
BUCKET = "_lf_bucket"  # BUCKET index only
COUNT = "_lf_n"  # rows this deduplicated record stood for


@dataclass(frozen=True)
class IndexContext:
    spark: Any
    base_uri: str
    record_key: str
    index_type: str
    bucket_num: int
    prune_by_ranges: bool
    use_metadata: bool = False  # BLOOM: ranges and filters from the metadata table (if it has them)
    metadata: Any = None  # a MetadataReader when use_metadata
    schema: Any = None  # the table's data schema (column stats decoding)
    # Whether the table has a partition field. Without one, records are keyed by KEY alone, and
    # joins on KEY alone keep the deduplicated records where step 1's shuffle put them.
    partitioned: bool = True
    # False for a table without meta fields: stored keys are computed from the key fields (keygen).
    meta_fields: bool = True
    keygen: Any = None

    @property
    def join_keys(self) -> list[str]:
        return [PART, KEY] if self.partitioned else [KEY]


@dataclass
class TagResult:
    """Incoming records tagged with their file group (FILE_ID null: insert), plus what the lookup did.

    `funnel` holds the file counts the index really observed; keys that do not apply to
    an index are None and `funnel["note"]` says why.
    """

    tagged: DataFrame
    funnel: dict[str, Any] = field(default_factory=dict)
    lookup_source: str | None = None
    cleanup: list = field(default_factory=list)  # persisted DataFrames to release after the write
    # (partition, file group, records) the index itself counted, when it did: the workload profile
    # then needs no pass over the tagged records, and `tagged` is left lazy for the write to consume.
    updates: list[tuple[str, str, int]] | None = None
    # (partition, records, input rows, rows with a null precombine value): step 1's counts, when
    # the index counted them in its own job (`counted` given to BLOOM's tag).
    partition_counts: list[tuple[str, int, int, int, int]] | None = None
