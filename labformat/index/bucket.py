"""BUCKET index: a hash of the record key picks the file group, as Apache Hudi computes it; no lookup at all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

from labformat.errors import CorruptTableError
from labformat.fileformat.java_hash import java_string_hashes
from labformat.helper_columns import BUCKET, FILE_ID, KEY, PART
from labformat.index.base import IndexOptions, Lookup, TagRequest, TagResult
from labformat.model.enums import BucketHash, StatsSource
from labformat.model.report import Source, TagFunnel
from labformat.spark.tasks import arrow_udf

# Hudi's placeholders for a null or empty field value inside a complex record key.
NULL_VALUE = "__null__"
EMPTY_VALUE = "__empty__"

_INT_MAX = 0x7FFFFFFF


def hash_values(key: str, fields: tuple[str, ...]) -> list[str | None]:
    """The values Hudi hashes for one record key (KeyGenUtils.extractRecordKeysByFields): a simple key is
    its own value; a complex key's `field:value` pairs are kept for `fields` (all when empty), with
    Hudi's placeholders turned back into a null and an empty value."""
    if "," not in key or ":" not in key:
        return [key]
    values: list[str | None] = []
    for part in key.split(","):
        name, sep, value = part.partition(":")
        if not sep:
            values.append(part)
        elif not fields or name in fields:
            values.append(None if value == NULL_VALUE else "" if value == EMPTY_VALUE else value)
    return values


def hudi_bucket_ids(keys: pa.Array, num_buckets: int, fields: tuple[str, ...] = ()) -> np.ndarray:
    """Hudi's bucket of each record key: `(List<String>.hashCode() & Integer.MAX_VALUE) % num_buckets`
    over the key's hash values (BucketIdentifier.getBucketId), as int32."""
    keys = keys.cast(pa.string())
    simple = pc.invert(pc.and_(pc.match_substring(keys, ","), pc.match_substring(keys, ":"))).to_numpy(
        zero_copy_only=False)
    with np.errstate(over="ignore"):
        # A one-value list's hashCode: 31 * 1 + the value's hash.
        hashes = np.uint32(31) + java_string_hashes(keys)
        for i in np.flatnonzero(~simple):  # complex keys: Hudi tables with several key fields
            h = np.uint32(1)
            values = hash_values(keys[int(i)].as_py(), fields)
            for value_hash in java_string_hashes(pa.array(values, pa.string())):
                h = h * np.uint32(31) + value_hash
            hashes[i] = h
    return ((hashes & np.uint32(_INT_MAX)) % np.uint32(num_buckets)).astype(np.int32)


def bucket_of_key(key: str, options: IndexOptions) -> int:
    """One key's bucket, on the driver (bucket pruning of a query); Hudi's hash only."""
    return int(hudi_bucket_ids(pa.array([key]), options.bucket_num, options.bucket_hash_fields)[0])


def bucket_column(key_column: Column, options: IndexOptions) -> Column:
    """The bucket of each key (a Spark column), by the table's hash: Hudi's, computed in Arrow batches,
    or, for a table labformat wrote before it hashed as Hudi does, Spark's murmur3 `hash` pmod the count."""
    if options.bucket_hash is BucketHash.SPARK_MURMUR3:
        return F.pmod(F.hash(key_column), F.lit(options.bucket_num)).cast("int")
    num_buckets, fields = options.bucket_num, options.bucket_hash_fields

    @arrow_udf("int")
    def hudi_bucket(keys: pa.Array) -> pa.Array:
        return pa.array(hudi_bucket_ids(keys, num_buckets, fields), pa.int32())

    bucket: Column = hudi_bucket(key_column)
    return bucket


def bucket_prefix(bucket: int) -> str:
    """File ids of a bucket table start with the bucket number, as Hudi's do: `00000003-<uuid>-0`."""
    return f"{bucket:08d}"


def is_bucket_file_id(file_id: str) -> bool:
    head = file_id.split("-", 1)[0]
    return len(head) == 8 and head.isdigit()


def bucket_of_file_id(file_id: str) -> int:
    if not is_bucket_file_id(file_id):
        raise ValueError(f"file id {file_id!r} is not a bucket file id")
    return int(file_id[:8])


