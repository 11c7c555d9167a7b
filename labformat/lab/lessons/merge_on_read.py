"""The rules of notebook 04 (merge-on-read): bytes written, files read, when compaction runs and what it leaves, and two timings.

Exact rules take bytes (as MB), files and log files from the write and scan reports; the timing
rules take the seconds of repeated, interleaved runs after a warm-up and decide with
`claims.clearly_faster`.
"""

from __future__ import annotations

from labformat.lab import claims
from labformat.lab.claims import rule


def _ratios(slow: list[float], fast: list[float]) -> list[float]:
    return [s / f if f > 0 else float("inf") for s, f in zip(slow, fast)]


@rule("on every day without a compaction, merge-on-read's upsert wrote at least 1.5x fewer bytes than copy-on-write's",
      absent=[dict(mor_mb=[0.3, 0.3], cow_mb=[0.6, 0.4]),  # one day under 1.5x
              dict(mor_mb=[0.7], cow_mb=[0.6]),
              dict(mor_mb=[], cow_mb=[])],
      present=dict(mor_mb=[0.29, 1.0], cow_mb=[0.64, 9.0]))
def fewer_bytes_without_compaction(mor_mb: list[float], cow_mb: list[float]) -> tuple[bool, str]:
    ratios = _ratios(cow_mb, mor_mb)
    held = len(ratios) > 0 and min(ratios) >= 1.5
    if not ratios:
        return False, "no day without a compaction"
    return held, (f"{len(ratios)} days without a compaction: merge-on-read {min(mor_mb):.2f}-{max(mor_mb):.2f} MB a day, "
                  f"copy-on-write {min(cow_mb):.2f}-{max(cow_mb):.2f} MB; {min(ratios):.1f}x fewer on the closest day "
                  "(needs 1.5x)")


@rule("on a day a compaction ran, merge-on-read's saving was gone: it wrote at least 0.9x copy-on-write's bytes "
      "(its upsert, then every file slice with log files rewritten whole)",
      absent=[dict(mor_mb=[2.6, 31.2], cow_mb=[23.5, 30.2]),  # a compaction day as cheap as a day without one
              dict(mor_mb=[], cow_mb=[])],
      present=[dict(mor_mb=[23.59, 31.21], cow_mb=[23.53, 30.21]), dict(mor_mb=[0.76], cow_mb=[0.64])])
def compaction_days_cost_as_much(mor_mb: list[float], cow_mb: list[float]) -> tuple[bool, str]:
    if not mor_mb:
        return False, "no compaction ran"
    ratios = _ratios(mor_mb, cow_mb)
    pairs = ", ".join(f"{m:.2f} vs {c:.2f} MB ({r:.2f}x)" for m, c, r in zip(mor_mb, cow_mb, ratios))
    return min(ratios) >= 0.9, f"{len(mor_mb)} compaction day(s), merge-on-read vs copy-on-write: {pairs} (needs 0.9x)"


@rule("over the whole run, compactions included, merge-on-read wrote at least 1.2x fewer bytes than copy-on-write",
      absent=[dict(mor_mb=1.78, cow_mb=1.84, compactions=2, days=3), dict(mor_mb=30.0, cow_mb=25.0, compactions=5, days=5)],
      present=dict(mor_mb=40.0, cow_mb=160.0, compactions=2, days=10))
def fewer_bytes_over_the_run(mor_mb: float, cow_mb: float, compactions: int, days: int) -> tuple[bool, str]:
    ratio = cow_mb / mor_mb if mor_mb > 0 else float("inf")
    return ratio >= 1.2, (f"{days} days, {compactions} compaction(s): merge-on-read {mor_mb:,.1f} MB, copy-on-write "
                          f"{cow_mb:,.1f} MB, {ratio:.1f}x fewer (needs 1.2x)")


@rule("late corrections made copy-on-write rewrite base files for updates alone every day, merge-on-read none: "
      "it appended log files instead",
      absent=[dict(cow_rewritten=[8, 11, 13], mor_rewritten=[0, 2, 0], mor_logs=[8, 11, 13]),
              dict(cow_rewritten=[8, 0, 13], mor_rewritten=[0, 0, 0], mor_logs=[8, 11, 13]),
              dict(cow_rewritten=[8, 11, 13], mor_rewritten=[0, 0, 0], mor_logs=[0, 0, 0])],
      present=dict(cow_rewritten=[8, 11, 13], mor_rewritten=[0, 0, 0], mor_logs=[8, 11, 13]))
