"""Notebook 06's rules: what each index's tag step read, what its upsert rewrote and left twice, what a bucket resize rewrote."""

from __future__ import annotations

from typing import Sequence

from labformat.lab.claims import clearly_faster, rule


def _ratio(big: float, small: float) -> str:
    return f"{big / small:.1f}x" if small else "no keys on the smaller side"


@rule("on time-ordered keys BLOOM's tag step reads at least 3x fewer keys than SIMPLE's: range pruning spares "
      "the older files of the week the corrections fall in",
      absent=dict(bloom=241_920, simple=241_920), present=dict(bloom=34_560, simple=241_920))
def range_pruning_spares_older_files(bloom: int, simple: int) -> tuple[bool, str]:
    return simple > 0 and 3 * bloom <= simple, f"BLOOM {bloom:,} keys, SIMPLE {simple:,} ({_ratio(simple, bloom)} fewer)"


@rule("random keys defeat range pruning: BLOOM reads at least 90% of the keys SIMPLE reads (on time-ordered "
      "keys it read at most a third)",
      absent=[dict(bloom_random=34_560, simple_random=241_920, bloom_time=34_560, simple_time=241_920),
              dict(bloom_random=241_920, simple_random=241_920, bloom_time=241_920, simple_time=241_920)],
      present=dict(bloom_random=241_920, simple_random=241_920, bloom_time=34_560, simple_time=241_920))
def random_keys_defeat_range_pruning(bloom_random: int, simple_random: int, bloom_time: int,
                                     simple_time: int) -> tuple[bool, str]:
    held = simple_random > 0 and bloom_random >= 0.9 * simple_random and simple_time > 0 and 3 * bloom_time <= simple_time
    return held, (f"random keys: BLOOM {bloom_random:,} of SIMPLE's {simple_random:,} keys "
                  f"({bloom_random / max(simple_random, 1):.0%}); time-ordered: {bloom_time:,} of {simple_time:,} "
                  f"({bloom_time / max(simple_time, 1):.0%})")


@rule("on random keys a copy-on-write upsert rewrites at least 3x more rows than on time-ordered keys: the "
      "corrections reach every file of their week",
      absent=dict(rows_random=34_560, rows_time=34_560), present=dict(rows_random=241_920, rows_time=34_560))
def random_keys_rewrite_the_week(rows_random: int, rows_time: int) -> tuple[bool, str]:
    return rows_time > 0 and rows_random >= 3 * rows_time, (
        f"BLOOM rewrote {rows_random:,} rows on random keys, {rows_time:,} on time-ordered keys "
        f"({_ratio(rows_random, rows_time)})")


@rule("a global index looks in every partition: GLOBAL_SIMPLE reads every key of the table, at least 1.5x the keys "
      "SIMPLE reads in the partitions the batch names",
      absent=[dict(global_simple=241_920, simple=241_920, table_rows=483_840),
              dict(global_simple=483_840, simple=483_840, table_rows=483_840)],
      present=dict(global_simple=483_840, simple=241_920, table_rows=483_840))
def global_reads_every_partition(global_simple: int, simple: int, table_rows: int) -> tuple[bool, str]:
    held = global_simple == table_rows and global_simple >= 1.5 * simple
    return held, (f"GLOBAL_SIMPLE {global_simple:,} keys (the table holds {table_rows:,}), SIMPLE {simple:,} "
                  f"({_ratio(global_simple, simple)})")


@rule("on time-ordered keys GLOBAL_BLOOM reads no more keys than BLOOM, at least 3x fewer than GLOBAL_SIMPLE: "
      "range pruning spares every other week's files",
      absent=[dict(global_bloom=483_840, bloom=34_560, global_simple=483_840),
              dict(global_bloom=69_120, bloom=34_560, global_simple=483_840)],
      present=dict(global_bloom=34_560, bloom=34_560, global_simple=483_840))
def global_bloom_spares_other_partitions(global_bloom: int, bloom: int, global_simple: int) -> tuple[bool, str]:
    held = global_bloom <= bloom and 3 * global_bloom <= global_simple
    return held, f"GLOBAL_BLOOM {global_bloom:,} keys, BLOOM {bloom:,}, GLOBAL_SIMPLE {global_simple:,}"


