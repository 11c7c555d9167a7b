"""The rules that decide `02-daily-upserts`' claims: each states its effect with a margin, and carries
numbers where the effect is absent (it must say not held) and where it shows (held).

Numbers come in as plain ints, floats, strings and short lists, as the notebook reads them off its
run; each rule returns (held, the evidence in the run's numbers).
"""

from __future__ import annotations

from collections.abc import Sequence

from labformat.lab.claims import TOO_FEW_RUNS, clearly_faster, rule


def _share(kept: int, files: int) -> float:
    return kept / files if files else 0.0


# ---------------------------------------------------------------- the month: range pruning

@rule("range pruning keeps a falling share of the files: the last day's share is at least 1.5x smaller than day 1's",
      absent=[dict(kept_first=3, files_first=32, kept_last=30, files_last=100),
              dict(kept_first=16, files_first=32, kept_last=24, files_last=64)],
      present=[dict(kept_first=3, files_first=32, kept_last=4, files_last=116),
               dict(kept_first=16, files_first=32, kept_last=17, files_last=64)])
def share_kept_falls(kept_first: int, files_first: int, kept_last: int, files_last: int) -> tuple[bool, str]:
    first, last = _share(kept_first, files_first), _share(kept_last, files_last)
    held = last > 0 and first >= 1.5 * last
    return held, (f"day 1: {kept_first} of {files_first} files ({first:.0%}); last day: {kept_last} of "
                  f"{files_last} ({last:.0%}), {first / last if last else float('inf'):.1f}x smaller")


@rule("files rewritten per day stay flat (from day 2, the most is at most the fewest + 2) while the table grows "
      "at least 1.5x",
      absent=[dict(rewritten=[3, 5, 8, 12], files_first=32, files_last=60),
              dict(rewritten=[3, 3, 4], files_first=32, files_last=40)],
      present=[dict(rewritten=[3, 4, 3, 4], files_first=32, files_last=116),
               dict(rewritten=[16, 17], files_first=32, files_last=64)])
def rewrites_stay_flat(rewritten: Sequence[int], files_first: int, files_last: int) -> tuple[bool, str]:
    low, high = min(rewritten), max(rewritten)
    held = high <= low + 2 and files_last >= 1.5 * files_first
    return held, (f"files rewritten from day 2 on: {low}..{high}; table: {files_first} -> {files_last} files "
                  f"({files_last / files_first:.1f}x)")


@rule("range pruning keeps exactly yesterday's new file groups and the small file they filled, every day",
      absent=dict(kept=[4, 5, 4], held_before=[4, 4, 4]),
      present=dict(kept=[4, 4, 3], held_before=[4, 4, 3]))
def kept_are_yesterdays_files(kept: Sequence[int], held_before: Sequence[int]) -> tuple[bool, str]:
    held = len(kept) > 0 and list(kept) == list(held_before)
    return held, (f"from day 2: kept {list(kept)}; new file groups + small files packed the day before "
                  f"{list(held_before)}")


@rule("stale in-batch duplicates never win: 0 stale values in the table, and rows in - deduplicated = "
      "updated + inserted on every day",
      absent=[dict(stale=3, rows_in=[100], deduplicated=[2], updated=[10], inserted=[88]),
              dict(stale=0, rows_in=[100], deduplicated=[0], updated=[10], inserted=[88])],
      present=dict(stale=0, rows_in=[100, 90], deduplicated=[2, 1], updated=[10, 9], inserted=[88, 80]))
def no_stale_duplicates(stale: int, rows_in: Sequence[int], deduplicated: Sequence[int], updated: Sequence[int],
                        inserted: Sequence[int]) -> tuple[bool, str]:
    balanced = all(r - d == u + i for r, d, u, i in zip(rows_in, deduplicated, updated, inserted))
    return stale == 0 and balanced, (f"rows in - deduplicated = updated + inserted on {'every' if balanced else 'not every'} "
                                     f"day ({sum(deduplicated):,} stale duplicates dropped); stale values in the table: {stale}")


# ---------------------------------------------------------------- bloom filters

@rule("on every day from day 2, bloom filters drop at least 90% of the (key, file) pairs range pruning kept in "
      "vain (the key is not in the file)",
      absent=[dict(after_range_pruning=[6_915, 7_000], after_bloom=[6_915, 3_600], matched=[3_458, 3_500]),
              dict(after_range_pruning=[3_458, 3_500], after_bloom=[3_458, 3_500], matched=[3_458, 3_500]),
              dict(after_range_pruning=[6_915, 7_000], after_bloom=[3_458, 3_900], matched=[3_458, 3_500])],
      present=[dict(after_range_pruning=[6_915, 10_368], after_bloom=[3_458, 3_456], matched=[3_458, 3_456]),
               dict(after_range_pruning=[6_915, 10_368], after_bloom=[3_460, 3_456], matched=[3_458, 3_456])])