def rewrites_against_logs(cow_rewritten: list[int], mor_rewritten: list[int], mor_logs: list[int]) -> tuple[bool, str]:
    held = (len(cow_rewritten) > 0 and min(cow_rewritten) > 0 and max(mor_rewritten) == 0 and min(mor_logs) > 0)
    return held, (f"base files rewritten for updates alone: copy-on-write {sum(cow_rewritten):,} "
                  f"({min(cow_rewritten)}-{max(cow_rewritten)} a day), merge-on-read {sum(mor_rewritten):,}; "
                  f"merge-on-read's log files written: {sum(mor_logs):,} ({min(mor_logs)}-{max(mor_logs)} a day)")


@rule("a compaction ran after every max.delta.commits-th delta commit (the bulk insert is the first), on no other day",
      absent=[dict(compaction_days=[], days=10, every=5), dict(compaction_days=[5, 10], days=10, every=5),
              dict(compaction_days=[4], days=10, every=5)],
      present=[dict(compaction_days=[4, 9], days=10, every=5), dict(compaction_days=[2], days=3, every=3)])
def compactions_on_schedule(compaction_days: list[int], days: int, every: int) -> tuple[bool, str]:
    expected = [d for d in range(1, days + 1) if (d + 1) % every == 0]
    held = bool(expected) and list(compaction_days) == expected
    return held, (f"compactions after the upserts of days {list(compaction_days)}; delta commits 2 to {days + 1} "
                  f"at every {every} compact on days {expected}")


@rule("right after a compaction the snapshot query reads no log file; on every other day it merges some",
      absent=[dict(logs_read=[8, 3, 13], compacted=[False, True, False]),
              dict(logs_read=[8, 0, 0], compacted=[False, True, False])],
      present=dict(logs_read=[8, 0, 13], compacted=[False, True, False]))
def no_logs_right_after_compaction(logs_read: list[int], compacted: list[bool]) -> tuple[bool, str]:
    after = [n for n, c in zip(logs_read, compacted) if c]
    others = [n for n, c in zip(logs_read, compacted) if not c]
    held = bool(after) and bool(others) and max(after) == 0 and min(others) > 0
    return held, (f"log files read on the {len(after)} compaction day(s): {after}; on the {len(others)} other days: "
                  f"{min(others, default=0)}-{max(others, default=0)}")


def upserts_since_compaction(compacted: list[bool]) -> list[int]:
    """Per day: the upserts whose log files are still unmerged after that day (0 on a compaction day)."""
    since, result = 0, []
    for c in compacted:
        since = 0 if c else since + 1
        result.append(since)
    return result


@rule("between compactions the log files pile up: after k upserts since the last compaction the query merges k log "
      "files into one base file (none right after a compaction)",
      absent=[dict(max_logs_per_slice=[1, 1, 1, 0, 1], compacted=[False, False, False, True, False]),  # no pile-up
              dict(max_logs_per_slice=[1, 2, 3, 3, 1], compacted=[False, False, False, True, False])],
      present=dict(max_logs_per_slice=[1, 2, 3, 0, 1], compacted=[False, False, False, True, False]))
def logs_pile_up_between_compactions(max_logs_per_slice: list[int], compacted: list[bool]) -> tuple[bool, str]:
    expected = upserts_since_compaction(compacted)
    matching = sum(a == e for a, e in zip(max_logs_per_slice, expected))
    held = matching == len(expected) > 0 and max(expected) >= 1
    return held, (f"most log files in one file slice, day by day: {list(max_logs_per_slice)}; upserts since the last "
                  f"compaction: {expected} ({matching} of {len(expected)} days equal)")


@rule("merge-on-read's snapshot query, merging its logs, returned exactly copy-on-write's rows: not one record differs",
      absent=[dict(differing_rows=343, rows=33120, copy_on_write_rows=33120),
              dict(differing_rows=0, rows=33120, copy_on_write_rows=32000), dict(differing_rows=0, rows=0, copy_on_write_rows=0)],
      present=dict(differing_rows=0, rows=33120, copy_on_write_rows=33120))
def identical_rows(differing_rows: int, rows: int, copy_on_write_rows: int) -> tuple[bool, str]:
    held = differing_rows == 0 and rows == copy_on_write_rows > 0
    return held, (f"the query as of the last compaction day: {rows:,} rows from merge-on-read's base files and logs, "
                  f"{copy_on_write_rows:,} from copy-on-write; records that differ: {differing_rows:,}")


@rule("compacting more often wrote more bytes and left fewer log files to read: the most frequent setting wrote at "
      "least 1.3x the bytes of never compacting, which read at least 2x its log files",
      absent=[dict(settings=["every 2", "every 3", "never"], compactions=[3, 2, 0], mb_written=[1.2, 1.1, 1.0],
                   logs_read=[10, 20, 60]),  # under 1.3x the bytes
              dict(settings=["every 2", "every 3", "never"], compactions=[3, 2, 0], mb_written=[3.0, 2.0, 1.0],
                   logs_read=[30, 20, 40]),  # more compactions, more logs
              dict(settings=["every 2", "never"], compactions=[3, 0], mb_written=[3.0, 1.0], logs_read=[30, 40])],
      present=[dict(settings=["every 2", "every 3", "every 4", "never"], compactions=[2, 1, 1, 0],
                    mb_written=[1.8, 1.2, 1.3, 0.9], logs_read=[10, 20, 25, 60]),
               dict(settings=["every 3", "every 4", "never"], compactions=[2, 1, 0], mb_written=[57.5, 36.6, 15.7],
                    logs_read=[45, 81, 181])])
