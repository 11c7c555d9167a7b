"""BLOOM index: (a) range pruning by each file's min/max key, (b) bloom filter check, (c) exact key check."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from labformat.fileformat.arrow_columns import constant
from labformat.fileformat.bloom_filter import decode
from labformat.fileformat.footers import FooterInfo, bloom_filter
from labformat.fileformat.invalid_input import check_record_keys
from labformat.fileformat.log_file import LogFormatError, block_keys, live_blocks, read_blocks
from labformat.fileformat.parquet_io import read_base_file, unreadable
from labformat.helper_columns import FILE_ID, KEY, PART
from labformat.index.simple import SimpleIndex
from labformat.index.base import Lookup, TagRequest, TagResult
from labformat.model.enums import StatsSource
from labformat.model.file_group import FileSlice
from labformat.model.report import Source, TagFunnel
from labformat.spark.compat import default_parallelism, ship
from labformat.spark.jobs import describe
from labformat.spark.partitioning import join_partitioned
from labformat.storage import Storage
from labformat.spark.tasks import map_in_arrow, apply_in_arrow

# A base file's path is not among them: each check task looks it up by its file group, so the
# shuffle between range pruning and the check moves (key, file group) pairs only.
CANDIDATE_DDL = f"{PART} string, {KEY} string, {FILE_ID} string"
CHECKED_DDL = (f"{PART} string, {KEY} string, {FILE_ID} string, candidates long, after_bloom long, matched long, "
               "keys_read long, logs_read long")
_CHECKED_SCHEMA = pa.schema([(PART, pa.string()), (KEY, pa.string()), (FILE_ID, pa.string()),
                             ("candidates", pa.int64()), ("after_bloom", pa.int64()), ("matched", pa.int64()),
                             ("keys_read", pa.int64()), ("logs_read", pa.int64())])


def prune_by_ranges(batches: Iterable[pa.RecordBatch], files: dict[str, tuple[np.ndarray, ...]], prune: bool
                    ) -> Iterator[pa.RecordBatch]:
    """Task (a): pair each incoming key with the files of its partition whose key range holds it.

    `files` maps a partition path to (min keys, max keys, file ids, whether the slice has log files
    that may hold keys its base file does not: then every key of the partition is its candidate).
    Keys are sorted once per batch, so each file's candidates are one slice found by binary search.
    Without pruning every file of the partition is a candidate for every key.
    """
    for batch in batches:
        table = pa.Table.from_batches([batch])
        check_record_keys(table, KEY)  # this is the first task to see the keys; None would not sort
        parts = table.column(PART)
        for part in pc.unique(parts).to_pylist():
            entry = files.get(part)
            if entry is None:
                continue  # no file in this partition: every key is an insert
            mins, maxs, ids, unbounded = entry
            column = table.filter(pc.equal(parts, part)).column(KEY).combine_chunks()
            sorted_keys = column.take(pc.sort_indices(column))
            keys = sorted_keys.to_numpy(zero_copy_only=False)  # numpy only for the binary search
            if prune:
                lo = np.searchsorted(keys, mins, side="left")
                hi = np.searchsorted(keys, maxs, side="right")
                # A slice whose logs may hold inserts: its base file's range says nothing of their keys.
                lo[unbounded] = 0
                hi[unbounded] = len(keys)
            else:
                lo = np.zeros(len(ids), dtype=np.int64)
                hi = np.full(len(ids), len(keys), dtype=np.int64)
            counts = np.maximum(hi - lo, 0)
            if counts.sum() == 0:
                continue
            picked = pa.concat_arrays([sorted_keys.slice(a, b - a) for a, b in zip(lo, hi) if b > a])
            owner = pa.array(np.repeat(np.arange(len(ids)), counts))  # the file each picked key is paired with
            yield pa.RecordBatch.from_arrays(
                [constant(part, len(picked)), picked, pa.array(ids, pa.string()).take(owner)],
                schema=pa.schema([(PART, pa.string()), (KEY, pa.string()), (FILE_ID, pa.string())]),
            )


def check_file(table: pa.Table, base_uri: str, path: str, blooms: dict[str, tuple[str, str]] | None = None,
               logs: dict[str, list[str]] | None = None) -> pa.Table:
    """Tasks (b)+(c), one file group at a time: its bloom filter, then its real keys.

    `table`: the candidate keys range pruning paired with the file group whose base file is `path`.

    `blooms`: (type code, encoded filter) per path, from the metadata table; else the footer's.
    A file without a filter (Hudi writes none without meta fields) passes every candidate on.

    Returns the keys really found in the file, plus one stats row (KEY null) counting
    candidates, keys that passed the bloom filter, keys really present, the keys the exact check
    read from the file (all of its rows when a candidate passed the filter, else none) and the
    log files whose keys it read.

    A merge-on-read slice whose log files may hold keys its base file does not (`logs`: base path
    -> log paths) is checked on the base file's filter and on the keys its logs hold, read from the
    logs themselves (they have no filter); a key in either counts. Logs of updates and deletes
    only are not in `logs`: every key they hold is in the base file already.
    """
    file_id = table.column(FILE_ID)[0].as_py()
    part = table.column(PART)[0].as_py()
    keys = table.column(KEY)
    storage = Storage(base_uri)
    bloom = decode(blooms[path][1], blooms[path][0]) if blooms is not None else bloom_filter(base_uri, path)
    maybe = bloom.might_contain(keys) if bloom is not None else np.ones(len(keys), dtype=bool)
    log_keys = pa.array([], pa.string())
    logs_read = len(logs[path]) if logs and path in logs else 0
    if logs_read:
        assert logs is not None  # `logs_read` counts its entry
        blocks = []
        for log in logs[path]:
            try:
                blocks += read_blocks(storage.read_bytes(log))
            except (LogFormatError, OSError, ValueError) as exc:
                raise unreadable(log, exc, "log file") from None
        log_keys = pa.array(sorted(block_keys(live_blocks(blocks))), pa.string())
        maybe = maybe | pc.is_in(keys, value_set=log_keys).to_numpy(zero_copy_only=False)
    survivors = pc.filter(keys, pa.array(maybe))
    matched = pa.array([], pa.string())
    keys_read = len(log_keys)
    if len(survivors):
        in_file = read_base_file(storage, path, columns=["_hoodie_record_key"]).column(0)
        if len(log_keys):
            in_file = pa.chunked_array(in_file.chunks + [log_keys], pa.string())
        keys_read = len(in_file)
        # Probe the file's keys against the few survivors, not the other way round: hashing the
        # survivors and probing 500k keys took 11 ms, hashing 500k keys to probe 1,000 took 69 ms.
        # unique: a bulk insert (no deduplication) may have left a key twice in one file.
        matched = pc.unique(pc.filter(in_file, pc.is_in(in_file, value_set=survivors.combine_chunks())))
    n = len(matched)
    # Candidate rows whose key the file holds: the same as `n` for a deduplicated batch; without
    # hoodie.combine.before.upsert a key may come twice, and both rows go to this file group.
    rows_matched = int(pc.sum(pc.is_in(keys, value_set=matched)).as_py() or 0) if n else 0
    return pa.Table.from_arrays(
        [constant(part, n + 1),
         pa.concat_arrays([matched, pa.array([None], pa.string())]),
         constant(file_id, n + 1),
         pa.array([None] * n + [len(keys)], pa.int64()),
         pa.array([None] * n + [int(maybe.sum())], pa.int64()),
         pa.array([None] * n + [rows_matched], pa.int64()),
         pa.array([None] * n + [keys_read], pa.int64()),
         pa.array([None] * n + [logs_read], pa.int64())],
        schema=_CHECKED_SCHEMA,
    )


def _ranges_from_metadata(ctx: Lookup, slices: list[FileSlice]) -> tuple[dict[str, FooterInfo] | None, str | None]:
    """Key ranges from the metadata table's column stats of the record key; None and why when it has none."""
    assert ctx.metadata is not None  # `use_metadata`: the lookup has the metadata table's reader
    stats, source = ctx.metadata.column_stats(slices, ctx.schema)
    if stats is None:
        return None, source
    out: dict[str, FooterInfo] = {}
    for s in slices:
        key_stats = stats.get(s.path, {}).get(ctx.record_key)
        if key_stats is None:
            return None, f"no column stats for the record key {ctx.record_key!r}"
        out[s.path] = FooterInfo(key_stats.min, key_stats.max, key_stats.value_count or 0)
    return out, None


