"""The lab's standard queries, and side-by-side runs: skipping on vs off, index lookups footer vs metadata."""

from __future__ import annotations

import statistics
from datetime import datetime, time, timedelta

import pandas as pd

import labformat as lf
from labformat import datasets
from labformat.lab.frames import key_ranges_frame
from labformat.model.enums import SortMode


def standard_queries(table: lf.Table, spec: datasets.DatasetSpec) -> dict[str, str]:
    """A point lookup by record key, a one-hour time window, and a non-key filter on drone_id.

    The looked-up key is a real one (the smallest in the table), taken from the base files'
    footers, not from a scan; the window is 10:00-11:00 on the last history day.
    """
    hour = datetime.combine(spec.day_date(spec.history_days - 1), time(10))
    key = key_ranges_frame(table)["min_key"].min()
    return {
        "point lookup": f"record_key = '{key}'",
        "one-hour window": f"ts >= '{hour:%Y-%m-%d %H:%M:%S}' AND ts < '{hour + timedelta(hours=1):%Y-%m-%d %H:%M:%S}'",
        "drone_id filter": "drone_id = 'drone0001'",
    }


def compare_skipping(table: lf.Table, queries: dict[str, str], repeats: int = 3,
                     warm_up: bool = True) -> pd.DataFrame:
    """Each query with skipping on and off, alternating (on, off, on, off, ...), after one untimed run of
    each (the first scan of a file set pays for listing, caches and JIT); medians of the timed runs."""
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
                "files_in_snapshot": reports[0].funnel.files_in_snapshot,
                "files_read": reports[0].funnel.files_read, "rows": reports[0].rows_returned,
                "stats_source": reports[0].stats_source,
            })
    return pd.DataFrame(rows)


def compare_lookup_sources(spark, spec: datasets.DatasetSpec, path, repeats: int = 3,
                           options: dict | None = None) -> pd.DataFrame:
    """The BLOOM index's tag step with ranges and filters from footers vs the metadata table.

    One table (bloom filters kept in its metadata too); the same day-1 batch is upserted on a
    fresh copy of the bulk insert each time, alternating sources, so both see identical files.
    """
    import shutil
    from pathlib import Path

    cached = datasets.generate(spark, spec)
    base = Path(path)
    seed = base / "seed"
    shutil.rmtree(base, ignore_errors=True)
    table = lf.Table.create(spark, seed, record_key=datasets.RECORD_KEY, precombine_field=datasets.PRECOMBINE_FIELD,
                            options={"bloom_filter_enable": True})
    write_options = dict(options or {"max_file_size": "16MB", "small_file_limit": 0})
    table.bulk_insert(datasets.load_history(spark, cached),
                      {"bulk_insert_sort_mode": SortMode.GLOBAL_SORT, "max_file_size": write_options["max_file_size"]})
    batch = datasets.load_batch(spark, cached, 1)
    rows = []
    for i in range(repeats):
        for use in (False, True):
            copy = base / f"run-{i}-{use}"
            shutil.copytree(seed, copy)
            report = lf.Table.open(spark, copy).upsert(batch, {**write_options, "bloom_use_metadata": use})
            funnel = {k: v for k, v in report.funnel.as_dict().items()
                      if k in ("files_in_snapshot", "after_range_pruning", "after_bloom", "matched")}
            rows.append({"source": str(report.details.lookup_source), "tag_s": report.step("tag").seconds,
                         "upsert_s": report.seconds, **funnel})
            shutil.rmtree(copy, ignore_errors=True)
    frame = pd.DataFrame(rows)
    return frame.groupby("source").agg(tag_median_s=("tag_s", "median"), tag_min_s=("tag_s", "min"),
                                       tag_max_s=("tag_s", "max"), upsert_median_s=("upsert_s", "median"),
                                       files_in_snapshot=("files_in_snapshot", "first"),
                                       after_range_pruning=("after_range_pruning", "first"),
                                       after_bloom=("after_bloom", "first")).reset_index()
