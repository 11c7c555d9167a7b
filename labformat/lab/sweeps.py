"""Parameter sweeps the workshop runs: sort modes, indexes, file sizes; each on scratch tables, each a frame of reports.

The notebooks, the ipywidgets explorers (`labformat.lab.widgets`) and `scripts/sweep.py` call
the same functions, so a number in a notebook, a widget and a CSV comes from the same code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd
from tqdm.auto import tqdm

import labformat as lf
from labformat import datasets
from labformat.lab.daily import DailyRun, run_daily_upserts
from labformat.lab.queries import standard_queries
from labformat.lab.viz import key_ranges_frame


INPUT_PARTITIONS = 4


def _scratch(workdir: Path | None, name: str) -> Path:
    import shutil

    from labformat.lab import workshop

    if workdir is None:
        return workshop.scratch(name)
    path = Path(workdir) / name
    shutil.rmtree(path, ignore_errors=True)
    return path


def bulk_insert_sort_modes(spark, spec: datasets.DatasetSpec, modes: Iterable[str], options: Mapping[str, Any],
                           workdir: Path | None = None,
                           progress: bool = False) -> dict[str, tuple[lf.WriteReport, pd.DataFrame]]:
    """Bulk insert the history once per sort mode; per mode the report and its base files' key ranges.

    The history is spread round-robin over `INPUT_PARTITIONS` partitions first,
    as data read from many sources arrives: every partition holds every hour, in no order.
    Then NONE writes each task's keys as they come, which is the point. (A fixed count, not
    the core count, so the files are the same on any machine.)
    """
    cached = datasets.generate(spark, spec)
    history = datasets.load_history(spark, cached).repartition(INPUT_PARTITIONS)
    result = {}
    for mode in tqdm(list(modes), desc="sort modes", disable=not progress):
        table = lf.Table.create(spark, _scratch(workdir, f"sort-{mode.lower()}"), record_key=datasets.RECORD_KEY,
                                precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None)
        report = table.bulk_insert(history, {**options, "bulk_insert_sort_mode": mode})
        result[mode] = (report, key_ranges_frame(table))
    return result


def copy_table(table: lf.Table, name: str, workdir: Path | None = None) -> lf.Table:
    """A copy of `table` (its whole folder) at a scratch path: one bulk insert, many experiments."""
    import shutil

    target = _scratch(workdir, name)
    shutil.copytree(table.path, target)
    return lf.Table.open(table.spark, target)


def upsert_days(table: lf.Table, spec: datasets.DatasetSpec, days: Iterable[int],
                options: Mapping[str, Any] | None = None, progress: bool = False) -> pd.DataFrame:
    """Upsert the given batch days into `table`; one row per day (`DailyRun.to_pandas` columns)."""
    cached = datasets.generate(table.spark, spec)
    days = list(days)
    reports = [table.upsert(datasets.load_batch(table.spark, cached, day), dict(options or {}))
               for day in tqdm(days, desc="upserts", unit="day", disable=not progress)]
    frame = DailyRun(table.path, table.index_type, spec.key_style, None, tuple(reports)).to_pandas()
    frame["day"] = days
    return frame


def daily_upserts(spark, spec: datasets.DatasetSpec, name: str, index_type: str = "BLOOM",
                  options: Mapping[str, Any] | None = None, days: int | None = None,
                  workdir: Path | None = None, progress: bool = False) -> DailyRun:
    """`run_daily_upserts` on a scratch table called `name`, with an optional progress bar per day."""
    total = days or spec.batch_days
    bar = tqdm(total=total, desc=f"{index_type} upserts", unit="day", disable=not progress)
    try:
        return run_daily_upserts(spark, spec, _scratch(workdir, name), index_type=index_type, options=options,
                                 days=total, on_day=lambda day, report: bar.update(1))
    finally:
        bar.close()


def compare_indexes(spark, spec: datasets.DatasetSpec, indexes: Iterable[str], days: int,
                    options: Mapping[str, Any] | None = None, workdir: Path | None = None,
                    progress: bool = False) -> pd.DataFrame:
    """The same daily upserts through each index type: one row per index and day (`DailyRun.to_pandas`)."""
    frames = [daily_upserts(spark, spec, f"index-{index.lower()}", index, options, days, workdir, progress).to_pandas()
              for index in indexes]
    return pd.concat(frames, ignore_index=True)


def file_size_sweep(spark, spec: datasets.DatasetSpec, sizes: Iterable[str | int], small_file_limit: str | int = 0,
                    query: str = "one-hour window", workdir: Path | None = None,
                    progress: bool = False) -> pd.DataFrame:
    """Per `max_file_size`: bulk insert the history, upsert day 1, run one standard query.

    Columns: max_file_size, upsert_s, write_tasks, files (after the upsert), files_rewritten,
    bytes_written, query_s, files_read. Both writes use the swept size; `small_file_limit`
    is the same for every size so only one knob moves.
    """
    cached = datasets.generate(spark, spec)
    history, batch = datasets.load_history(spark, cached), datasets.load_batch(spark, cached, 1)
    rows = []
    for size in tqdm(list(sizes), desc="max_file_size", disable=not progress):
        options = {"max_file_size": size, "small_file_limit": small_file_limit}
        table = lf.Table.create(spark, _scratch(workdir, f"size-{size}"), record_key=datasets.RECORD_KEY,
                                precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None)
        table.bulk_insert(history, {**options, "bulk_insert_sort_mode": "GLOBAL_SORT"})
        upsert = table.upsert(batch, options)
        _, scan = table.query(standard_queries(table, spec)[query])
        rows.append({"max_file_size": size, "upsert_s": upsert.seconds, "write_tasks": upsert.step("write").tasks,
                     "files": len(table.file_slices()), "files_rewritten": upsert.files_rewritten,
                     "bytes_written": upsert.bytes_written,
                     "query_s": scan.planning_seconds + scan.execution_seconds,
                     "files_read": scan.funnel["files_read"]})
    return pd.DataFrame(rows)
