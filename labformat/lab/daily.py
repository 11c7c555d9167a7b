"""The daily-upsert run: bulk insert the history, then upsert each day's batch, keeping every report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

import labformat as lf
from labformat import datasets
from labformat.lab import workshop
from labformat.lab.viz import FUNNEL_COLUMNS, KEY_FUNNEL_COLUMNS
from labformat.model.enums import IndexType, SortMode


@dataclass(frozen=True)
class DailyRun:
    """What a daily-upsert run did: the bulk insert's report, then one report per day."""

    table_path: str
    index_type: str
    key_style: str
    bulk_insert: lf.WriteReport | None  # None when the days were upserted into an existing table
    days: tuple[lf.WriteReport, ...]
    day_numbers: tuple[int, ...] | None = None  # the batch day of each report; 1, 2, ... when None

    def to_pandas(self) -> pd.DataFrame:
        """One row per upsert day: time, per-step split, the funnel (files, then (key, file) pairs:
        `viz.FUNNEL_COLUMNS`, `viz.KEY_FUNNEL_COLUMNS`; None where the index has no such count),
        files rewritten and created."""
        rows = []
        numbers = self.day_numbers or tuple(range(1, len(self.days) + 1))
        for day, report in zip(numbers, self.days):
            row: dict[str, Any] = {
                "day": day,
                "index": self.index_type,
                "key_style": self.key_style,
                "seconds": report.seconds,
                "rows_in": report.rows_in,
                "updated": report.rows_updated,
                "inserted": report.rows_inserted,
                "deduplicated": report.rows_deduplicated,
                "files_rewritten": report.files_rewritten,
                "files_created": report.files_created,
                "bytes_written": report.bytes_written,
                # Copy-on-write's cost: the new slices of file groups that existed (old rows copied along).
                "rows_rewritten": sum(f.rows for f in report.files if not f.created),
                "mb_rewritten": sum(f.size_bytes for f in report.files if not f.created) / 1024**2,
                "write_amplification": report.details.write_amplification,
                # Steps 4-6: small files found, the record-size estimate, inserts packed into small files.
                "small_files": report.details.small_files,
                "record_size": report.details.record_size,
                "small_file_inserts": sum(f.inserts for f in report.files if not f.created),
            }
            funnel = report.funnel.as_dict()
            row.update({key: funnel[key] for key in FUNNEL_COLUMNS + KEY_FUNNEL_COLUMNS})
            for step in report.steps:
                row[f"{step.name}_s"] = step.seconds
                row[f"{step.name}_tasks"] = step.tasks
            rows.append(row)
        return pd.DataFrame(rows)


def run_daily_upserts(spark, spec: datasets.DatasetSpec, table_path: str | Path, index_type: IndexType = IndexType.BLOOM,
                      options: Mapping[str, Any] | None = None, days: int | None = None,
                      partition_field: str | None = None,
                      on_day: Callable[[int, lf.WriteReport], None] | None = None) -> DailyRun:
    """Bulk insert `spec`'s history (GLOBAL_SORT, so file key ranges are clean), then upsert each day.

    The table at `table_path` is replaced. `options` go to every write; `on_day` is called
    after each upsert (progress bars, printing).
    """
    workshop.drop(table_path)
    cached = datasets.generate(spark, spec)
    table = lf.Table.create(spark, table_path, record_key=datasets.RECORD_KEY,
                            precombine_field=datasets.PRECOMBINE_FIELD, partition_field=partition_field,
                            options={"index_type": index_type})
    write_options = dict(options or {})
    # Every write option is valid for bulk insert too; those it has no use for are ignored.
    first = table.bulk_insert(datasets.load_history(spark, cached),
                              {"bulk_insert_sort_mode": SortMode.GLOBAL_SORT, **write_options})
    reports = []
    for day in range(1, (days or spec.batch_days) + 1):
        report = table.upsert(datasets.load_batch(spark, cached, day), write_options)
        reports.append(report)
        if on_day is not None:
            on_day(day, report)
    return DailyRun(str(table_path), index_type, spec.key_style, first, tuple(reports))
