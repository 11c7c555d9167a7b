"""The rules of notebook 07 (incremental pipelines): what an incremental read opens and returns, the table it feeds, CDC records.

Every number is a count from the run: file slices a read planned, records it returned, what each
write reported, rows that differ between two tables.
"""

from __future__ import annotations

from labformat.lab.claims import rule


@rule("each day's incremental read opened exactly the file groups its commit wrote, and on the last day "
      "at least 2x fewer file slices than a snapshot read",
      absent=[dict(files_read=[3, 4, 5], groups_written=[2, 2, 2], files_in_snapshot=[3, 4, 5]),  # a snapshot in disguise
              dict(files_read=[2, 2, 3], groups_written=[2, 2, 3], files_in_snapshot=[3, 4, 5])],  # under 2x fewer
      present=dict(files_read=[2, 2, 2], groups_written=[2, 2, 2], files_in_snapshot=[3, 4, 5]))
def incremental_reads_what_was_written(files_read: list[int], groups_written: list[int],
                                       files_in_snapshot: list[int]) -> tuple[bool, str]:
    same = list(files_read) == list(groups_written)
    last, snapshot = files_read[-1], files_in_snapshot[-1]
    held = same and len(files_read) > 0 and snapshot >= 2 * last
    return held, (f"file slices read = file groups written on {sum(r == w for r, w in zip(files_read, groups_written))} "
                  f"of {len(files_read)} days; last day: {last} read, a snapshot read {snapshot} "
                  f"({snapshot / max(last, 1):.1f}x; needs 2x)")


@rule("each day's incremental read returned exactly the records its upsert wrote, each once",
      absent=[dict(returned=[3167, 6385, 9550], written=[3167, 3218, 3165]),  # everything since the start
              dict(returned=[2880, 2880, 2880], written=[3167, 3218, 3165])],  # the inserts alone
      present=dict(returned=[3167, 3218, 3165], written=[3167, 3218, 3165]))
def incremental_returns_what_was_written(returned: list[int], written: list[int]) -> tuple[bool, str]:
    held = len(returned) > 0 and list(returned) == list(written) and min(written) > 0
    return held, (f"equal on {sum(r == w for r, w in zip(returned, written))} of {len(written)} days; day 1: "
                  f"{returned[0]:,} returned, {written[0]:,} written; last day: {returned[-1]:,} and {written[-1]:,}")


@rule("a downstream table fed only each day's changes equals the one computed from the snapshot, and its daily "
      "runs read at least 2x fewer file slices than recomputing it from each day's snapshot",
      absent=[dict(differing_rows=2, runs=4, days=3, incremental_files=6, recompute_files=12),
              dict(differing_rows=0, runs=4, days=3, incremental_files=10, recompute_files=12),
              dict(differing_rows=0, runs=3, days=3, incremental_files=6, recompute_files=12)],
      present=dict(differing_rows=0, runs=4, days=3, incremental_files=6, recompute_files=12))
def downstream_from_changes(differing_rows: int, runs: int, days: int, incremental_files: int,
                            recompute_files: int) -> tuple[bool, str]:
    held = differing_rows == 0 and runs == days + 1 and recompute_files >= 2 * incremental_files > 0
    return held, (f"{runs} runs from checkpoints (the history, then {days} days); {differing_rows} rows differ; "
                  f"file slices read by the {days} daily runs: {incremental_files:,}, by a recompute from each day's "
                  f"snapshot: {recompute_files:,} ({recompute_files / max(incremental_files, 1):.1f}x; needs 2x)")


@rule("the change records hold every insert, update and delete each commit reported, one per record written, "
      "deletes included",
      absent=[dict(inserts=[2880, 2880, 0], updates=[287, 338, 0], deletes=[0, 0, 0],
                   reported_inserts=[2880, 2880, 0], reported_updates=[287, 338, 0], reported_deletes=[0, 0, 1440]),
              dict(inserts=[2880, 2880, 0], updates=[0, 0, 0], deletes=[0, 0, 1440],
                   reported_inserts=[2880, 2880, 0], reported_updates=[287, 338, 0], reported_deletes=[0, 0, 1440])],
      present=dict(inserts=[2880, 2880, 0], updates=[287, 338, 0], deletes=[0, 0, 1440],
                   reported_inserts=[2880, 2880, 0], reported_updates=[287, 338, 0], reported_deletes=[0, 0, 1440]))
def change_records_match_the_writes(inserts: list[int], updates: list[int], deletes: list[int],
                                    reported_inserts: list[int], reported_updates: list[int],
                                    reported_deletes: list[int]) -> tuple[bool, str]:
    pairs = list(zip(inserts, updates, deletes, reported_inserts, reported_updates, reported_deletes))
    matching = sum((i, u, d) == (ri, ru, rd) for i, u, d, ri, ru, rd in pairs)
    held = len(pairs) > 0 and matching == len(pairs) and sum(reported_deletes) > 0
    return held, (f"{matching} of {len(pairs)} commits match their report; change records: {sum(inserts):,} i, "
                  f"{sum(updates):,} u, {sum(deletes):,} d; reported: {sum(reported_inserts):,} inserted, "
                  f"{sum(reported_updates):,} updated, {sum(reported_deletes):,} deleted")
