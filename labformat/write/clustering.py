"""Clustering: Hudi's `replacecommit` rewrites small base files as fewer, bigger ones sorted by chosen columns, in one Spark job.

`run` plans on the driver (`plan_clustering`): the latest file slices below
`hoodie.clustering.plan.strategy.small.file.limit`, in the partitions the filters leave
(`...partition.selected`, `...skip.partitions.from.latest`: the newest partitions are the active
ones), packed per partition into clustering groups of at most `...max.bytes.per.group` bytes; a
group needs two files at least, since rewriting one file alone makes nothing fewer. Each group
is written as ceil(bytes / `...target.file.max.bytes`) new file groups. The plan goes into
`<instant>.replacecommit.requested` (Hudi's HoodieRequestedReplaceMetadata fields), one Spark
task per clustering group reads its base files, sorts the rows by `...sort.columns` (the record
key when none are given) and splits them evenly into its new base files. The order over several
sort columns is `hoodie.layout.optimize.strategy`'s: `linear` sorts by the first column, ties by
the next; `z-order` and `hilbert` sort by a space-filling curve's position over the columns, each
column's value replaced by its rank among the group's distinct values scaled to 16 bits (Hudi's
`curve.build.method=sample`, with exact ranks for sampled range bounds: raw bytes, Hudi's `direct`
method, would order strings sharing a prefix such as `drone0042` by that prefix alone). A file of
a curve-ordered group holds a block of the columns' space, so a filter on any one column, or on
both, prunes files where a linear order serves only its first column; the instant completes
as `<instant>.replacecommit` whose `partitionToReplaceFileIds` names the old file groups. The
file-system view (labformat's and hudi-rs's) hides them from then on; cleaning deletes them once
no retained instant reads them. Records keep their commit time and seqno (Hudi's
`hoodie.clustering.preserve.commit.metadata`): clustering moves rows, it changes none.

Merge-on-read: only file slices without log files are clustered. Merging a slice's logs is
compaction's job, and a slice with logs is one still being updated, which clustering's "older,
inactive key ranges" leaves alone; Hudi would merge them, at the cost of a snapshot read per slice.

A CONSISTENT_HASHING bucket table is resized instead (Hudi's SparkConsistentBucketClusteringPlanStrategy):
each bucket whose file slice (base and log files) holds more than `hoodie.bucket.index.split.threshold`
times `max_file_size` bytes is split in two at the middle of its hash range, while the partition has
fewer than `hoodie.bucket.index.max.num.buckets` buckets, the largest first. One task per split reads
the slice merged (base file and logs), and writes each child bucket's records, sorted by key, as
its new file group; the partition's new ring is written before the replacecommit completes
(`index/consistent_bucket.py`). Only the split buckets' records move. Merging small buckets
(Hudi's `merge.threshold`) is not done. A write that lands in a bucket while its split runs makes
the split fail at commit (a conflict on that file group), where Hudi writes such updates twice. Of
two resizes planned on one ring, the one committing second conflicts even when they split different
buckets: its ring keeps a node the other replaced, and the newest ring would name a file group no
reader sees.

Refused with ConfigError: SIMPLE-engine BUCKET tables (the bucket index fixes each key's file group)
and tables without meta fields (no stored record key to sort or range by).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, Iterator, Sequence, TypeGuard

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from labformat.config import WriteOptions
from labformat.context import TableContext
from labformat.errors import ConfigError
from labformat.fileformat.arrow_columns import conform_to_spark
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.fs_view import check_base_files
from labformat.fileformat.parquet_io import read_base_file
from labformat.read.merge_on_read import merge_file_slice
from labformat.model.base_file import new_file_id
from labformat.model.commit import NULL_COMMIT
from labformat.index import consistent_bucket as ch
from labformat.model.enums import BucketEngine, IndexType, LayoutStrategy, MergeMode, Operation
from labformat.model.file_group import FileSlice
from labformat.model.instant import Action, Instant
from labformat.model.report import ClusteringDetails, WriteReport
from labformat.schema import META_COLUMNS, RECORD_KEY, with_meta_columns
from labformat.spark.jobs import describe
from labformat.storage import Storage
from labformat.write.arrow_writer import WriteSpec, this_task, write_rows_as_base_file
from labformat.write.operation import OperationRun, Plan, WriteOperation, key_column, write_spec
from labformat.spark.compat import distribute
from labformat.spark.tasks import map_in_arrow

STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
CONSISTENT_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkConsistentBucketClusteringExecutionStrategy"
_GROUP_DDL = "partition_path string, paths string, outputs int"


@dataclass(frozen=True)
class ClusteringGroup:
    """The small file slices of one partition rewritten together (Hudi's HoodieClusteringGroup)."""

    partition_path: str
    slices: tuple[FileSlice, ...]
    output_file_groups: int

    @property
    def bytes_in(self) -> int:
        return sum(s.size_bytes for s in self.slices)

    def to_json_dict(self) -> dict[str, Any]:
        return {"slices": [{"dataFilePath": s.path, "deltaFilePaths": [], "fileId": s.file_id,
                            "partitionPath": s.partition_path, "bootstrapFilePath": "", "version": 1}
                           for s in self.slices],
                "metrics": {"TOTAL_FILE_SIZE": self.bytes_in, "NUM_FILES": len(self.slices)},
                "numOutputFileGroups": self.output_file_groups, "version": 1}


def _csv(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


def check_clusterable(ctx: TableContext, options: WriteOptions) -> list[str]:
    """ConfigError for a table or options clustering cannot take; the sort columns otherwise."""
    conf = ctx.config
    if conf.bucket_engine is BucketEngine.CONSISTENT_HASHING:
        return []
    if conf.index_type is IndexType.BUCKET:
        raise ConfigError(f"{ctx.storage.base_uri} is a BUCKET table: its index fixes each record key's file "
                          "group (hoodie.index.type=BUCKET), so clustering cannot move records to new ones")
    if not conf.populate_meta_fields:
        raise ConfigError("clustering sorts and ranges base files by their stored record keys; this table keeps "
                          "none (hoodie.populate.meta.fields=false)")
    schema = ctx.schema()
    columns = _csv(options.clustering_sort_columns)
    known = [f.name for f in schema.fields] if schema is not None else []
    unknown = [c for c in columns if c not in known and c not in META_COLUMNS]
    if unknown:
        raise ConfigError(f"hoodie.clustering.plan.strategy.sort.columns: no column {', '.join(map(repr, unknown))} "
                          f"in the table (columns: {', '.join(known)})")
    if options.layout_optimize_strategy is not LayoutStrategy.LINEAR and len(columns) > MAX_CURVE_COLUMNS:
        raise ConfigError(f"hoodie.layout.optimize.strategy={options.layout_optimize_strategy} orders rows along a "
                          f"curve over at most {MAX_CURVE_COLUMNS} sort columns, got {len(columns)}")
    return columns


def plan_clustering(slices: list[FileSlice], options: WriteOptions) -> list[ClusteringGroup]:
    """The strategy (see the module docstring): small slices without logs, grouped per partition."""
    partitions = sorted({s.partition_path for s in slices})
    skip = options.clustering_skip_partitions_from_latest
    allowed = set(partitions[:len(partitions) - skip] if skip else partitions)
    selected = _csv(options.clustering_partitions)
    if selected:
        allowed &= set(selected)
    groups = []
    for partition in sorted(allowed):
        small = sorted((s for s in slices if s.partition_path == partition and not s.has_logs
                        and s.size_bytes < options.clustering_small_file_limit),
                       key=lambda s: (s.base_instant_time, s.path))
        bins: list[list[FileSlice]] = []
        for s in small:
            if not bins or sum(x.size_bytes for x in bins[-1]) + s.size_bytes > options.clustering_max_bytes_per_group:
                bins.append([])
            bins[-1].append(s)
        for chosen in bins:
            if len(chosen) < 2:
                continue
            size = sum(s.size_bytes for s in chosen)
            outputs = max(1, math.ceil(size / options.clustering_target_file_max_bytes))
            if outputs >= len(chosen):
                continue  # as many files after as before: nothing gained
            groups.append(ClusteringGroup(partition, tuple(chosen), outputs))
    return groups


CURVE_BITS = 64  # bits of a curve position (a uint64), shared among the columns, 16 at most each
MAX_CURVE_COLUMNS = 16  # 4 bits each: 16 ranges per column


def column_ranks(column: pa.ChunkedArray | pa.Array, bits: int) -> np.ndarray:
    """Each value's rank among the column's distinct values (nulls last), spread over 0 .. 2**bits - 1."""
    ranks: np.ndarray = pc.rank(column, sort_keys="ascending", tiebreaker="dense").to_numpy()
    distinct = int(ranks.max()) if len(ranks) else 1
    return (ranks.astype(np.uint64) - np.uint64(1)) * np.uint64(1 << bits) // np.uint64(distinct)


def z_order_positions(ranks: list[np.ndarray], bits: int) -> np.ndarray:
    """Morton codes: the columns' rank bits interleaved, the highest bit of the first column first."""
    z = np.zeros(len(ranks[0]), np.uint64)
    for bit in range(bits - 1, -1, -1):
        for r in ranks:
            z = (z << np.uint64(1)) | ((r >> np.uint64(bit)) & np.uint64(1))
    return z


def hilbert_positions(ranks: list[np.ndarray], bits: int) -> np.ndarray:
    """Distances along a Hilbert curve through the columns' ranks (the hilbertcurve package)."""
    from hilbertcurve.hilbertcurve import HilbertCurve

    points = np.column_stack(ranks).tolist()
    return np.array(HilbertCurve(bits, len(ranks), n_procs=0).distances_from_points(points), np.uint64)


def layout_order(rows: pa.Table, sort_columns: list[str], strategy: LayoutStrategy) -> pa.Array:
    """The row order of `hoodie.layout.optimize.strategy` over `sort_columns`, ties by the record key."""
    columns = [c for c in sort_columns if c != RECORD_KEY]
    if strategy is LayoutStrategy.LINEAR or len(columns) < 2:
        return pc.sort_indices(rows, sort_keys=[(c, "ascending") for c in columns] + [(RECORD_KEY, "ascending")])
    bits = min(16, CURVE_BITS // len(columns))
    ranks = [column_ranks(rows.column(c), bits) for c in columns]
    curve = z_order_positions if strategy is LayoutStrategy.ZORDER else hilbert_positions
    keyed = pa.table({"position": curve(ranks, bits), "key": rows.column(RECORD_KEY)})
    return pc.sort_indices(keyed, sort_keys=[("position", "ascending"), ("key", "ascending")])


def cluster_group_task(batches: Iterator[pa.RecordBatch], spec: WriteSpec, sort_columns: list[str],
                       schema: T.StructType, strategy: LayoutStrategy = LayoutStrategy.LINEAR) -> Iterator[pa.RecordBatch]:
    """A Spark task per clustering group: read its base files, sort the rows, write them as new file groups."""
    storage = Storage(spec.base_uri)
    task = this_task()
    for batch in batches:
        for row in batch.to_pylist():
            paths = json.loads(row["paths"])
            tables = []
            for path in paths:
                # Each in the table's schema now: files written before a column was added or widened conform.
                table = conform_to_spark(read_base_file(storage, path), schema)
                tables.append(table.cast(pa.schema([f.with_nullable(True) for f in table.schema]).remove_metadata()))
            rows = pa.concat_tables(tables, promote_options="default")
            rows = rows.take(layout_order(rows, sort_columns, strategy))
            outputs = row["outputs"]
            per_file = math.ceil(rows.num_rows / outputs) if rows.num_rows else 0
            bytes_in = sum(info.size for info in storage.list(row["partition_path"]) if info.path in paths)
            for n in range(outputs):
                part = rows.slice(n * per_file, per_file)
                if part.num_rows == 0 and n > 0:
                    continue
                share = bytes_in if n == 0 else 0  # the group's bytes read, counted once
                stat = write_rows_as_base_file(storage, spec, row["partition_path"], new_file_id(), task, part,
                                               NULL_COMMIT, share)
                yield BaseFileStat.record_batch([stat])


@dataclass(frozen=True)
class BucketSplit:
    """One bucket of a consistent-hashing ring split in two (a clustering group of one file slice)."""

    slice: FileSlice
    ring: ch.Ring  # the partition's ring after every split of this resize
    children: tuple[ch.Node, ch.Node]

    @property
    def partition_path(self) -> str:
        return self.slice.partition_path

    @property
    def slices(self) -> tuple[FileSlice, ...]:
        return (self.slice,)

    @property
    def output_file_groups(self) -> int:
        return 2

    @property
    def bytes_in(self) -> int:
        return self.slice.size_bytes + self.slice.log_bytes

    def to_json_dict(self) -> dict[str, Any]:
        s = self.slice
        return {"slices": [{"dataFilePath": s.path, "deltaFilePaths": list(s.log_paths), "fileId": s.file_id,
                            "partitionPath": s.partition_path, "bootstrapFilePath": "", "version": 1}],
                "metrics": {"TOTAL_FILE_SIZE": self.bytes_in, "NUM_FILES": 1 + len(s.log_paths)},
                "numOutputFileGroups": 2, "version": 1,
                "extraMetadata": {"SPLIT_CHILDREN": json.dumps([{"value": n.value, "fileIdPrefix": n.file_id_prefix}
                                                                for n in self.children])}}


def plan_resize(rings: dict[str, ch.Ring], slices: list[FileSlice], options: WriteOptions, num_buckets: int,
                instant: str) -> list[BucketSplit]:
    """The consistent-hashing resize (see the module docstring): per partition, the buckets past the
    split threshold, largest first, while the partition stays within the bucket maximum."""
    limit = options.bucket_split_threshold * options.max_file_size
    most = options.bucket_max_num or num_buckets
    splits = []
    for partition in sorted({s.partition_path for s in slices}):
        ring = ch.ring_of(rings, partition, num_buckets)
        by_file = {s.file_id: s for s in slices if s.partition_path == partition}
        big = sorted((s for s in by_file.values() if s.size_bytes + s.log_bytes > limit),
                     key=lambda s: -(s.size_bytes + s.log_bytes))
        chosen = []
        for s in big:
            if len(ring.nodes) >= most:
                break
            index = next((i for i, n in enumerate(ring.nodes) if n.file_id == s.file_id), None)
            if index is None:
                continue  # a file group the ring does not name (written before the table had a ring)
            try:
                ring, children = ring.split(index, instant)
            except ValueError:
                continue  # its range is down to one hash (one hot key): splitting cannot shrink it
            chosen.append((s, children))
        splits += [BucketSplit(s, ring, children) for s, children in chosen]
    return splits


_SPLIT_DDL = "partition_path string, path string, logs string, values string, file_ids string"


def split_bucket_task(batches: Iterator[pa.RecordBatch], spec: WriteSpec, schema: T.StructType, precombine_field: str,
                      merge_mode: MergeMode, hash_fields: tuple[str, ...]) -> Iterator[pa.RecordBatch]:
    """A Spark task per split bucket: its file slice merged (base file and logs), each record hashed
    onto the new ring, each child's records written as its new file group."""
    storage = Storage(spec.base_uri)
    task = this_task()
    for batch in batches:
        for row in batch.to_pylist():
            logs = json.loads(row["logs"])
            rows = merge_file_slice(storage, row["path"], logs, precombine_field, merge_mode, schema)
            values = np.array(json.loads(row["values"]), np.int64)  # the children's, in ring order
            hashes = ch.key_hashes(rows.column(RECORD_KEY).combine_chunks(), hash_fields)
            # Every hash of the parent's range lies at or below one of its two children's values.
            child = np.searchsorted(values, hashes, side="left") % len(values)
            bytes_in = sum(info.size for info in storage.list(row["partition_path"])
                           if info.path == row["path"] or info.path in logs)
            for n, file_id in enumerate(json.loads(row["file_ids"])):
                part = rows.filter(pa.array(child == n))
                stat = write_rows_as_base_file(storage, spec, row["partition_path"], file_id, task, part, NULL_COMMIT,
                                               bytes_in if n == 0 else 0)
                yield BaseFileStat.record_batch([stat])


def _splits(groups: Sequence[ClusteringGroup | BucketSplit]) -> TypeGuard[Sequence[BucketSplit]]:
    """Whether a plan's groups are a resize's bucket splits: a plan's groups are all of one kind."""
    return bool(groups) and isinstance(groups[0], BucketSplit)


@dataclass
class ClusteringPlan(Plan):
    groups: Sequence[ClusteringGroup | BucketSplit] | None = None  # a resize's: BucketSplits only
    sort_columns: list[str] | None = None
    details: ClusteringDetails | None = None


class Clustering(WriteOperation[ClusteringPlan, BaseFileStat]):
    """Cluster the table's small files (see the module docstring); a report with instant None when no
    partition has two small files to put together."""

    kind = Operation.CLUSTER

    def action(self, ctx: TableContext) -> Action:
        return Action.REPLACE_COMMIT

    def plan(self, run: OperationRun) -> ClusteringPlan:
        ctx, options = run.ctx, run.options
        sort_columns = check_clusterable(ctx, options)
        resizing = ctx.config.bucket_engine is BucketEngine.CONSISTENT_HASHING
        groups: Sequence[ClusteringGroup | BucketSplit]
        with run.step("plan"):
            slices = ctx.file_system_view().latest_file_slices()
            if resizing:
                rings = ch.load_rings(ctx.storage, ctx.timeline, ctx.config.bucket_num)
                groups = plan_resize(rings, slices, options, ctx.config.bucket_num, "")
            else:
                groups = plan_clustering(slices, options)
            check_base_files(ctx.storage, [s for g in groups for s in g.slices])
        plan: dict[str, Any] = {"inputGroups": [g.to_json_dict() for g in groups],
                "strategy": {"strategyClassName": CONSISTENT_STRATEGY if resizing else STRATEGY, "version": 1,
                             "strategyParams": {
                    "hoodie.clustering.plan.strategy.sort.columns": ",".join(sort_columns),
                    "hoodie.layout.optimize.strategy": str(options.layout_optimize_strategy),
                    "hoodie.clustering.plan.strategy.target.file.max.bytes": str(options.clustering_target_file_max_bytes)}},
                "extraMetadata": {}, "version": 1, "preserveHoodieMetadata": True}
        details = ClusteringDetails(tuple(sort_columns or [ctx.config.record_key]), len(groups),
                                    sum(len(g.slices) for g in groups), sum(g.bytes_in for g in groups),
                                    tuple(plan["inputGroups"]), layout=str(options.layout_optimize_strategy))
        return ClusteringPlan(nothing_to_do=not groups, groups=groups, sort_columns=sort_columns, details=details,
                              requested={"clusteringPlan": plan, "extraMetadata": {}, "version": 1})

    def write(self, run: OperationRun, plan: ClusteringPlan, instant: Instant | None) -> list[BaseFileStat]:
        assert instant is not None and plan.groups is not None and plan.sort_columns is not None  # a plan to write
        ctx = run.ctx
        data_schema = ctx.schema()
        assert data_schema is not None  # a table with files to cluster has commits, and so a schema
        if _splits(plan.groups):
            return self._split_buckets(run, plan.groups, instant, data_schema)
        spec = write_spec(ctx, run.options, instant.time, data_schema, key_column(ctx, data_schema),
                          max_file_size=run.options.clustering_target_file_max_bytes)
        rows = [(g.partition_path, json.dumps([s.path for s in g.slices]), g.output_file_groups) for g in plan.groups]
        file_schema, sort_columns = with_meta_columns(data_schema), plan.sort_columns
        strategy = run.options.layout_optimize_strategy
        tasks = distribute(ctx.spark, rows, _GROUP_DDL)
        with describe(ctx.spark, "sort clustering groups, write base files"):
            collected = map_in_arrow(tasks, lambda b: cluster_group_task(b, spec, sort_columns, file_schema, strategy),
                                     BaseFileStat.spark_ddl()).collect()
        return [BaseFileStat.from_row(r) for r in collected]

    def _split_buckets(self, run: OperationRun, splits: Sequence[BucketSplit], instant: Instant,
                       data_schema: T.StructType) -> list[BaseFileStat]:
        ctx = run.ctx
        # Each partition's new ring first: it names the new file groups, and counts once the instant completes.
        rings = {g.partition_path: replace(g.ring, instant=instant.time) for g in splits}
        for ring in rings.values():
            ch.save_ring(ctx.storage, ring)

        def mark_committed(report: WriteReport) -> WriteReport:
            for ring in rings.values():
                ch.mark_committed(ctx.storage, ring)
            return report

        run.tx.after_commit.append(mark_committed)
        spec = write_spec(ctx, run.options, instant.time, data_schema, key_column(ctx, data_schema))
        rows = [(g.partition_path, g.slice.path, json.dumps(list(g.slice.log_paths)),
                 json.dumps([n.value for n in g.children]), json.dumps([n.file_id for n in g.children]))
                for g in splits]
        file_schema, config = with_meta_columns(data_schema), ctx.config
        tasks = distribute(ctx.spark, rows, _SPLIT_DDL)
        with describe(ctx.spark, "split buckets: merge each slice, write its two children"):
            collected = map_in_arrow(
                tasks,
                lambda b: split_bucket_task(b, spec, file_schema, config.precombine_field, config.merge_mode,
                                            config.bucket_hash_fields),
                BaseFileStat.spark_ddl()).collect()
        return [BaseFileStat.from_row(r) for r in collected]

    def commit(self, run: OperationRun, plan: ClusteringPlan, written: list[BaseFileStat]) -> None:
        data_schema = run.ctx.schema()
        assert plan.groups is not None and data_schema is not None  # as in `write`
        replaced: dict[str, tuple[str, ...]] = {}
        for g in plan.groups:
            replaced[g.partition_path] = replaced.get(g.partition_path, ()) + tuple(s.file_id for s in g.slices)
        # A resize's rings were derived from the snapshot's: another resize committed meanwhile must not
        # have replaced a node they keep (`check_conflicts`).
        rings = {g.partition_path: g.ring for g in plan.groups if isinstance(g, BucketSplit)}
        ring_nodes = tuple((p, n.file_id) for p, ring in sorted(rings.items()) for n in ring.nodes)
        run.tx.commit(written, data_schema, replaced=replaced, ring_nodes=ring_nodes)

    def report(self, run: OperationRun, plan: ClusteringPlan, written: list[BaseFileStat] | None,
               instant: str | None) -> WriteReport:
        if written is None:
            return run.report(None, details=plan.details)
        assert plan.details is not None  # every plan has its details
        rows = sum(s.num_writes for s in written)
        details = replace(plan.details, files_out=len(written), bytes_out=sum(s.file_size for s in written),
                          bytes_read=sum(s.prev_size for s in written))
        return run.report(instant, written, rows_in=rows, rows_written=rows, details=details)