def _by_bucket(groups: Iterable[tuple[str, str]], where: str) -> dict[tuple[str, int], list[str]]:
    by_bucket: dict[tuple[str, int], list[str]] = {}
    for partition, file_id in groups:
        if not is_bucket_file_id(file_id):
            shown = f"{partition}/{file_id}" if partition else file_id
            raise CorruptTableError(f"{where}: file group {shown} is named after no bucket, but the table is a BUCKET "
                                    "table (hoodie.index.type=BUCKET), whose file ids start with their bucket number")
        by_bucket.setdefault((partition, bucket_of_file_id(file_id)), []).append(file_id)
    return by_bucket


def check_bucket_count(groups: Iterable[tuple[str, str]], num_buckets: int, where: str) -> None:
    """CorruptTableError when a file group of `groups` ((partition path, file id)) is no bucket's, or names
    a bucket past `hoodie.bucket.index.num.buckets`: the count was changed under a written table, and
    every key would hash to another bucket than the one holding it (lost updates, keys stored twice,
    point queries that miss). A smaller count than the table was written with shows this way; a larger
    one cannot be told from buckets not written yet."""
    by_bucket = _by_bucket(groups, where)
    beyond = sorted((b, p) for p, b in by_bucket if b >= num_buckets)
    if beyond:
        named = ", ".join(f"{p}/{by_bucket[(p, b)][0]}" if p else by_bucket[(p, b)][0] for b, p in beyond[:5])
        raise CorruptTableError(
            f"{where}: hoodie.properties says hoodie.bucket.index.num.buckets={num_buckets}, but the table's file "
            f"groups name bucket(s) up to {beyond[-1][0]} ({named}{' ...' if len(beyond) > 5 else ''}): the "
            "bucket count no longer matches the data, and keys would hash to other buckets than those holding "
            "them. Restore the count the table was written with; nothing was written")


def check_layout(groups: Iterable[tuple[str, str]], num_buckets: int, where: str) -> None:
    """`check_bucket_count`, and CorruptTableError for two file groups in one bucket (no lookup can choose
    between them). Checked on the snapshot's file groups before a write plans on the count."""
    groups = list(groups)
    check_bucket_count(groups, num_buckets, where)
    by_bucket = _by_bucket(groups, where)
    doubled = sorted((p, b) for (p, b), ids in by_bucket.items() if len(ids) > 1)
    if doubled:
        p, b = doubled[0]
        raise CorruptTableError(
            f"{where}: bucket {b} of partition {p!r} has {len(by_bucket[(p, b)])} file groups "
            f"({', '.join(sorted(by_bucket[(p, b)]))}), and a bucket holds one; its keys cannot be looked up "
            f"({len(doubled)} such bucket(s)), as when two concurrent first writes into a bucket both "
            "committed; nothing was written")


@dataclass(frozen=True)
class BucketIndex:
    """BUCKET with Hudi's simple hash: a key's bucket is its hash modulo the bucket count; no lookup."""

    lookup: Lookup

    def tag(self, request: TagRequest) -> TagResult:
        """Tag each record with its bucket's existing file group (null when the bucket has none yet).

        Whether a record is an update or an insert is only known when its file group is
        merged: the write tasks report it.
        """
        lookup, incoming, slices = self.lookup, request.records, request.slices
        files_in_snapshot = request.files_in_snapshot
        existing = [(s.partition_path, bucket_of_file_id(s.file_id), s.file_id) for s in slices]
        with_bucket = incoming.withColumn(BUCKET, bucket_column(F.col(KEY), lookup.options))
        # `matched` (file groups whose bucket received records) is filled from the written files.
        funnel = TagFunnel(files_in_snapshot=files_in_snapshot, files_in_affected_partitions=len(slices),
                           files_scanned=0, keys_read=0,
                           note="BUCKET hashes each key to its file group: no file opened, no key read")
        if not existing:
            return TagResult(with_bucket.withColumn(FILE_ID, F.lit(None).cast("string")), funnel, Source(StatsSource.HASH))
        groups = lookup.spark.createDataFrame(existing, f"{PART} string, {BUCKET} int, {FILE_ID} string")
        tagged = with_bucket.join(F.broadcast(groups), on=[PART, BUCKET], how="left")
        return TagResult(tagged, funnel, Source(StatsSource.HASH))
