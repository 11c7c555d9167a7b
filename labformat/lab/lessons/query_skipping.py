"""The lessons of 03-query-skipping as rules: each decides one claim from the run's counts with its effect absent and present."""

from __future__ import annotations

from labformat.lab.claims import rule


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf") if a else 1.0


@rule("a one-hour window reads only the files holding that hour, at most a quarter of the table's files",
      absent=[dict(files_read=64, holding=2, files_in_snapshot=64), dict(files_read=3, holding=2, files_in_snapshot=64),
              dict(files_read=2, holding=2, files_in_snapshot=4)],
      present=dict(files_read=2, holding=2, files_in_snapshot=64))
def window_reads_only_its_files(files_read: int, holding: int, files_in_snapshot: int) -> tuple[bool, str]:
    held = files_read == holding and 4 * files_read <= files_in_snapshot
    return held, f"{files_read} of {files_in_snapshot} files read; {holding} hold that hour"


@rule("a filter on a column every file spans (drone_id) reads every file: column stats drop none",
      absent=dict(files_read=32, files_in_snapshot=64), present=dict(files_read=64, files_in_snapshot=64))
def spanned_column_reads_every_file(files_read: int, files_in_snapshot: int) -> tuple[bool, str]:
    return files_read == files_in_snapshot, f"{files_read} of {files_in_snapshot} files read"


@rule("skipping changes which files are read, never the answer: every query returns the same rows on and off",
      absent=dict(rows_on=[1, 119, 5760], rows_off=[1, 120, 5760]), present=dict(rows_on=[1, 120, 5760],
                                                                                 rows_off=[1, 120, 5760]))
def same_rows_on_and_off(rows_on: list[int], rows_off: list[int]) -> tuple[bool, str]:
    return list(rows_on) == list(rows_off), f"rows with skipping on {list(rows_on)}, off {list(rows_off)}"


@rule("a point lookup by record key reads 1 base file where column stats keep at least 2 (every file whose key range "
      "holds the key): the bloom filters, read from the metadata table, drop the rest",
      absent=[dict(kept_by_column_stats=3, files_read=3, files_in_snapshot=64, bloom_source="metadata table"),
              dict(kept_by_column_stats=1, files_read=1, files_in_snapshot=64, bloom_source="metadata table"),
              dict(kept_by_column_stats=3, files_read=1, files_in_snapshot=64, bloom_source="footers")],
      present=dict(kept_by_column_stats=3, files_read=1, files_in_snapshot=64, bloom_source="metadata table"))
def point_lookup_reads_one_file(kept_by_column_stats: int, files_read: int, files_in_snapshot: int,
                                bloom_source: str) -> tuple[bool, str]:
    """`kept_by_column_stats`: the files whose key range holds the key; 1 would leave the bloom step nothing to drop."""
    held = files_read == 1 and kept_by_column_stats >= 2 and str(bloom_source).startswith("metadata table")
    return held, (f"{files_in_snapshot} files in the snapshot, {kept_by_column_stats} after column stats, {files_read} "
                  f"read after the bloom filters (from {bloom_source})")


@rule("without skipping, a point lookup opens at least 4x more files, yet its tasks read at most half the row groups "
      "those files hold: each skips the row groups whose key range excludes the key by its footer's stats",
      absent=[dict(files_on=1, files_off=64, row_groups_on=1, row_groups_off=64, row_groups_in_files_off=64),
              dict(files_on=1, files_off=2, row_groups_on=1, row_groups_off=1, row_groups_in_files_off=2)],
      present=dict(files_on=1, files_off=64, row_groups_on=1, row_groups_off=17, row_groups_in_files_off=64))
def lookup_without_skipping_skips_row_groups(files_on: int, files_off: int, row_groups_on: int, row_groups_off: int,
                                             row_groups_in_files_off: int) -> tuple[bool, str]:
    held = files_off >= 4 * max(files_on, 1) and 2 * row_groups_off <= row_groups_in_files_off
    return held, (f"skipping on: {files_on} file(s) opened, {row_groups_on} row group(s) read; off: {files_off} files "
                  f"opened, {row_groups_off} of their {row_groups_in_files_off} row groups read")


