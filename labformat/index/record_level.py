"""RECORD_INDEX: a global index that looks incoming keys up in the metadata table's record-level index, opening no data file.

Hudi 0.14's answer to SIMPLE's cost (every key read) and BLOOM's (false positives on random keys):
the lookup reads the index entries near the incoming keys, one shard per task, so its cost
follows the keys looked up, not the files in the table. A key is unique in the table, as with the
other global indexes, and a record whose partition changed moves (or stays) as
`hoodie.record.index.update.partition.path` says (`global_index.resolve`).

Before the lookup, the index is made usable: built from the base files when the table has none
or it is stale, untrusted or damaged, or its deltas merged into a new base once there are
`hoodie.metadata.compact.max.delta.commits` of them; the tag result's source says which. A
damaged file found only by the tasks that read it (a failed checksum) is a CorruptIndexError: the
merge then builds instead, and the upsert tags again with `damaged` set (`write/upsert.py`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import functions as F

from labformat.errors import CorruptIndexError, from_task_failure
from labformat.helper_columns import FILE_ID, KEY, NEW_PART, OLD_PART, PART
from labformat.index.base import Lookup, TagRequest, TagResult
from labformat.index.global_index import resolve
from labformat.metadata import record_index
from labformat.model.enums import StatsSource
from labformat.model.file_group import FileSlice
from labformat.model.report import Source, TagFunnel
from labformat.spark.partitioning import join_partitioned

log = logging.getLogger(__name__)


def usable_index(lookup: Lookup, slices: list[FileSlice], shards: int, max_deltas: int, damaged: str | None = None
                 ) -> tuple[record_index.IndexView | None, str | None]:
    """The record index to look keys up in, built or compacted first when needed, and what was done
    (None: used as it was). None for a table with no completed write: every key is an insert.
    `damaged`: a lookup found a file of the index damaged (why): built anew whatever it looks like."""
    ctx = lookup.ctx
    newest = record_index.newest_completed(ctx.timeline)
    if newest is None:
        return None, None
    view, why = (None, damaged) if damaged else record_index.current(ctx.storage, ctx.timeline)
    if view is not None and len(view.deltas) >= max_deltas:
        try:
            return (record_index.compact(ctx.spark, ctx.storage, view, newest),
                    f"{len(view.deltas)} deltas merged into a new base first")
        except Exception as exc:  # noqa: BLE001 - only a damaged index file is handled here
            found = from_task_failure(exc)
            if not isinstance(found, CorruptIndexError):
                raise
            log.warning("%s: the record index is damaged (%s); rebuilding it from the base files", ctx.storage.base_uri,
                        found)
            view, why = None, str(found)
    if view is None:
        shards = record_index.shards_of(ctx.storage) or shards
        built = record_index.build(ctx.spark, ctx.storage, newest, slices, shards)
        return built, f"built from {len(slices)} base files first ({why})"
    return view, None


@dataclass(frozen=True)
class RecordLevelIndex:
    """RECORD_INDEX: each key's file group read from the record index in the metadata table."""

    lookup: Lookup
    damaged: str | None = None  # why the index must be built anew first (a damaged file found)

    def tag(self, request: TagRequest) -> TagResult:
        """Tag each record with the file group the index names for its key; `slices`: every latest file
        slice of the table; `damaged`: why the index must be built anew first."""
        lookup, incoming, slices = self.lookup, request.records, request.slices
        files_in_snapshot = request.files_in_snapshot
        update_partition_path, deleting = lookup.options.update_partition_path, request.deleting
        view, done = usable_index(lookup, slices, lookup.options.record_index_shards, lookup.options.max_index_deltas,
                                  self.damaged)
        funnel = TagFunnel(files_in_snapshot=files_in_snapshot, files_in_affected_partitions=len(slices),
                           files_scanned=0, keys_read=0, index_entries_read=0 if view is None else None,
                           note="RECORD_INDEX reads the index entries near each key from the metadata table: "
                                "no data file opened")
        named = incoming.withColumnRenamed(PART, NEW_PART)
        if view is None:
            untagged = (named.withColumn(FILE_ID, F.lit(None).cast("string"))
                        .withColumn(OLD_PART, F.lit(None).cast("string")))
            return TagResult(resolve(untagged, update_partition_path, deleting), funnel, Source(StatsSource.NONE))
        found, observed = record_index.lookup(lookup.spark, incoming.select(F.col(KEY).alias("key")), view,
                                              lookup.base_uri)
        found = found.select(F.col("key").alias(KEY), F.col("partition_path").alias(OLD_PART),
                             F.col("file_id").alias(FILE_ID))
        tagged = resolve(join_partitioned(named, found, [KEY]), update_partition_path, deleting)
        return TagResult(tagged, funnel, Source(StatsSource.METADATA_TABLE, done), keys_observed=observed)
