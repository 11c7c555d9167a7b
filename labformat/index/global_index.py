"""Global indexes (GLOBAL_SIMPLE, GLOBAL_BLOOM): SIMPLE or BLOOM over all partitions; Hudi's rule for records that move partition.

A non-global index looks a key up only in the partition its incoming record names, so a record
whose partition value changed is stored a second time. A global index finds the key wherever it
is (reading every partition: what makes it cost more as a table grows, seed 004) and then, as
Hudi's `hoodie.{bloom,simple}.index.update.partition.path` says:

- true (Hudi's default): the record is deleted from its old file group and inserted in its new
  partition (two rows leave the tag step: one with DROP set, routed to the old file group, one
  insert); a key stored in several partitions (by a non-global index before) ends with one copy;
- false: the update goes to the old file group, and the record keeps its old partition path.

A delete removes the key from whichever partition holds it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from labformat.fileformat.log_file import LogFormatError, keys_deleted_last, live_blocks, read_blocks
from labformat.fileformat.parquet_io import unreadable
from labformat.helper_columns import (
    ANY_LIVE, AT_HOME, COPY_RANK, DEAD, DROP, FILE_ID, FIRST_COPY, KEY, NEW_PART, OLD_PART, PART, ROLE
)
from labformat.index.bloom import BloomIndex
from labformat.index.simple import SimpleIndex
from labformat.index.base import Lookup, TagRequest, TagResult
from labformat.model.enums import IndexType
from labformat.model.file_group import FileSlice
from labformat.storage import Storage
from labformat.spark.compat import default_parallelism
from labformat.spark.partitioning import join_partitioned, partitioned_by, planned_partitions
from labformat.spark.tasks import map_in_arrow


@dataclass(frozen=True)
class GlobalIndex:
    """GLOBAL_SIMPLE and GLOBAL_BLOOM: a key is looked up in every partition, one record per key."""

    lookup: Lookup

    def tag(self, request: TagRequest) -> TagResult:
        """Tag each record with the file group holding its key in any partition; `slices`: every latest
        file slice of the table."""
        lookup, incoming, slices = self.lookup, request.records, request.slices
        named = incoming.withColumnRenamed(PART, NEW_PART)
        if lookup.options.index_type.lookup is IndexType.SIMPLE:
            found = SimpleIndex(lookup, by_key_only=True).tag(replace(request, records=named))
        else:
            # BLOOM's funnel over one pretend partition: every key meets the files of every partition.
            partition_of = {s.file_id: s.partition_path for s in slices}
            flat = [replace(s, partition_path="") for s in slices]
            found = BloomIndex(lookup).tag(replace(request, records=named.withColumn(PART, F.lit("")), slices=flat,
                                                     counted=None))
            found.tagged = _with_old_partition(found.tagged.drop(PART), partition_of, lookup)
            found.updates = None  # counted per pretend partition: the profile counts the tagged records instead
        if any(s.has_logs for s in slices):
            found.tagged = _without_deleted_copies(found.tagged, lookup, slices)
        found.tagged = resolve(found.tagged, lookup.options.update_partition_path, request.deleting)
        return found


def _deleted_in_logs(batches: Iterator[pa.RecordBatch], base_uri: str) -> Iterator[pa.RecordBatch]:
    """Task: per file slice (file id, its log paths as JSON), the keys its logs deleted last."""
    storage = Storage(base_uri)
    schema = pa.schema([(FILE_ID, pa.string()), (KEY, pa.string())])
    for batch in batches:
        for file_id, logs in zip(batch.column(FILE_ID).to_pylist(), batch.column("logs").to_pylist()):
            blocks = []
            for log in json.loads(logs):
                try:
                    blocks += read_blocks(storage.read_bytes(log))
                except (OSError, LogFormatError) as exc:
                    raise unreadable(log, exc, "log file") from None
            dead = keys_deleted_last(live_blocks(blocks))
            yield pa.RecordBatch.from_arrays([pa.array([file_id] * len(dead), pa.string()), pa.array(dead, pa.string())],
                                             schema=schema)


def _without_deleted_copies(tagged: DataFrame, lookup: Lookup, slices: list[FileSlice]) -> DataFrame:
    """Merge-on-read: a key the lookup found in a base file but a log of the same slice deleted since
    (a record moved away, or deleted) is no copy: as Hudi checks a global match by a merged read of the
    slice. A key left with no copy keeps one unmatched row."""
    spark, base_uri = lookup.spark, lookup.base_uri
    with_logs = [(s.file_id, json.dumps(list(s.log_paths))) for s in slices if s.has_logs]
    listed = spark.createDataFrame(with_logs, f"{FILE_ID} string, logs string")
    listed = listed.repartition(max(1, min(len(with_logs), 2 * default_parallelism(spark))))
    dead = map_in_arrow(listed, lambda batches: _deleted_in_logs(batches, base_uri), f"{FILE_ID} string, {KEY} string")
    # Per key, the file groups whose logs deleted it, joined on the key alone: the tagged records stay
    # in the tasks step 1 put them in (by key), and the window below needs no shuffle either.
    n = planned_partitions(tagged)
    dead = partitioned_by(dead, [KEY], n).groupBy(KEY).agg(F.collect_set(FILE_ID).alias(DEAD))
    gone = F.coalesce(F.array_contains(F.col(DEAD), F.col(FILE_ID)), F.lit(False))
    marked = (join_partitioned(tagged, dead, [KEY], n=n)
              .withColumn(OLD_PART, F.when(gone, F.lit(None).cast("string")).otherwise(F.col(OLD_PART)))
              .withColumn(FILE_ID, F.when(gone, F.lit(None).cast("string")).otherwise(F.col(FILE_ID))))
    key = Window.partitionBy(KEY)
    live = F.col(FILE_ID).isNotNull()
    ranked = (marked.withColumn(ANY_LIVE, F.max(live.cast("int")).over(key))
              .withColumn(COPY_RANK, F.row_number().over(key.orderBy(F.col(FILE_ID).asc_nulls_last()))))
    return ranked.where(live | ((F.col(ANY_LIVE) == 0) & (F.col(COPY_RANK) == 1))).drop(DEAD, ANY_LIVE, COPY_RANK)


def _with_old_partition(tagged: DataFrame, partition_of: dict[str, str], lookup: Lookup) -> DataFrame:
    if not partition_of:
        return tagged.withColumn(OLD_PART, F.lit(None).cast("string"))
    where = lookup.spark.createDataFrame(sorted(partition_of.items()), f"{FILE_ID} string, {OLD_PART} string")
    return tagged.join(F.broadcast(where), on=FILE_ID, how="left")


def resolve(tagged: DataFrame, update_partition_path: bool, deleting: bool) -> DataFrame:
    """PART and FILE_ID of every tagged record by Hudi's rule (module docstring), DROP on the rows
    that only remove a moved record's old copy."""
    matched = F.col(FILE_ID).isNotNull()
    if deleting or not update_partition_path:
        # The key stays where it is: the update (or the delete) goes to the partition holding it.
        part = F.when(matched, F.col(OLD_PART)).otherwise(F.col(NEW_PART))
        return tagged.withColumn(PART, part).withColumn(DROP, F.lit(False)).drop(NEW_PART, OLD_PART)
    moved = matched & (F.col(OLD_PART) != F.col(NEW_PART))
    # A key may sit in several partitions (written under a non-global index): the copy in the new
    # partition, if any, is updated; every other copy is removed; one insert when none was there.
    key = Window.partitionBy(KEY)
    placed = (tagged.withColumn(AT_HOME, F.max((matched & ~moved).cast("int")).over(key) == 1)
              .withColumn(FIRST_COPY, F.row_number().over(key.orderBy(F.col(FILE_ID).asc_nulls_last())) == 1))
    insert_anew = moved & ~F.col(AT_HOME) & F.col(FIRST_COPY)
    role = F.explode(F.when(insert_anew, F.array(F.lit(1), F.lit(2)))
                     .when(moved, F.array(F.lit(1))).otherwise(F.array(F.lit(0))))
    # role 0: as tagged; 1: remove the copy in OLD_PART's file group; 2: insert in the new partition.
    roles = placed.withColumn(ROLE, role).drop(AT_HOME, FIRST_COPY)
    return (roles.withColumn(PART, F.when(F.col(ROLE) == 1, F.col(OLD_PART)).otherwise(F.col(NEW_PART)))
            .withColumn(FILE_ID, F.when(F.col(ROLE) == 2, F.lit(None).cast("string")).otherwise(F.col(FILE_ID)))
            .withColumn(DROP, F.col(ROLE) == 1)
            .drop(ROLE, NEW_PART, OLD_PART))