@rule("the metadata table spares the BLOOM index the footer reads for key ranges and bloom filters, at least 4x fewer "
      "files opened for them; the exact check then opens the same candidate files either way",
      absent=[dict(footers_by_footers=81, footers_by_metadata=0, metadata_files=4, kept_by_footers=[17, 17],
                   kept_by_metadata=[17, 16]),
              dict(footers_by_footers=10, footers_by_metadata=0, metadata_files=4, kept_by_footers=[3, 3],
                   kept_by_metadata=[3, 3]),
              dict(footers_by_footers=81, footers_by_metadata=2, metadata_files=4, kept_by_footers=[17, 17],
                   kept_by_metadata=[17, 17])],
      present=dict(footers_by_footers=81, footers_by_metadata=0, metadata_files=4, kept_by_footers=[17, 17],
                   kept_by_metadata=[17, 17]))
def metadata_table_spares_footers(footers_by_footers: int, footers_by_metadata: int, metadata_files: int,
                                  kept_by_footers: list[int], kept_by_metadata: list[int]) -> tuple[bool, str]:
    """`kept_by_*`: the files kept after range pruning and after the bloom filters; the exact check reads
    the keys of the last (opening each file), whatever the source."""
    held = (footers_by_metadata == 0 and footers_by_footers >= 4 * max(metadata_files, 1)
            and list(kept_by_footers) == list(kept_by_metadata))
    return held, (f"key ranges and filters: {footers_by_footers} footers opened, or {footers_by_metadata} footers and "
                  f"{metadata_files} metadata-table files; files kept (range pruning, bloom) {list(kept_by_footers)} "
                  f"vs {list(kept_by_metadata)}, so the exact check opened {list(kept_by_footers)[-1]} and "
                  f"{list(kept_by_metadata)[-1]} files")


@rule("files of a day rewrite at least 1.5x fewer rows than files of two days: the day's corrections touch all of "
      "yesterday, and a bigger file drags older rows along",
      absent=dict(day_hours=24, rows_day=34_552, bigger_hours=48, rows_bigger=40_000),
      present=dict(day_hours=24, rows_day=34_552, bigger_hours=48, rows_bigger=69_120))
def day_files_rewrite_fewer_rows(day_hours: float, rows_day: int, bigger_hours: float,
                                 rows_bigger: int) -> tuple[bool, str]:
    held = rows_bigger >= 1.5 * rows_day
    return held, (f"{day_hours:g} h a file: {rows_day:,} rows rewritten; {bigger_hours:g} h: {rows_bigger:,} "
                  f"({_ratio(rows_bigger, rows_day):.2f}x)")


@rule("below the corrections' footprint smaller files buy nothing: files of a quarter day rewrite at least 90% of the "
      "rows files of a day rewrite",
      absent=dict(small_hours=6, rows_small=8_640, day_hours=24, rows_day=34_552),
      present=dict(small_hours=6, rows_small=34_560, day_hours=24, rows_day=34_552))
def no_saving_below_footprint(small_hours: float, rows_small: int, day_hours: float, rows_day: int) -> tuple[bool, str]:
    held = rows_small >= 0.9 * rows_day
    return held, (f"{small_hours:g} h a file: {rows_small:,} rows rewritten; {day_hours:g} h: {rows_day:,} "
                  f"({_ratio(rows_small, rows_day):.0%} of it)")


@rule("files a quarter the size run at least 2x more write tasks (one per file group written)",
      absent=dict(small_hours=6, tasks_small=3, day_hours=24, tasks_day=2),
      present=dict(small_hours=6, tasks_small=8, day_hours=24, tasks_day=2))
def smaller_files_more_write_tasks(small_hours: float, tasks_small: int, day_hours: float,
                                   tasks_day: int) -> tuple[bool, str]:
    held = tasks_small >= 2 * tasks_day
    return held, f"{small_hours:g} h a file: {tasks_small} write tasks; {day_hours:g} h: {tasks_day}"


@rule("files a quarter the size make a query that cannot skip open at least 2x more files (a footer each), send at "
      "least 2x more read requests (GETs on S3) and plan over at least 2x more column-stats entries",
      absent=[dict(files_small=60, files_day=15, requests_small=40, requests_day=30, entries_small=840,
                   entries_day=210),
              dict(files_small=20, files_day=15, requests_small=120, requests_day=30, entries_small=840,
                   entries_day=210)],
      present=dict(files_small=60, files_day=15, requests_small=120, requests_day=30, entries_small=840,
                   entries_day=210))