def bloom_drops_most_pairs(after_range_pruning: Sequence[int], after_bloom: Sequence[int],
                           matched: Sequence[int]) -> tuple[bool, str]:
    in_vain = [r - m for r, m in zip(after_range_pruning, matched)]
    left = [b - m for b, m in zip(after_bloom, matched)]
    held = sum(in_vain) > 0 and all(lv <= 0.1 * v for lv, v in zip(left, in_vain))
    worst = max((lv / v for lv, v in zip(left, in_vain) if v), default=1.0)
    return held, (f"kept in vain by range pruning: {sum(in_vain):,} pairs over {len(in_vain)} days; left by the bloom "
                  f"filters: {sum(left):,} (on the worst day {worst:.1%} of that day's); {sum(matched):,} matched")


@rule("a filter sized for a tenth of its file's keys lets at least 10 false positives through, 10x those of the "
      "filter sized for the file",
      absent=[dict(sized=0, tenth=3), dict(sized=40, tenth=200)],
      present=dict(sized=0, tenth=244))
def smaller_filter_false_positives(sized: int, tenth: int) -> tuple[bool, str]:
    held = tenth >= 10 and tenth >= 10 * sized
    return held, f"false positives: a tenth-size filter {tenth:,}, a filter sized for the file {sized:,}"


@rule("false positives cost file reads: with a tenth-size filter the exact check opens at least 2x the files that "
      "hold a key and reads at least 2x the keys; sized for its file it opens only those",
      absent=[dict(tenth_opened=8, tenth_matched=6, tenth_keys=1_440, sized_opened=6, sized_matched=6, sized_keys=1_080),
              dict(tenth_opened=32, tenth_matched=6, tenth_keys=5_760, sized_opened=9, sized_matched=6, sized_keys=1_620)],
      present=dict(tenth_opened=32, tenth_matched=6, tenth_keys=5_760, sized_opened=6, sized_matched=6, sized_keys=1_080))
def false_positives_cost_reads(tenth_opened: int, tenth_matched: int, tenth_keys: int, sized_opened: int,
                               sized_matched: int, sized_keys: int) -> tuple[bool, str]:
    held = (tenth_opened >= 2 * tenth_matched and tenth_keys >= 2 * sized_keys and sized_opened == sized_matched)
    return held, (f"tenth-size filter: {tenth_opened} files opened for keys in {tenth_matched}, {tenth_keys:,} keys "
                  f"read; sized for the file: {sized_opened} opened for {sized_matched}, {sized_keys:,} keys read")


@rule("Hudi's default DYNAMIC_V0 filter, sized for a tenth of its file's keys, grows rows and opens no file "
      "in vain where SIMPLE opens at least 2x the files holding a key",
      absent=[dict(dynamic_opened=30, simple_opened=32, matched=6), dict(dynamic_opened=6, simple_opened=8, matched=6)],
      present=dict(dynamic_opened=6, simple_opened=32, matched=6))
def dynamic_filter_grows(dynamic_opened: int, simple_opened: int, matched: int) -> tuple[bool, str]:
    held = dynamic_opened == matched and simple_opened >= 2 * matched
    return held, (f"files opened for keys in {matched}: DYNAMIC_V0 {dynamic_opened}, SIMPLE {simple_opened} "
                  "(both sized for a tenth of a file's keys)")


# ---------------------------------------------------------------- steps 4-6

@rule("step 6 plans exactly (max_file_size - size) // estimated record size inserts per small file, at most the "
      "day's inserts",
      absent=dict(room=75, inserts=2_880, planned=81), present=[dict(room=75, inserts=2_880, planned=75),
                                                              dict(room=900, inserts=800, planned=800)])
def plan_is_room_over_estimate(room: int, inserts: int, planned: int) -> tuple[bool, str]:
    return planned == min(room, inserts), (f"room for {room:,} records by the estimate, {inserts:,} inserts: "
                                           f"{planned:,} planned")


@rule("inserts fill the small files before new file groups open: every small file takes inserts, and the new "
      "file groups take the rest",
      absent=[dict(small_inserts=[0], new_inserts=[181, 194], inserts=375),
              dict(small_inserts=[81], new_inserts=[], inserts=200)],
      present=dict(small_inserts=[81], new_inserts=[181, 194], inserts=456))