_STATS = ("candidates", "after_bloom", "matched", "keys_read", "logs_read")
_COUNTS = ("records", "rows_in", "null_ordering", "bad_keys")


def _with_counts(stats: DataFrame, counted: DataFrame) -> DataFrame:
    """The per-file stats rows and step 1's per-partition counts as one query (counts: FILE_ID null)."""
    # SQL text rather than Columns: a few Py4J calls per column saved on every upsert.
    def nulls(names: Iterable[str]) -> list[str]:
        return [f"CAST(NULL AS BIGINT) AS {n}" for n in names]

    files = stats.selectExpr(PART, FILE_ID, *_STATS, *nulls(_COUNTS))
    parts = counted.selectExpr(PART, f"CAST(NULL AS STRING) AS {FILE_ID}", *nulls(_STATS), *_COUNTS)
    return files.unionByName(parts)


def _split_counts(rows: list[Row]) -> tuple[list[Row], list[tuple[str, int, int, int, int]]]:
    stats = [r for r in rows if r[FILE_ID] is not None]
    counts = [(r[PART], r.records, r.rows_in or 0, r.null_ordering or 0, r.bad_keys or 0)
              for r in rows if r[FILE_ID] is None]
    return stats, counts


@dataclass(frozen=True)
class BloomIndex:
    """BLOOM: key ranges, then bloom filters, prune the files whose keys are read and checked."""

    lookup: Lookup

    def tag(self, request: TagRequest) -> TagResult:
        """`counted`: step 1's count per partition path, not run yet: counted in the same Spark job as
        the lookup (one job for both; `count_stages` label the stages step 1 adds to it, and
        `count_shuffles` says whether the count has a stage of its own: not when the records are in
        one Spark partition, which already holds every group)."""
        lookup, incoming, slices = self.lookup, request.records, request.slices
        files_in_snapshot = request.files_in_snapshot
        counted, count_stages, count_shuffles = request.counted, request.count_stages, request.count_shuffles
        if not lookup.meta_fields:
            # Files without meta fields have no key range or bloom filter (Hudi writes none), and Hudi's
            # bloom index refuses such tables; their keys are looked up as the SIMPLE index does.
            result = SimpleIndex(lookup).tag(request)
            result.funnel = replace(result.funnel, note=(
                "BLOOM on a table without meta fields: no key ranges or bloom filters in its files, so every key of "
                "the affected partitions was read (as SIMPLE does)"))
            result.lookup_source = Source(StatsSource.BASE_FILES, "no meta fields")
            return result
        ranges, blooms, source = None, None, Source(StatsSource.FOOTERS)
        if lookup.options.use_metadata:
            ranges, why = _ranges_from_metadata(lookup, slices)
            if ranges is not None:
                assert lookup.metadata is not None  # as in `_ranges_from_metadata`
                blooms, why = lookup.metadata.bloom_filters([s.path for s in slices])
            if ranges is None or blooms is None:
                ranges, blooms, source = None, None, Source(StatsSource.FOOTERS, f"metadata table: {why}")
            else:
                source = Source(StatsSource.METADATA_TABLE)
        footer_ranges = ranges is None
        if ranges is None:
            ranges = lookup.ctx.footers.key_ranges([s.path for s in slices])
        metadata_files = lookup.metadata.files_read if lookup.options.use_metadata and lookup.metadata is not None else 0
        by_partition: dict[str, list[tuple[str, str | None, str, bool]]] = {}
        for s in slices:
            info = ranges[s.path]
            if info.num_rows == 0 or info.min_key is None:
                continue  # an empty base file (every row deleted) holds no key
            by_partition.setdefault(s.partition_path, []).append((info.min_key, info.max_key, s.file_id,
                                                                  not s.keyed_by_base_file))
        files = {
            part: tuple(np.array(col, dtype=object) for col in zip(*entries))[:3]
            + (np.array([e[3] for e in entries], dtype=bool),)
            for part, entries in by_partition.items()
        }
        paths = {(s.partition_path, s.file_id): s.path for s in slices}
        # Logs of updates and deletes only (a BLOOM or SIMPLE writer's) add no key to their slice: the
        # base file's range and filter decide, and the logs are never opened. Other logs are read.
        logs = {s.path: list(s.log_paths) for s in slices if not s.keyed_by_base_file}
        if not files:
            funnel = TagFunnel(files_in_snapshot, len(slices), after_range_pruning=0, after_bloom=0, matched=0,
                               false_positives=0, keys_after_range_pruning=0, keys_after_bloom=0, keys_matched=0,
                               keys_false_positives=0, keys_read_by_exact_check=0, keys_read=0, log_files_read=0,
                               footers_read=len(slices) if footer_ranges else 0, metadata_files_read=metadata_files)
            counts = None
            if counted is not None:
                with describe(lookup.spark, *count_stages, "count per partition path"):
                    counts = [(r[PART], r.records, r.rows_in or 0, r.null_ordering or 0, r.bad_keys or 0)
                              for r in counted.collect()]
            return TagResult(incoming.withColumn(FILE_ID, F.lit(None).cast("string")), funnel, source, updates=[],
                             partition_counts=counts)

        candidates = map_in_arrow(incoming.select(PART, KEY),
                                  partial(prune_by_ranges, files=files, prune=lookup.options.prune_by_ranges), CANDIDATE_DDL)
        base_uri = lookup.base_uri
        # Filters from the metadata table travel to the tasks as a broadcast (read once per executor;
        # on Spark Connect inside the check's closure).
        shipped = ship(lookup.spark, {p: (b.type_code, b.to_base64()) for p, b in blooms.items()}) if blooms else None

        # A plain typed function: pyspark 4.3 cannot infer the eval type of a functools.partial here.
        def check(table: pa.Table) -> pa.Table:
            path = paths[(table.column(PART)[0].as_py(), table.column(FILE_ID)[0].as_py())]
            return check_file(table, base_uri, path, shipped.value if shipped is not None else None, logs)

        # One group per candidate file; as many tasks as files (up to the cores twice over), rather
        # than spark.sql.shuffle.partitions mostly empty ones.
        tasks = max(1, min(len(slices), 2 * default_parallelism(lookup.spark)))
        checked = apply_in_arrow(candidates.repartition(tasks, FILE_ID).groupBy(FILE_ID), check, CHECKED_DDL)
        checked = checked.persist()
        stats_rows = checked.filter(F.col(KEY).isNull())  # one row per file that survived range pruning
        counts = None
        if counted is None:
            with describe(lookup.spark, "range pruning", "bloom + exact check"):
                stats = stats_rows.collect()
        else:
            # One job: step 1's shuffle fills the cached batch the pruning tasks read in the same stage,
            # and its count branch reads that cache too (a union, each branch a stage of its own).
            with describe(lookup.spark, *count_stages[:-1], f"{count_stages[-1]}, range pruning",
                          *(("count per partition path",) if count_shuffles else ()), "bloom + exact check, counts"):
                stats, counts = _split_counts(_with_counts(stats_rows, counted).collect())
        funnel = TagFunnel(
            files_in_snapshot, len(slices),
            after_range_pruning=len(stats),
            after_bloom=sum(1 for r in stats if r.after_bloom > 0),
            matched=sum(1 for r in stats if r.matched > 0),
            false_positives=sum(1 for r in stats if r.after_bloom > 0 and r.matched == 0),
            keys_after_range_pruning=sum(r.candidates for r in stats),
            keys_after_bloom=sum(r.after_bloom for r in stats),
            keys_matched=sum(r.matched for r in stats),
            keys_false_positives=sum(r.after_bloom - r.matched for r in stats),
            keys_read_by_exact_check=sum(r.keys_read for r in stats),
            keys_read=sum(r.keys_read for r in stats),  # only the exact check reads keys; ranges and filters are metadata
            log_files_read=sum(r.logs_read for r in stats),  # merge-on-read: logs that may hold inserts
            # Each checked file's task opens its footer for the filter unless the metadata table shipped it.
            footers_read=(len(slices) if footer_ranges else 0) + (len(stats) if blooms is None else 0),
            metadata_files_read=metadata_files,
        )
        # Only (key, file group) pairs move to meet the incoming records: joined on the keys the
        # deduplicate step partitioned by, the records themselves stay where that shuffle put them.
        matches = checked.filter(F.col(KEY).isNotNull()).select(*lookup.join_keys, FILE_ID)
        # Never broadcast: that would collect the matched keys on the driver, in a Spark job of its own
        # (the cached matches are small enough for Spark to choose it). Shuffled into step 1's tasks, they
        # join the records in the write's job, one stage more.
        tagged = join_partitioned(incoming, matches, lookup.join_keys, hint="shuffle_hash")
        updates = [(r[PART], r[FILE_ID], r.matched) for r in stats if r.matched > 0]
        return TagResult(tagged, funnel, source, cleanup=[checked], updates=updates, partition_counts=counts)
