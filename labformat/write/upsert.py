"""Upsert and delete: Hudi's seven steps, one named function each, read top to bottom like the lesson.

Step 1 is in `dedupe.py`, steps 3-6's planning in `write_plan.py` and step 7's routing in `routing.py`;
this module runs them in order.

1. deduplicate the batch by record key (highest precombine value wins; a shuffle)
2. latest file slices of every affected partition
3. tag each record as update (with its file group) or insert, through the index
4. small files: base files below hoodie.parquet.small.file.limit
5. average record size, from earlier commits
6. assign inserts to small files, then to new file groups (bin packing)
7. write: one Spark task per file group, copy-on-write merge into a new file slice (merge-on-read:
   updates and deletes of an existing file group appended as a log file of its latest slice); commit

`Upsert` runs them as an operation of the protocol (`write/operation.py`): steps 1 to 6 are its plan
(an `UpsertState` handed from step to step), step 7 its tasks; a BUCKET table's bulk insert is an
`Upsert` of kind BULK_INSERT (routed by bucket, not deduplicated).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from labformat.config import WriteOptions
from labformat.context import TableContext
from labformat.errors import ConfigError, CorruptIndexError, from_task_failure
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.fs_view import refuse_nested_partitions
from labformat.helper_columns import (
    BAD_KEYS, NULL_ORDERING
)
from labformat.index import bucket, consistent_bucket
from labformat.index.base import IndexOptions, Lookup, TagRequest, TagResult
from labformat.index.registry import index_for
from labformat.metadata import MetadataReader
from labformat.model.commit import LOG_KEYS_IN_BASE_KEY
from labformat.model.enums import BucketEngine, IndexType, Operation
from labformat.model.file_group import FileSlice
from labformat.model.instant import Instant
from labformat.model.report import TagFunnel, UpsertDetails, WriteReport
from labformat.spark.compat import default_parallelism, partitions_of
from labformat.spark.jobs import describe
from labformat.write.compaction import inline_compaction
from labformat.write.operation import OperationRun, Plan, WriteOperation, key_column, write_spec
from labformat.write.transaction import record_index_asked
from labformat.write.dedupe import (
    PartitionCount, counts_by_partition, deduplicate, fuses_count_into_tag, partition_counts, partition_counts_query,
    refuse_bad_rows, shuffle_parallelism,
)
from labformat.write.routing import route_records, task_keys, write_file_groups
from labformat.write.write_plan import (
    Profile, WritePlan, assign_inserts, estimate_record_size, find_small_files, workload_profile,
)

log = logging.getLogger(__name__)


# ---- step 1: write/dedupe.py ---------------------------------------------------------------------


# ---- step 2 -------------------------------------------------------------------------------------

def latest_file_slices(ctx: TableContext, partitions: set[str], writes_rows: bool = True,
                       every_partition: bool = False) -> tuple[list[FileSlice], int]:
    """Step 2: the latest file slice of each file group in the affected partitions, or in every
    partition for a global index (and the table's file count). InvalidInputError, before any
    instant, for a partition path that would nest in another; CorruptTableError for a BUCKET table
    whose file groups contradict its bucket count (`bucket.check_layout`)."""
    view = ctx.file_system_view()
    groups = view.file_groups()
    conf = ctx.config
    if conf.index_type is IndexType.BUCKET and conf.bucket_engine is BucketEngine.SIMPLE:
        # Every partition's, not only the affected ones': a count that contradicts any file group is no
        # count the table was written with.
        bucket.check_layout([(g.partition_path, g.file_id) for g in groups], conf.bucket_num, str(ctx.storage.base_uri))
    if writes_rows:  # a delete writes no partition: one that matches nothing deletes nothing
        refuse_nested_partitions(partitions, {g.partition_path for g in groups})
    return view.latest_file_slices(None if every_partition else partitions), len(groups)


# ---- step 3 -------------------------------------------------------------------------------------

def tag_records(lookup: Lookup, request: TagRequest, index_damaged: str | None = None) -> TagResult:
    """Step 3: tag each record with the file group holding its key (FILE_ID), or none: an insert,
    by the write's index (`registry.index_for`). `index_damaged` (RECORD_INDEX): why its index is to
    be built anew first."""
    result = index_for(lookup, index_damaged).tag(request)
    if result.updates is None:  # the profile will count the tagged records, and the write reads them again
        result.tagged = result.tagged.persist()
        result.cleanup.append(result.tagged)
    return result


# ---- the whole operation --------------------------------------------------------------------------

@dataclass
class UpsertState(Plan):
    """What each step of an upsert hands the next: the plan of steps 1 to 6."""

    index_type: IndexType = IndexType.BLOOM
    data_schema: T.StructType | None = None
    schema_changes: tuple[str, ...] = ()
    input: DataFrame | None = None  # the batch, in the table's (evolved) schema
    input_partitions: int = 0
    lookup: Lookup | None = None
    deduped: DataFrame | None = None  # step 1's records, persisted
    parallelism: int = 0  # step 1's shuffle partitions
    shuffles: int = 1  # tasks of the counting shuffles: step 1's parallelism, at least the cores
    counts: dict[str, PartitionCount] = field(default_factory=dict)
    slices: list[FileSlice] = field(default_factory=list)  # step 2
    files_in_snapshot: int = 0
    tag: TagResult | None = None  # step 3
    profile: Profile | None = None
    small: dict[str, list[FileSlice]] = field(default_factory=dict)  # step 4
    record_size: int = 0  # step 5
    record_size_source: str | None = None
    write_plan: WritePlan | None = None  # step 6


class Upsert(WriteOperation[UpsertState, BaseFileStat]):
    """Upsert (or delete) `df` into the table through the seven steps; a BUCKET table's bulk insert when
    `kind` is BULK_INSERT. On a merge-on-read table with `hoodie.compact.inline`, the compaction due
    after the delta commit is a post-commit step of its transaction (`report.compaction`)."""

    def __init__(self, df: DataFrame, kind: Operation) -> None:
        self.df = df
        self.kind = kind

    def index_type(self, ctx: TableContext, options: WriteOptions) -> IndexType:
        """The write's index (a write may switch among all but BUCKET, never to or from BUCKET)."""
        table_index = ctx.config.index_type
        index_type = options.index_type or table_index
        if (index_type is IndexType.BUCKET) != (table_index is IndexType.BUCKET):
            raise ConfigError(f"hoodie.index.type={index_type.value}: this table was created with {table_index.value}; "
                              "a BUCKET table's layout is fixed, so neither switch to nor from BUCKET")
        record_index_asked(ctx, options)
        return index_type

    def plan(self, run: OperationRun) -> UpsertState:
        ctx, options, kind = run.ctx, run.options, self.kind
        state = UpsertState(index_type=self.index_type(ctx, options))
        with run.step("validate"):
            ctx.validate_input(self.df, need_precombine=kind is Operation.UPSERT, writes_rows=kind.writes_rows
                               or kind is Operation.BULK_INSERT)
            if kind is Operation.DELETE:
                state.data_schema, state.input = ctx.schema(), self.df
            else:
                state.data_schema, state.schema_changes = ctx.schema_for_write(self.df, options.reconcile_schema)
                state.input = ctx.conform_input(self.df, state.data_schema)
        if state.data_schema is None:  # a delete on a table never written to
            state.nothing_to_do = True
            return state
        state.input_partitions = partitions_of(state.input)
        # Every shuffle's task count is set in the plan (spark/partitioning.py), never in the session.
        state.shuffles = max(shuffle_parallelism(state.input_partitions, options), default_parallelism(ctx.spark), 1)
        index_options = IndexOptions.of_table(ctx.config, state.index_type, options.bloom_prune_by_ranges,
                                              options.bloom_use_metadata, update_partition_path(state.index_type, options),
                                              options.record_index_shards, options.metadata_compact_max_delta_commits)
        state.lookup = Lookup(ctx, index_options, state.data_schema,
                              MetadataReader(ctx.storage, ctx.timeline) if options.bloom_use_metadata else None)
        self._steps_1_to_6(run, state)
        assert state.write_plan is not None  # step 6's
        state.nothing_to_do = not state.write_plan.targets  # an empty write never starts an instant
        return state

    def _steps_1_to_6(self, run: OperationRun, state: UpsertState) -> None:
        ctx, options, kind = run.ctx, run.options, self.kind
        fused = fuses_count_into_tag(ctx, state.index_type, kind)
        assert state.input is not None and state.lookup is not None  # set by `plan` before the steps
        with run.step("deduplicate"):
            deduped, state.parallelism = deduplicate(ctx, state.input, options, kind, state.input_partitions,
                                                     by_key=state.index_type.is_global)
            deduped = deduped.persist()
            run.cleanup.append(deduped)
            combined = kind is not Operation.BULK_INSERT and (options.combine_before_upsert or kind is not Operation.UPSERT)
            count_stages = ("read input",) + (("keep newest per key",) if combined else ())
            counted = partition_counts_query(deduped, state.shuffles)
            if fused:
                partitions = {""}  # counted in the tag step's job, which also runs this step's shuffle
            else:
                # Materialize here, so the shuffle's time and tasks belong to this step.
                with describe(ctx.spark, *count_stages, "count per partition path"):
                    state.counts = partition_counts(deduped, state.shuffles)
                refuse_bad_rows(state.counts, ctx.config.precombine_field, ctx.config.record_key)
                partitions = set(state.counts)
            helpers = [c for c in (NULL_ORDERING, BAD_KEYS) if c in deduped.columns]
            state.deduped = records = deduped.drop(*helpers) if helpers else deduped  # still read from the persisted records
        with run.step("latest_file_slices"):
            state.slices, state.files_in_snapshot = latest_file_slices(ctx, partitions, writes_rows=kind.writes_rows,
                                                                       every_partition=state.index_type.is_global)
        lookup = state.lookup
        with run.step("tag"):
            def tag(index_damaged: str | None = None) -> None:
                request = TagRequest(records, state.slices, state.files_in_snapshot, deleting=kind is Operation.DELETE,
                                     counted=counted if fused else None, count_stages=count_stages,
                                     count_shuffles=state.parallelism > 1)
                state.tag = tag_records(lookup, request, index_damaged)
                run.cleanup.extend(state.tag.cleanup)
                if fused:
                    assert state.tag.partition_counts is not None  # BLOOM counted them, `counted` given
                    state.counts = counts_by_partition(state.tag.partition_counts)
                    refuse_bad_rows(state.counts, ctx.config.precombine_field, ctx.config.record_key)
                state.profile = workload_profile(state.tag, state.counts, state.index_type, state.shuffles)

            try:
                tag()
            except Exception as exc:  # noqa: BLE001 - only a damaged record index is handled here
                damaged = from_task_failure(exc) if state.index_type is IndexType.RECORD_INDEX else None
                if not isinstance(damaged, CorruptIndexError):
                    raise
                # The lookup ran in the profile's job, before any instant: the index, derived from
                # the base files, is built from them again (its build refuses a key stored twice).
                log.warning("%s: the record index is damaged (%s); rebuilding it from the base files", ctx.storage.base_uri,
                            damaged)
                tag(str(damaged))
        if fused:
            run.steps.ran_in("deduplicate", "tag")
        with run.step("small_files"):
            takes_inserts = kind is not Operation.DELETE and state.index_type is not IndexType.BUCKET
            state.small = find_small_files(state.slices, options) if takes_inserts else {}
        with run.step("record_size"):
            state.record_size, state.record_size_source = estimate_record_size(ctx, options)
        assert state.profile is not None  # step 3's
        with run.step("assign_inserts"):
            state.write_plan = assign_inserts(state.profile, state.slices, state.small, state.record_size, options,
                                              state.index_type, kind, merge_on_read=ctx.config.merge_on_read)

    def write(self, run: OperationRun, state: UpsertState, instant: Instant | None) -> list[BaseFileStat]:
        # A plan with targets: every step ran, and `execute` started the instant.
        assert instant is not None and state.data_schema is not None
        assert state.tag is not None and state.write_plan is not None
        ctx = run.ctx
        spec = write_spec(ctx, run.options, instant.time, state.data_schema, key_column(ctx, state.data_schema),
                          log_blocks=ctx.config.merge_on_read)
        if ctx.config.bucket_engine is BucketEngine.CONSISTENT_HASHING:
            # The rings the tag used for partitions without one yet: before any file group they name.
            consistent_bucket.save_initial_rings(ctx.storage, sorted({t.partition_path for t in state.write_plan.targets}),
                                                 ctx.config.bucket_num)
        routed = route_records(state.tag, state.write_plan, task_keys(len(state.write_plan.targets)))
        return write_file_groups(routed, state.write_plan, spec, self.kind)

    def commit(self, run: OperationRun, state: UpsertState, written: list[BaseFileStat]) -> None:
        assert state.data_schema is not None  # a plan with targets
        # BLOOM and SIMPLE cannot index logs, so inserts went to base files: the logs this delta
        # commit wrote hold keys of their base files only (BUCKET puts inserts in a bucket's logs).
        keyed = run.ctx.config.merge_on_read and state.index_type is not IndexType.BUCKET
        run.tx.commit(written, state.data_schema, extra={LOG_KEYS_IN_BASE_KEY: "true"} if keyed else None)
        if self.kind is not Operation.BULK_INSERT:
            run.tx.after_commit.append(inline_compaction(run.ctx, run.options))

    def report(self, run: OperationRun, state: UpsertState, written: list[BaseFileStat] | None,
               instant: str | None) -> WriteReport:
        profile = state.profile
        rows_in = profile.rows_in if profile else 0
        deduplicated = profile.rows_in - profile.records if profile else 0
        if written is None:  # nothing to write: no instant was started
            details = UpsertDetails(state.index_type, state.parallelism, schema_changes=state.schema_changes)
            return run.report(None, rows_in=rows_in, rows_deduplicated=deduplicated,
                              funnel=_funnel(state, ()) if state.tag else None, details=details)
        assert state.tag is not None and state.write_plan is not None  # written: every step ran
        files = sorted(written, key=lambda s: s.path)
        incoming = sum(s.incoming_bytes for s in files)
        size = sum(s.file_size for s in files)
        details = UpsertDetails(
            state.index_type, state.parallelism, lookup_source=state.tag.lookup_source, record_size=state.record_size,
            record_size_source=state.record_size_source, small_files=sum(len(v) for v in state.small.values()),
            small_file_inserts_planned=sum(b.records for b in state.write_plan.insert_buckets if b.small_file),
            write_targets=len(state.write_plan.targets), bytes_read=sum(s.prev_size for s in files),
            incoming_bytes=incoming, write_amplification=round(size / incoming, 2) if incoming else None,
            schema_changes=state.schema_changes)
        return run.report(
            instant, files, rows_in=rows_in, rows_written=sum(s.num_writes for s in files),
            rows_inserted=sum(s.num_inserts for s in files), rows_updated=sum(s.num_update_writes for s in files),
            rows_deleted=sum(s.num_deletes for s in files), rows_deduplicated=deduplicated,
            funnel=_funnel(state, files), details=details)


def update_partition_path(index_type: IndexType, options: WriteOptions) -> bool:
    """Whether a global index moves a record whose partition changed (Hudi's option of that index)."""
    if index_type is IndexType.GLOBAL_BLOOM:
        return options.bloom_update_partition_path
    if index_type is IndexType.RECORD_INDEX:
        return options.record_index_update_partition_path
    return options.simple_update_partition_path


def _funnel(state: UpsertState, written: Sequence[BaseFileStat]) -> TagFunnel:
    """The tag funnel as the index observed it; `matched` from what really held a key where the index
    could not count it (SIMPLE's join, BUCKET's hash)."""
    assert state.tag is not None and state.profile is not None  # step 3 ran
    funnel = state.tag.funnel
    if state.index_type.lookup is IndexType.SIMPLE or state.index_type is IndexType.RECORD_INDEX:
        return replace(funnel, matched=len(state.profile.updated_file_groups()))
    if state.index_type is IndexType.BUCKET:
        return replace(funnel, matched=sum(1 for s in written if not s.created and (s.num_update_writes or s.num_deletes)))
    return funnel