def small_files_first(small_inserts: Sequence[int], new_inserts: Sequence[int], inserts: int) -> tuple[bool, str]:
    held = (len(small_inserts) > 0 and all(n > 0 for n in small_inserts) and all(n > 0 for n in new_inserts)
            and sum(small_inserts) + sum(new_inserts) == inserts)
    return held, (f"{len(small_inserts)} small file(s) took {sum(small_inserts):,} inserts; {len(new_inserts)} new "
                  f"file group(s) took {sum(new_inserts):,}; {inserts:,} inserts in all")


@rule("with commit history, step 5's estimate comes from an earlier commit and is within 25% of the bytes per "
      "record the table's files hold",
      absent=[dict(source="hoodie.copyonwrite.record.size.estimate", estimate=1024, table_bytes_per_record=83.0),
              dict(source="commit history", estimate=200, table_bytes_per_record=83.0)],
      present=dict(source="commit history", estimate=83, table_bytes_per_record=86.0))
def estimate_from_history(source: str, estimate: int, table_bytes_per_record: float) -> tuple[bool, str]:
    held = source == "commit history" and abs(estimate - table_bytes_per_record) <= 0.25 * table_bytes_per_record
    return held, (f"estimated {estimate} bytes a record from {source}; the table's base files hold "
                  f"{table_bytes_per_record:.0f} bytes a record")


@rule("with no commit history step 5 takes 1 KB a record: an empty table's first upsert opens at least 3x the "
      "files of the month's day 1, and day 2 packs inserts into every one of them",
      absent=[dict(first_source="commit history", first_files=16, month_files=16, second_source="commit history",
                   second_small_files=0, second_small_inserts=0),
              dict(first_source="hoodie.copyonwrite.record.size.estimate", first_files=227, month_files=16,
                   second_source="commit history", second_small_files=100, second_small_inserts=2_000)],
      present=dict(first_source="hoodie.copyonwrite.record.size.estimate", first_files=227, month_files=16,
                   second_source="commit history", second_small_files=227, second_small_inserts=2_785))
def default_estimate_misleads(first_source: str, first_files: int, month_files: int, second_source: str,
                              second_small_files: int, second_small_inserts: int) -> tuple[bool, str]:
    held = (first_source == "hoodie.copyonwrite.record.size.estimate" and first_files >= 3 * month_files
            and second_source == "commit history" and second_small_files == first_files and second_small_inserts > 0)
    return held, (f"day 1: {first_files} new files from {first_source} (the month's day 1: {month_files}); day 2: "
                  f"estimate from {second_source}, {second_small_inserts:,} inserts packed into {second_small_files} "
                  "small files")


# ---------------------------------------------------------------- counter-examples

@rule("late corrections make day 1 rewrite at least 1.5x the rows and files",
      absent=dict(rows_seed=2_880, files_seed=16, rows_late=3_000, files_late=17),
      present=dict(rows_seed=2_880, files_seed=16, rows_late=5_760, files_late=32))
def late_corrections_rewrite_more(rows_seed: int, files_seed: int, rows_late: int, files_late: int) -> tuple[bool, str]:
    held = rows_late >= 1.5 * rows_seed and files_late >= 1.5 * files_seed
    return held, (f"day 1: {files_seed} files, {rows_seed:,} rows without; {files_late} files, {rows_late:,} rows "
                  "with late corrections")


@rule("with random keys every file survives range pruning, and day 1 rewrites at least 1.5x the share of the "
      "files that time-ordered keys make it rewrite",
      absent=[dict(kept=40, files=55, rewritten=55, time_rewritten=16, time_files=32),
              dict(kept=55, files=55, rewritten=30, time_rewritten=16, time_files=32)],
      present=dict(kept=55, files=55, rewritten=55, time_rewritten=16, time_files=32))
def random_keys_touch_every_file(kept: int, files: int, rewritten: int, time_rewritten: int,
                                 time_files: int) -> tuple[bool, str]:
    share, time_share = _share(rewritten, files), _share(time_rewritten, time_files)
    held = kept == files and share >= 1.5 * time_share
    return held, (f"random keys: {kept} of {files} files kept by range pruning, {rewritten} rewritten ({share:.0%}); "
                  f"time-ordered keys: {time_rewritten} of {time_files} rewritten ({time_share:.0%})")


# ---------------------------------------------------------------- indexes

@rule("SIMPLE's tag step reads at least 1.5x the keys BLOOM's reads, and BUCKET's reads none",
      absent=[dict(simple=3_000, bloom=2_880, bucket=0), dict(simple=5_760, bloom=2_880, bucket=10)],
      present=dict(simple=5_760, bloom=2_880, bucket=0))