def smaller_files_more_opens(files_small: int, files_day: int, requests_small: int, requests_day: int,
                             entries_small: int, entries_day: int) -> tuple[bool, str]:
    held = (files_small >= 2 * files_day and requests_small >= 2 * requests_day
            and entries_small >= 2 * entries_day)
    return held, (f"files opened {files_small} vs {files_day}, read requests {requests_small:,} vs {requests_day:,}, "
                  f"column-stats entries {entries_small:,} vs {entries_day:,}")


@rule("clustering a day of small files into several (at least 3) leaves the one-hour window reading at least 2x "
      "fewer files, and the same rows",
      absent=[dict(files_before=96, files_after=1, read_before=4, read_after=1, rows_before=120, rows_after=120),
              dict(files_before=96, files_after=4, read_before=4, read_after=3, rows_before=120, rows_after=120),
              dict(files_before=96, files_after=4, read_before=4, read_after=1, rows_before=120, rows_after=119)],
      present=dict(files_before=96, files_after=4, read_before=4, read_after=1, rows_before=120, rows_after=120))
def clustering_reads_fewer_files(files_before: int, files_after: int, read_before: int, read_after: int,
                                 rows_before: int, rows_after: int) -> tuple[bool, str]:
    held = files_after >= 3 and 2 * read_after <= read_before and rows_after == rows_before
    return held, (f"before: {read_before} of {files_before} files read; after clustering into {files_after} files: "
                  f"{read_after}; {rows_before} and {rows_after} rows")


@rule("a Z-order over drone_id and ts serves a filter on either column: its worse one-column filter reads at most half "
      "the files the linear layouts' worst one reads, and the two-column filter no more than on any layout",
      absent=[dict(curve=[16, 2, 1], linear_ts=[16, 2, 2], linear_drone=[2, 16, 1], others_both=[1, 2]),
              dict(curve=[12, 12, 2], linear_ts=[16, 2, 2], linear_drone=[2, 16, 1], others_both=[1, 2]),
              dict(curve=[4, 4, 2], linear_ts=[16, 2, 2], linear_drone=[2, 16, 1], others_both=[1, 2])],
      present=dict(curve=[4, 4, 1], linear_ts=[16, 2, 2], linear_drone=[2, 16, 1], others_both=[1, 2]))
def z_order_bounds_every_filter(curve: list[int], linear_ts: list[int], linear_drone: list[int],
                                others_both: list[int]) -> tuple[bool, str]:
    """Each layout's files read as [drone filter, hour window, both]; `others_both` the two-column
    filter's files on every other clustered layout. A linear order's worst is the filter on its second
    column (every file, or nearly); the curve's must stay at half that or below."""
    worst, linear_worst = max(curve[:2]), max(max(linear_ts[:2]), max(linear_drone[:2]))
    held = 2 * worst <= linear_worst and curve[2] <= min(others_both)
    return held, (f"files read (drone / hour / both): z-order {list(curve)}, linear ts {list(linear_ts)}, linear "
                  f"drone_id, ts {list(linear_drone)}: the curve's worse one-column filter {worst}, the linear "
                  f"layouts' worst {linear_worst}; the two-column filter elsewhere {list(others_both)}")


@rule("a query as of a snapshot that k commits followed survives a clean retaining those k commits (the cleaner "
      "keeps the snapshot just before the commits it retains) and fails after one retaining k-1",
      absent=[dict(k=2, readable_at_k=False, readable_below_k=False),
              dict(k=2, readable_at_k=True, readable_below_k=True)],
      present=dict(k=2, readable_at_k=True, readable_below_k=False))
def retention_keeps_the_snapshot_before_k_commits(k: int, readable_at_k: bool,
                                                  readable_below_k: bool) -> tuple[bool, str]:
    held = bool(readable_at_k) and not readable_below_k
    said = {True: "still readable", False: "cleaned"}
    return held, (f"snapshot followed by {k} commits: {k} retained: {said[bool(readable_at_k)]}; {k - 1} retained: "
                  f"{said[bool(readable_below_k)]}")