@rule("a non-global index stores every record that changed week twice; every global index keeps one copy",
      absent=[dict(moved=1_728, non_global=[1_728, 1_728, 1_728], global_=[1_728, 0, 0]),
              dict(moved=1_728, non_global=[0, 0, 0], global_=[0, 0, 0]),
              dict(moved=0, non_global=[0, 0, 0], global_=[0, 0, 0])],
      present=dict(moved=1_728, non_global=[1_728, 1_728, 1_728], global_=[0, 0, 0]))
def non_global_stores_moved_twice(moved: int, non_global: Sequence[int], global_: Sequence[int]) -> tuple[bool, str]:
    held = moved > 0 and all(d == moved for d in non_global) and all(d == 0 for d in global_)
    return held, (f"{moved:,} records changed week; keys stored twice: non-global "
                  f"{', '.join(f'{d:,}' for d in non_global)}; global {', '.join(f'{d:,}' for d in global_)}")


@rule("a global index moves a record: it deletes the old copy of exactly each record that changed week",
      absent=[dict(moved=1_728, deleted=[0, 0, 0]), dict(moved=1_728, deleted=[1_728, 1_728, 0])],
      present=dict(moved=1_728, deleted=[1_728, 1_728, 1_728]))
def global_moves_by_deleting(moved: int, deleted: Sequence[int]) -> tuple[bool, str]:
    return moved > 0 and all(d == moved for d in deleted), (
        f"{moved:,} records changed week; old copies deleted: {', '.join(f'{d:,}' for d in deleted)}")


@rule("BUCKET and RECORD_INDEX tag every workload without reading a key from a data file (RECORD_INDEX reads "
      "index entries instead)",
      absent=[dict(bucket_keys=[0, 0, 0], record_index_keys=[0, 0, 34_560], record_index_entries=[9, 9, 9]),
              dict(bucket_keys=[0, 0, 0], record_index_keys=[0, 0, 0], record_index_entries=[0, 0, 0])],
      present=dict(bucket_keys=[0, 0, 0], record_index_keys=[0, 0, 0], record_index_entries=[40_960, 483_840, 40_960]))
def hash_and_record_index_read_no_data_file(bucket_keys: Sequence[int], record_index_keys: Sequence[int],
                                            record_index_entries: Sequence[int]) -> tuple[bool, str]:
    held = not any(bucket_keys) and not any(record_index_keys) and all(e > 0 for e in record_index_entries)
    return held, (f"keys read from data files: BUCKET {', '.join(map(str, bucket_keys))}, RECORD_INDEX "
                  f"{', '.join(map(str, record_index_keys))}; RECORD_INDEX's index entries: "
                  f"{', '.join(f'{e:,}' for e in record_index_entries)}")


@rule("on time-ordered keys BUCKET rewrites at least 3x more rows than BLOOM: a day's corrections reach every "
      "bucket of their week",
      absent=dict(bucket_rows=34_560, bloom_rows=34_560), present=dict(bucket_rows=241_920, bloom_rows=34_560))
def bucket_rewrites_every_bucket(bucket_rows: int, bloom_rows: int) -> tuple[bool, str]:
    return bloom_rows > 0 and bucket_rows >= 3 * bloom_rows, (
        f"rows rewritten: BUCKET {bucket_rows:,}, BLOOM {bloom_rows:,} ({_ratio(bucket_rows, bloom_rows)})")


@rule("a point query on a BUCKET table keeps one file slice per partition after bucket pruning",
      absent=[dict(slices=8, after_bucket_pruning=8, partitions=2), dict(slices=8, after_bucket_pruning=4, partitions=2)],
      present=dict(slices=8, after_bucket_pruning=2, partitions=2))
def bucket_pruning_keeps_one_per_partition(slices: int, after_bucket_pruning: int, partitions: int) -> tuple[bool, str]:
    return after_bucket_pruning == partitions < slices, (
        f"{slices} file slices, {after_bucket_pruning} after bucket pruning, {partitions} partitions")


