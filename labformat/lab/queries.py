"""Side-by-side query runs for the lab: skipping on vs off, index lookups footer vs metadata (the standard
queries themselves are `labformat.workload`'s)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

import labformat as lf
from labformat.lab import workshop


def compare_skipping(table: lf.Table, queries: dict[str, str], repeats: int = 3,
                     warm_up: bool = True) -> pd.DataFrame:
    """Each query with skipping on and off, alternating (on, off, on, off, ...), after one untimed run of
    each (the first scan of a file set pays for listing, caches and JIT); medians of the timed runs.

    One row per query and setting: median_s, min_s, max_s, planning_s and scan_s (medians of the
    planning and of the scan after it, a run's two parts); the plan's
    files_in_snapshot and files_read; what the tasks did: row_groups_in_files_read (in the files
    they opened), row_groups_read (those whose statistics did not rule the filter out) and scan_tasks;
    rows and stats_source."""
    rows = []
    for name, condition in queries.items():
        if warm_up:
            for skipping in (True, False):
                table.query(condition, options={"data_skipping": skipping})
        runs: dict[bool, list] = {True: [], False: []}
        for _ in range(repeats):
            for skipping in (True, False):
                _, report = table.query(condition, options={"data_skipping": skipping})
                runs[skipping].append(report)
        for skipping, reports in runs.items():
            seconds = [r.seconds for r in reports]
            rows.append({
                "query": name, "skipping": "on" if skipping else "off",
                "median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds),
                "planning_s": statistics.median(r.planning_seconds for r in reports),
                "scan_s": statistics.median(r.execution_seconds for r in reports),
                "files_in_snapshot": reports[0].funnel.files_in_snapshot,
                "files_read": reports[0].funnel.files_read,
                "row_groups_in_files_read": reports[0].details.row_groups_in_files_read,
                "row_groups_read": reports[0].details.row_groups_read, "scan_tasks": reports[0].details.scan_tasks,
                "rows": reports[0].rows_returned,
                "stats_source": reports[0].stats_source,
            })
    return pd.DataFrame(rows)


def skipping_numbers(timings: pd.DataFrame) -> str:
    """What `compare_skipping`'s chart shows, in words: per query, files and row groups read and the
    median seconds (min-max) with skipping on and off; then where the gap between the two lies: in
    planning (skipping reads column stats, and for a key bloom filters, from the metadata table) or in
    the scan (the files its tasks open for nothing without skipping), and whether the runs' spreads
    overlap."""
    lines = []
    for query, rows in timings.groupby("query", sort=False):
        parts = []
        for _, r in rows.iterrows():
            parts.append(f"skipping {r.skipping}: {int(r.files_read)} of {int(r.files_in_snapshot)} files, "
                         f"{r.row_groups_read} row groups, {r.median_s:.3f} s ({r.min_s:.3f}-{r.max_s:.3f})")
        lines.append(f"{query}: " + "; ".join(parts))
        on, off = rows.set_index("skipping").loc["on"], rows.set_index("skipping").loc["off"]
        lines.append("  " + _gap(on, off))
    return "\n".join(lines)


def _gap(on: pd.Series, off: pd.Series) -> str:
    gap = off.median_s - on.median_s
    overlap = on.max_s >= off.min_s and off.max_s >= on.min_s
    said = (f"{'saved' if gap >= 0 else 'cost'} {abs(gap):.3f} s a run (medians), "
            + ("within the spread of the runs (their min-max overlap)" if overlap else "beyond the spread of the runs"))
    planning = on.planning_s - off.planning_s
    said += (f"; planning {abs(planning):.3f} s {'longer' if planning >= 0 else 'shorter'} with it on "
             f"({on.planning_s:.3f} vs {off.planning_s:.3f} s)")
    extra = int(off.files_read) - int(on.files_read)
    scan = off.scan_s - on.scan_s
    if extra <= 0:
        return said + (f"; it dropped no file, so the scans differ by noise alone ({on.scan_s:.3f} vs "
                       f"{off.scan_s:.3f} s)")
    said += f"; the scan {abs(scan):.3f} s {'shorter' if scan >= 0 else 'longer'} with it on"
    tasks = max(int(off.scan_tasks), 1)
    if scan > 0:
        said += (f", for {extra} files fewer opened: about {scan / (extra / tasks) * 1000:.1f} ms for each file a "
                 f"task opened for nothing ({tasks} tasks without skipping)")
    return said


def compare_lookup_sources(table: lf.Table, batch, options: Mapping[str, Any] | None = None, repeats: int = 3,
                           workdir=None) -> pd.DataFrame:
    """The BLOOM index's tag step with key ranges and bloom filters from the base files' footers
    (Hudi's default, `hoodie.bloom.index.use.metadata=false`) against the metadata table.

    `table` must keep bloom filters in its metadata table (`bloom_filter_enable`). The same `batch`
    is upserted into a fresh copy of it each time, the two sources alternating, `repeats` times
    each: both see identical files. One row per source: the files the tag step opened (footers,
    metadata-table files) and kept (the index's own counts), the tag step's seconds (median, min,
    max) and the whole upsert's median.
    """
    rows = []
    for i in range(repeats):
        for use in (False, True):
            target = workshop.scratch(f"{Path(table.path).name}-lookup-{'metadata' if use else 'footers'}-{i}", workdir)
            workshop.copy_table(table.path, target)
            copy = lf.Table.open(table.spark, target)
            report = copy.upsert(batch, {**(options or {}), "bloom_use_metadata": use})
            funnel = report.funnel
            rows.append({"source": str(report.details.lookup_source.kind), "tag_s": report.step("tag").seconds,
                         "upsert_s": report.seconds, "footers_read": funnel.footers_read,
                         "metadata_files_read": funnel.metadata_files_read,
                         "files_in_snapshot": funnel.files_in_snapshot,
                         "after_range_pruning": funnel.after_range_pruning, "after_bloom": funnel.after_bloom})
            workshop.drop(copy.path)
    frame = pd.DataFrame(rows)
    return frame.groupby("source", sort=False).agg(
        footers_read=("footers_read", "first"), metadata_files_read=("metadata_files_read", "first"),
        files_in_snapshot=("files_in_snapshot", "first"), after_range_pruning=("after_range_pruning", "first"),
        after_bloom=("after_bloom", "first"), tag_median_s=("tag_s", "median"), tag_min_s=("tag_s", "min"),
        tag_max_s=("tag_s", "max"), upsert_median_s=("upsert_s", "median"))
