"""BUCKET index: a hash of the record key picks the file group; no lookup at all."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from labformat.index.base import BUCKET, FILE_ID, KEY, PART, Lookup, TagResult
from labformat.model.enums import StatsSource
from labformat.model.file_group import FileSlice
from labformat.model.report import Source, TagFunnel


def bucket_column(key_column, num_buckets: int):
    """The bucket of each key: Spark's murmur3 `hash` mod the bucket count.

    Hudi hashes with Java's String.hashCode; any stable hash serves, as long as every
    writer of the table uses the same one.
    """
    return F.pmod(F.hash(key_column), F.lit(num_buckets)).cast("int")


def bucket_prefix(bucket: int) -> str:
    """File ids of a bucket table start with the bucket number, as Hudi's do: `00000003-<uuid>-0`."""
    return f"{bucket:08d}"


def bucket_of_file_id(file_id: str) -> int:
    head = file_id.split("-", 1)[0]
    if len(head) != 8 or not head.isdigit():
        raise ValueError(f"file id {file_id!r} is not a bucket file id")
    return int(head)


def tag(ctx: Lookup, incoming: DataFrame, slices: list[FileSlice], files_in_snapshot: int) -> TagResult:
    """Tag each record with its bucket's existing file group (null when the bucket has none yet).

    Whether a record is an update or an insert is only known when its file group is
    merged: the write tasks report it.
    """
    existing = [(s.partition_path, bucket_of_file_id(s.file_id), s.file_id) for s in slices]
    with_bucket = incoming.withColumn(BUCKET, bucket_column(F.col(KEY), ctx.options.bucket_num))
    # `matched` (file groups whose bucket received records) is filled from the written files.
    funnel = TagFunnel(files_in_snapshot=files_in_snapshot, files_in_affected_partitions=len(slices),
                       note="BUCKET hashes each key to its file group: no lookup, no pruning, no bloom")
    if not existing:
        return TagResult(with_bucket.withColumn(FILE_ID, F.lit(None).cast("string")), funnel, Source(StatsSource.HASH))
    groups = ctx.spark.createDataFrame(existing, f"{PART} string, {BUCKET} int, {FILE_ID} string")
    tagged = with_bucket.join(F.broadcast(groups), on=[PART, BUCKET], how="left")
    return TagResult(tagged, funnel, Source(StatsSource.HASH))