def compaction_trades_bytes_for_logs(settings: list[str], compactions: list[int], mb_written: list[float],
                                     logs_read: list[int]) -> tuple[bool, str]:
    rows = list(zip(settings, compactions, mb_written, logs_read))
    # Wherever one setting compacted more often than another, it wrote more and left fewer logs to read.
    ordered = all(mb_a > mb_b and logs_a < logs_b for _, c_a, mb_a, logs_a in rows for _, c_b, mb_b, logs_b in rows
                  if c_a > c_b)
    often, never = max(rows, key=lambda r: r[1]), min(rows, key=lambda r: r[1])
    held = (ordered and often[1] > never[1] and often[2] >= 1.3 * never[2] and never[3] >= 2 * max(often[3], 1))
    shown = "; ".join(f"{s}: {c} compaction{'' if c == 1 else 's'}, {mb:.2f} MB, {logs:,} log files read"
                      for s, c, mb, logs in rows)
    return held, f"{shown} (more compactions always more bytes, fewer logs: {'yes' if ordered else 'no'})"


@rule("merge-on-read's index opened no log file: a log holds updates of its base file's keys only, so the base "
      "file's key range and bloom filter speak for the whole slice",
      absent=dict(index_logs_read=12, mor_slices_kept=12.0, cow_files_kept=12.0),
      present=dict(index_logs_read=0, mor_slices_kept=12.0, cow_files_kept=12.0))
def index_reads_no_log(index_logs_read: int, mor_slices_kept: float, cow_files_kept: float) -> tuple[bool, str]:
    return index_logs_read == 0, (f"log files the BLOOM index read over the days: {index_logs_read}; file slices kept by "
                                  f"range pruning, median a day: {mor_slices_kept:g} (copy-on-write's base files: "
                                  f"{cow_files_kept:g})")


@rule("a read-optimized query reads no log file and returns the versions the last compaction left, not the corrections "
      "in the logs",
      absent=[dict(snapshot_logs=24, optimized_logs=0, snapshot_rows=7200, optimized_rows=7200, differing=0),
              dict(snapshot_logs=24, optimized_logs=24, snapshot_rows=7200, optimized_rows=7200, differing=343)],
      present=dict(snapshot_logs=24, optimized_logs=0, snapshot_rows=7200, optimized_rows=7200, differing=343))
def read_optimized_skips_logs(snapshot_logs: int, optimized_logs: int, snapshot_rows: int, optimized_rows: int,
                              differing: int) -> tuple[bool, str]:
    held = optimized_logs == 0 < snapshot_logs and optimized_rows == snapshot_rows and differing > 0
    return held, (f"snapshot: {snapshot_logs} log files read; read-optimized: {optimized_logs}, the same {optimized_rows:,} "
                  f"rows, {differing:,} of them older versions of corrected records")


@rule("merge-on-read's write step (appending log files) took clearly less time than copy-on-write's (rewriting base "
      "files) on the days without a compaction",
      absent=dict(mor_s=[1.0, 1.1, 1.0, 0.9, 1.0], cow_s=[1.1, 1.0, 1.1, 1.0, 1.1]),
      present=dict(mor_s=[0.3, 0.4, 0.3, 0.3, 0.4], cow_s=[1.6, 1.7, 1.5, 1.6, 1.8]), exact=False)
def write_step_faster_without_compaction(mor_s: list[float], cow_s: list[float]) -> tuple[bool, str]:
    held, evidence = claims.clearly_faster(mor_s, cow_s)
    return held, f"the write step of each day's upsert: {evidence}"


@rule("the query merging log files took clearly longer than the same query right after the compaction",
      absent=dict(after_s=[0.15, 0.16, 0.15, 0.14, 0.15], before_s=[0.16, 0.15, 0.17, 0.15, 0.16]),
      present=dict(after_s=[0.15, 0.16, 0.15, 0.14, 0.15], before_s=[0.6, 0.61, 0.65, 0.6, 0.62]), exact=False)
def compacted_query_faster(after_s: list[float], before_s: list[float]) -> tuple[bool, str]:
    held, evidence = claims.clearly_faster(after_s, before_s)
    return held, f"after the compaction vs with its log files: {evidence}"