def index_keys_read(simple: int, bloom: int, bucket: int) -> tuple[bool, str]:
    held = simple >= 1.5 * bloom and bucket == 0
    return held, f"keys read by the tag step: SIMPLE {simple:,}, BLOOM {bloom:,}, BUCKET {bucket:,}"


@rule("BUCKET's tag step is at least 1.2x faster than SIMPLE's (medians of interleaved runs after a warm-up)",
      absent=dict(bucket=[0.50, 0.55, 0.52, 0.60, 0.51], simple=[0.55, 0.58, 0.60, 0.52, 0.57]),
      present=dict(bucket=[0.40, 0.42, 0.41, 0.45, 0.43], simple=[0.60, 0.62, 0.59, 0.64, 0.61]), exact=False)
def bucket_tags_faster(bucket: Sequence[float], simple: Sequence[float]) -> tuple[bool, str]:
    return clearly_faster(bucket, simple)


# ---------------------------------------------------------------- shuffle parallelism

@rule("the deduplicate shuffle runs min(input partitions, upsert parallelism) tasks since Hudi 0.13, and "
      "upsert parallelism tasks in LEGACY mode",
      absent=dict(from_20=200, from_48=48, legacy_from_1=1),
      present=dict(from_20=20, from_48=48, legacy_from_1=20))
def shuffle_tasks(from_20: int, from_48: int, legacy_from_1: int) -> tuple[bool, str]:
    held = from_20 == 20 and from_48 == 48 and legacy_from_1 == 20
    return held, (f"20 input partitions, parallelism 200: {from_20} tasks; 48: {from_48}; LEGACY with "
                  f"parallelism 20 from 1 partition: {legacy_from_1}")


@rule("on 16 cores the 48 measured shuffle tasks fill all 3 waves, where the 20 leave 12 cores idle in their second",
      absent=[dict(tasks_20=20, tasks_48=40, cores=16), dict(tasks_20=16, tasks_48=48, cores=16)],
      present=dict(tasks_20=20, tasks_48=48, cores=16))
def full_waves(tasks_20: int, tasks_48: int, cores: int) -> tuple[bool, str]:
    from labformat.lab.shuffle import idle_in_last_wave, waves

    held = idle_in_last_wave(tasks_48, cores) == 0 and idle_in_last_wave(tasks_20, cores) == 12
    return held, (f"on {cores} cores: {tasks_20} tasks in {waves(tasks_20, cores)} waves, "
                  f"{idle_in_last_wave(tasks_20, cores)} cores idle in the last; {tasks_48} in "
                  f"{waves(tasks_48, cores)}, {idle_in_last_wave(tasks_48, cores)} idle")


# ---------------------------------------------------------------- where the time goes

@rule("the session's first upsert is at least 1.3x slower than the same upsert later (its median over repeated "
      "runs), and slower than every one of them",
      absent=[dict(first=3.1, later=[3.0, 2.9, 3.2, 3.0, 3.1]), dict(first=3.9, later=[3.0, 2.9, 4.0, 3.0, 3.1]),
              dict(first=9.0, later=[2.4])],
      present=dict(first=5.2, later=[2.4, 2.3, 2.6, 2.5, 2.4]), exact=False)
def first_upsert_warms_up(first: float, later: Sequence[float]) -> tuple[bool, str]:
    from statistics import median

    if len(later) < 5:
        return False, f"{TOO_FEW_RUNS} (the first upsert and {len(later)} later; at least 5 later)"
    mid = median(later)
    held = first >= 1.3 * mid and first > max(later)
    return held, (f"first upsert of the session {first:.2f} s; the same upsert later: median {mid:.2f} s "
                  f"({min(later):.2f}-{max(later):.2f}, {len(later)} runs), {first / mid:.1f}x")


@rule("the upsert's two Spark jobs, the tag step (with step 1's shuffle) and the write step, take at least 70% "
      "of every upsert; the rest is the driver's planning and commit",
      absent=[dict(tag_share=[0.3, 0.2], write_share=[0.5, 0.4]), dict(tag_share=[0.1, 0.1], write_share=[0.5, 0.5])],
      present=dict(tag_share=[0.4, 0.35, 0.3], write_share=[0.5, 0.5, 0.55]), exact=False)
def tag_and_write_dominate(tag_share: Sequence[float], write_share: Sequence[float]) -> tuple[bool, str]:
    both = [t + w for t, w in zip(tag_share, write_share)]
    held = len(both) > 0 and min(both) >= 0.7
    return held, (f"tag + write: {min(both):.0%} to {max(both):.0%} of each day's upsert (tag {min(tag_share):.0%}-"
                  f"{max(tag_share):.0%}, write {min(write_share):.0%}-{max(write_share):.0%})")
