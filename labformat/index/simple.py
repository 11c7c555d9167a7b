"""SIMPLE index: join incoming keys with every key read from the latest base files of the affected partitions."""

from __future__ import annotations

from dataclasses import dataclass
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from labformat.helper_columns import FILE_ID, FROM_FILE, KEY, OLD_PART, PART
from labformat.index.base import Lookup, TagRequest, TagResult
from labformat.model.enums import StatsSource
from labformat.model.file_group import FileSlice
from labformat.model.report import Source, TagFunnel
from labformat.io.files import read_files
from labformat.spark.partitioning import join_partitioned
from labformat.storage import Storage


def existing_keys(ctx: Lookup, slices: list[FileSlice]) -> DataFrame:
    """(partition path, record key, file id) of every record in these base files, read by Spark tasks."""
    storage = Storage(ctx.base_uri)
    paths, sizes = [s.path for s in slices], [s.size_bytes for s in slices]
    if not ctx.meta_fields:
        return _computed_keys(ctx, storage, slices, paths, sizes)
    # The file id comes from the file's own name, not from the _hoodie_file_name meta column, so
    # the lookup trusts only the file system view.
    meta = T.StructType([T.StructField("_hoodie_partition_path", T.StringType()),
                         T.StructField("_hoodie_record_key", T.StringType())])
    return read_files(ctx.spark, storage.base_uri, paths, meta, sizes, FROM_FILE).select(
        F.col("_hoodie_partition_path").alias(PART),
        F.col("_hoodie_record_key").alias(KEY),
        F.regexp_extract(F.col(FROM_FILE), r"^([^_]+)_", 1).alias(FILE_ID),
    )


def _computed_keys(ctx: Lookup, storage: Storage, slices: list[FileSlice], paths: list[str],
                   sizes: list[int]) -> DataFrame:
    """(partition path, record key, file id) of a table without meta fields: the key computed from
    the key fields by the table's key generator, the partition path that of the file's folder."""
    names = [s.path.rsplit("/", 1)[-1] for s in slices]
    entries = [F.lit(v) for name, s in zip(names, slices) for v in (name, s.partition_path)]
    file_name = F.col(FROM_FILE)
    return read_files(ctx.spark, storage.base_uri, paths, ctx.schema, sizes, FROM_FILE).select(
        F.element_at(F.create_map(*entries), file_name).alias(PART),
        ctx.keygen.record_key_column(ctx.schema).alias(KEY),
        F.regexp_extract(file_name, r"^([^_]+)_", 1).alias(FILE_ID),
    )


@dataclass(frozen=True)
class SimpleIndex:
    """SIMPLE: every key of the affected partitions' latest base files, joined with the records."""

    lookup: Lookup
    by_key_only: bool = False  # GLOBAL_SIMPLE's join: on the key alone, the partition holding it kept as OLD_PART

    def tag(self, request: TagRequest) -> TagResult:
        """Left join: a match is an update of that file group, no match is an insert. `by_key_only`
        (GLOBAL_SIMPLE): joined on the key alone, the partition holding it kept as OLD_PART."""
        lookup, incoming, slices = self.lookup, request.records, request.slices
        files_in_snapshot = request.files_in_snapshot
        # `matched` is filled from the workload profile (the join does not count).
        funnel = TagFunnel(files_in_snapshot=files_in_snapshot, files_in_affected_partitions=len(slices),
                           files_scanned=len(slices), keys_read=0 if not slices else None,
                           note="SIMPLE reads every key of the affected partitions' latest base files: no pruning, no bloom")
        if not slices:
            untagged = incoming.withColumn(FILE_ID, F.lit(None).cast("string"))
            if self.by_key_only:
                untagged = untagged.withColumn(OLD_PART, F.lit(None).cast("string"))
            return TagResult(untagged, funnel, Source(StatsSource.NONE))
        # The scan counts the keys it reads as they pass; the count is known once the join has run.
        observed = Observation("labformat_simple_index_keys")
        keys = existing_keys(lookup, slices)
        if self.by_key_only:
            keys, on = keys.select(F.col(PART).alias(OLD_PART), KEY, FILE_ID), [KEY]
        else:
            keys, on = keys.select(*lookup.join_keys, FILE_ID), lookup.join_keys
        keys = keys.observe(observed, F.count(F.lit(1)).alias("keys_read"))
        return TagResult(join_partitioned(incoming, keys, on), funnel, Source(StatsSource.BASE_FILES),
                         keys_observed=observed)
