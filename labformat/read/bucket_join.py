"""Bucket join (seed 003): two BUCKET tables hashed alike, joined one bucket pair per Spark task, so the join needs no shuffle.

A key's bucket is a function of its hash fields' values alone (Hudi's `BucketIdentifier`), so in
two tables with the same bucket count and hash fields a key can only meet its match in the
bucket of the same number. Reading bucket `b` of both tables in one task and joining there
gives the whole join with no exchange in the physical plan and no shuffle bytes, where
`left.read().join(right.read(), ...)` repartitions both sides by the key first. Spark itself
cannot be told (its bucketed reads assume its own murmur3 hash, which Hudi's buckets do not
follow), so the join runs inside the tasks, in pyarrow, on the hash fields.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from labformat.context import TableContext
from labformat.errors import ConfigError
from labformat.fileformat.arrow_columns import conform_to_spark
from labformat.fileformat.parquet_io import read_base_file
from labformat.fs_view import check_base_files
from labformat.index.bucket import bucket_of_file_id, check_layout
from labformat.model.enums import IndexType
from labformat.model.instant import Instant
from labformat.storage import Storage
from labformat.spark.compat import distribute
from labformat.spark.tasks import map_in_arrow

JOIN_TYPES = {"inner": "inner", "left": "left outer", "right": "right outer", "outer": "full outer",
              "full": "full outer", "left_semi": "left semi", "left_anti": "left anti"}
RIGHT_SUFFIX = "_right"


def _refuse_unless_alike(left: TableContext, right: TableContext) -> tuple[str, ...]:
    """The hash fields the two tables share; ConfigError naming what differs otherwise."""
    for name, ctx in (("left", left), ("right", right)):
        if ctx.config.index_type is not IndexType.BUCKET:
            raise ConfigError(f"a bucket join needs two BUCKET tables; the {name} one ({ctx.config.name}) has "
                              f"hoodie.index.type={ctx.config.index_type.value}")
        if ctx.config.merge_on_read:
            raise ConfigError("a bucket join reads base files: merge-on-read BUCKET tables are not supported")
    a, b = left.config, right.config
    if a.bucket_num != b.bucket_num:
        raise ConfigError(f"a bucket join needs the same bucket count on both sides: {a.bucket_num} and {b.bucket_num} "
                          "(hoodie.bucket.index.num.buckets)")
    if a.bucket_hash is not b.bucket_hash or a.bucket_hash_fields != b.bucket_hash_fields:
        raise ConfigError(f"a bucket join needs both tables hashed alike: {a.bucket_hash.value} on "
                          f"{list(a.bucket_hash_fields)} and {b.bucket_hash.value} on {list(b.bucket_hash_fields)}")
    return a.bucket_hash_fields


def _output_schema(left: T.StructType, right: T.StructType, on: tuple[str, ...], how: str) -> T.StructType:
    fields = list(left.fields)
    if JOIN_TYPES[how] in ("left semi", "left anti"):
        return T.StructType(fields)
    taken = {f.name for f in fields}
    for f in right.fields:
        if f.name in on:
            continue
        fields.append(T.StructField(f.name + RIGHT_SUFFIX if f.name in taken else f.name, f.dataType, True))
    # An outer join leaves either side's columns null where it found no match.
    return T.StructType([T.StructField(f.name, f.dataType, True) for f in fields])


def _read_bucket(storage: Storage, paths: list[str], schema: T.StructType) -> pa.Table:
    tables = [conform_to_spark(read_base_file(storage, p), schema) for p in paths]
    return pa.concat_tables(tables) if tables else conform_to_spark(pa.table({}), schema)


def _join_buckets(batches: Iterator[pa.RecordBatch], base_uris: tuple[str, str], files: dict[int, tuple[list[str], list[str]]],
                  schemas: tuple[T.StructType, T.StructType], on: tuple[str, ...], how: str,
                  out: T.StructType) -> Iterator[pa.RecordBatch]:
    """Task: for each bucket number it was given, bucket b of the left table joined with bucket b of the right."""
    left_storage, right_storage = Storage(base_uris[0]), Storage(base_uris[1])
    for batch in batches:
        for bucket in batch.column("bucket").to_pylist():
            left_paths, right_paths = files.get(bucket, ([], []))
            left = _read_bucket(left_storage, left_paths, schemas[0])
            right = _read_bucket(right_storage, right_paths, schemas[1])
            right = right.rename_columns([c + RIGHT_SUFFIX if c in left.column_names and c not in on else c
                                          for c in right.column_names])
            joined = left.join(right, keys=list(on), join_type=JOIN_TYPES[how], use_threads=False)
            yield from conform_to_spark(joined, out).to_batches()


def bucket_join(left: TableContext, right: TableContext, how: str = "inner",
                left_at: Instant | None = None, right_at: Instant | None = None) -> DataFrame:
    """The join of two BUCKET tables (same bucket count and hash fields) on their hash fields, one
    bucket pair per Spark task: data columns only, the right table's clashing columns suffixed
    `_right`. `how`: inner, left, right, outer (full), left_semi, left_anti."""
    if how not in JOIN_TYPES:
        raise ConfigError(f"unknown join type {how!r}; choose one of {sorted(JOIN_TYPES)}")
    on = _refuse_unless_alike(left, right)
    schemas = (left.schema(left_at) or T.StructType([]), right.schema(right_at) or T.StructType([]))
    missing = [c for c in on for s in schemas if c not in s.fieldNames()]
    if missing:
        raise ConfigError(f"a bucket join is on the hash fields {list(on)}; a table has no column {missing[0]!r}")
    files: dict[int, tuple[list[str], list[str]]] = {b: ([], []) for b in range(left.config.bucket_num)}
    for side, (ctx, at) in enumerate(((left, left_at), (right, right_at))):
        slices = ctx.file_system_view(at).latest_file_slices()
        check_base_files(ctx.storage, slices)
        # A bucket count edited under the table would send file groups to no task (or two to one bucket).
        check_layout([(s.partition_path, s.file_id) for s in slices], ctx.config.bucket_num,
                     f"bucket join of {ctx.storage.base_uri}")
        for s in slices:
            files[bucket_of_file_id(s.file_id)][side].append(s.path)
    out = _output_schema(*schemas, on, how)
    spark = left.spark
    base_uris = (left.storage.base_uri, right.storage.base_uri)
    buckets = sorted(b for b, (mine, theirs) in files.items() if mine or theirs)
    # One Spark partition per bucket (distributed, not repartitioned: no exchange even for the list).
    listed = distribute(spark, [(b,) for b in buckets], "bucket int")
    return map_in_arrow(listed, lambda batches: _join_buckets(batches, base_uris, files, schemas, on, how, out), out)