@rule("the bucket join moves no row between tasks; Spark's join of the same tables shuffles both sides",
      absent=[dict(bucket_exchanges=2, bucket_shuffled=5_000, spark_exchanges=2, spark_shuffled=5_000,
                   bucket_rows=100, spark_rows=100),
              dict(bucket_exchanges=0, bucket_shuffled=0, spark_exchanges=2, spark_shuffled=5_000,
                   bucket_rows=90, spark_rows=100)],
      present=dict(bucket_exchanges=0, bucket_shuffled=0, spark_exchanges=2, spark_shuffled=5_000,
                   bucket_rows=100, spark_rows=100))
def bucket_join_moves_no_row(bucket_exchanges: int, bucket_shuffled: int, spark_exchanges: int, spark_shuffled: int,
                             bucket_rows: int, spark_rows: int) -> tuple[bool, str]:
    held = (bucket_exchanges == 0 and bucket_shuffled == 0 and spark_exchanges > 0 and spark_shuffled > 0
            and bucket_rows == spark_rows)
    return held, (f"bucket join: {bucket_exchanges} exchanges, {bucket_shuffled:,} bytes shuffled; Spark's join: "
                  f"{spark_exchanges} exchanges, {spark_shuffled:,} bytes shuffled; {bucket_rows:,} and "
                  f"{spark_rows:,} rows")


@rule("with a fixed bucket count the surging day's base files pass the split threshold (2x max_file_size); after "
      "the resize no bucket of the ring does",
      absent=[dict(fixed_largest_kb=80, ring_largest_kb=80, threshold_kb=100),
              dict(fixed_largest_kb=120, ring_largest_kb=120, threshold_kb=100)],
      present=dict(fixed_largest_kb=120, ring_largest_kb=80, threshold_kb=100))
def fixed_count_outgrows_the_threshold(fixed_largest_kb: float, ring_largest_kb: float,
                                       threshold_kb: float) -> tuple[bool, str]:
    held = fixed_largest_kb > threshold_kb >= ring_largest_kb
    return held, (f"split threshold {threshold_kb:,.0f} KB; largest base file: fixed count {fixed_largest_kb:,.0f} KB, "
                  f"ring after the resize {ring_largest_kb:,.0f} KB")


@rule("the resize rewrites only the buckets past the threshold: exactly their rows, at most a quarter of the table, "
      "and every other file group keeps its file slice",
      absent=[dict(rows_rewritten=483_840, hot_rows=69_120, table_rows=552_960, kept=0, others=30),
              dict(rows_rewritten=552_960, hot_rows=552_960, table_rows=552_960, kept=0, others=0),
              dict(rows_rewritten=0, hot_rows=69_120, table_rows=552_960, kept=30, others=30)],
      present=dict(rows_rewritten=69_120, hot_rows=69_120, table_rows=552_960, kept=28, others=28))
def resize_rewrites_only_the_hot_buckets(rows_rewritten: int, hot_rows: int, table_rows: int, kept: int,
                                         others: int) -> tuple[bool, str]:
    held = 0 < rows_rewritten == hot_rows and 4 * rows_rewritten <= table_rows and kept == others
    return held, (f"rows rewritten {rows_rewritten:,}; the buckets past the threshold held {hot_rows:,}; the table "
                  f"{table_rows:,} ({rows_rewritten / max(table_rows, 1):.0%}); file slices kept {kept} of the "
                  f"{others} other buckets'")


@rule("the resize splits each bucket past the threshold in two and no other: the ring gains one bucket per split",
      absent=[dict(before=30, after=30, past_threshold=2), dict(before=30, after=60, past_threshold=2)],
      present=dict(before=30, after=32, past_threshold=2))
def resize_splits_each_hot_bucket_once(before: int, after: int, past_threshold: int) -> tuple[bool, str]:
    held = past_threshold > 0 and after == before + past_threshold
    return held, f"buckets before {before}, after {after}; {past_threshold} past the threshold before the resize"


@rule("BLOOM's tag step is at least 1.2x faster than GLOBAL_SIMPLE's on time-ordered keys",
      absent=dict(bloom_s=[1.0] * 5, global_simple_s=[1.05] * 5),
      present=dict(bloom_s=[0.4, 0.5, 0.45, 0.5, 0.42], global_simple_s=[0.9, 1.1, 1.0, 0.95, 1.2]), exact=False)
def bloom_tags_faster_than_global_simple(bloom_s: Sequence[float], global_simple_s: Sequence[float]) -> tuple[bool, str]:
    return clearly_faster(bloom_s, global_simple_s)
