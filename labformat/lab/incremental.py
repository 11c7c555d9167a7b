"""Notebook 07's experiments: a month of upserts read incrementally, a downstream table fed only each day's changes, CDC records.

The source table keeps change data capture on (`cdc_enabled`), so one month gives both readings:
the latest state of what each day wrote (`Table.changes`) and every insert, update and delete
(`incremental_format=cdc`). The downstream table holds each drone's latest reading; a job that
keeps its checkpoint (the last instant it consumed) feeds it each day's changes only, and it is
compared with the same table computed from the whole snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from tqdm.auto import tqdm

import labformat as lf
from labformat import datasets
from labformat.lab import workshop
from labformat.model.enums import IncrementalFormat, SortMode
from labformat.schema import RECORD_KEY as HOODIE_KEY
from labformat.write.cdc import instant_millis

CDC = {"incremental_format": IncrementalFormat.CDC}
DATA_COLUMNS = [f.name for f in datasets.SCHEMA.fields]


@dataclass
class Month:
    """The source table and what each day's upsert (and the delete at its end) reported."""

    table: lf.Table
    history_instant: str
    days: list[lf.WriteReport]
    delete: lf.WriteReport | None
    deleted_drone: str = ""  # whose readings of `deleted_day` the delete removed
    deleted_day: str = ""  # the last day, as YYYY-MM-DD

    @property
    def instants(self) -> list[str]:
        return [self.history_instant] + [r.instant for r in self.days] + ([self.delete.instant] if self.delete else [])


def source_month(spark, spec: datasets.DatasetSpec, days: int | None = None, delete_drone: str = "drone0001",
                 workdir: Path | None = None, progress: bool = False) -> Month:
    """The history bulk inserted into a CDC table partitioned by day, `days` daily batches upserted
    (all of them by default), then the readings of `delete_drone` on the last day deleted."""
    cached = datasets.generate(spark, spec)
    table = lf.Table.create(spark, workshop.scratch("07-source", workdir), record_key=datasets.RECORD_KEY,
                            precombine_field=datasets.PRECOMBINE_FIELD, partition_field=datasets.PARTITION_FIELD,
                            options={"cdc_enabled": True})
    history = table.bulk_insert(datasets.load_history(spark, cached), {"bulk_insert_sort_mode": SortMode.GLOBAL_SORT})
    reports = []
    for day in tqdm(range(1, (days or spec.batch_days) + 1), desc="days", disable=not progress):
        reports.append(table.upsert(datasets.load_batch(spark, cached, day)))
    last_day = table.read().agg(F.max("day")).first()[0]
    doomed = table.read().where((F.col("day") == last_day) & (F.col("drone_id") == delete_drone)).select(
        datasets.RECORD_KEY, datasets.PARTITION_FIELD)
    delete = table.delete(doomed)
    return Month(table, history.instant, reports, delete, delete_drone, str(last_day))


def daily_reads(month: Month) -> pd.DataFrame:
    """Per day: what an incremental read of that day's commit alone opened and returned, against the
    snapshot and against what the upsert reported writing."""
    rows = []
    instants = month.instants
    for n, report in enumerate(month.days, start=1):
        plan = month.table.incremental_plan(instants[n - 1], report.instant)
        returned = plan.to_dataframe().count()
        rows.append({"day": n, "instant": report.instant, "files_read": plan.files_read,
                     "files_in_snapshot": plan.files_in_snapshot,
                     "file_groups_written": len({(f.partition_path, f.file_id) for f in report.files}),
                     "records_returned": returned, "records_written": report.rows_inserted + report.rows_updated})
    return pd.DataFrame(rows)


def change_counts(month: Month) -> pd.DataFrame:
    """Per commit after the history: the change records by op (from the CDC read of the whole month),
    beside what the write reported."""
    changes = month.table.changes(month.history_instant, options=CDC)
    counted = {(r.ts_ms, r.op): r["count"] for r in changes.groupBy("ts_ms", "op").count().collect()}
    rows = []
    for name, report in [(f"day {n}", r) for n, r in enumerate(month.days, start=1)] + [("delete", month.delete)]:
        ms = instant_millis(report.instant)
        rows.append({"commit": name, "inserts (i)": counted.get((ms, "i"), 0), "updates (u)": counted.get((ms, "u"), 0),
                     "deletes (d)": counted.get((ms, "d"), 0), "reported inserted": report.rows_inserted,
                     "reported updated": report.rows_updated, "reported deleted": report.rows_deleted})
    return pd.DataFrame(rows).set_index("commit")


def changes_of_deleted(month: Month) -> pd.Series:
    """The change records a CDC read of the last two commits (the last day's upsert, then the delete)
    holds for the readings the delete removed (the deleted drone on the last day), by op."""
    if month.delete is None or not month.days:
        raise lf.LabformatError("this month has no delete after its days")
    since = month.days[-2].instant if len(month.days) > 1 else month.history_instant
    day = month.deleted_day.replace("-", "")
    records = month.table.changes(since, month.delete.instant, options=CDC).where(
        F.col(HOODIE_KEY).startswith(day) & F.col(HOODIE_KEY).endswith(f"_{month.deleted_drone}"))
    counted = {r.op: r["count"] for r in records.groupBy("op").count().collect()}
    return pd.Series({op: int(counted.get(op, 0)) for op in ("i", "u", "d")}, name="change records")


def _latest_per_drone(records: DataFrame) -> DataFrame:
    newest = Window.partitionBy("drone_id").orderBy(F.col("ts").desc(), F.col("updated_at").desc())
    return (records.select(*DATA_COLUMNS).withColumn("_n", F.row_number().over(newest)).where(F.col("_n") == 1)
            .drop("_n"))


def downstream_incremental(month: Month, workdir: Path | None = None) -> tuple[lf.Table, list[dict]]:
    """Each drone's latest reading, kept in a table keyed by drone: built from the history, then fed
    each day only the records that day's commit wrote (`changes(checkpoint)`), the checkpoint moving
    to the last instant consumed. Per run: the checkpoint before and after, the records read."""
    spark = month.table.spark
    downstream = lf.Table.create(spark, workshop.scratch("07-latest-per-drone", workdir), record_key="drone_id",
                                 precombine_field="ts", partition_field=None)
    checkpoint = "000"
    runs = []
    for instant in [month.history_instant] + [r.instant for r in month.days]:  # the delete adds no reading
        plan = month.table.incremental_plan(checkpoint, instant)
        changed = plan.to_dataframe()
        downstream.upsert(_latest_per_drone(changed))
        runs.append({"checkpoint before": checkpoint, "checkpoint after": plan.end, "files_read": plan.files_read})
        checkpoint = plan.end
    return downstream, runs


def differs_from_snapshot(month: Month, downstream: lf.Table) -> int:
    """Rows where the incrementally fed table and the same table computed from the source's snapshot as
    of the last day differ (in either direction), counted by Spark."""
    snapshot = month.table.read(as_of=month.days[-1].instant if month.days else month.history_instant)
    expected = _latest_per_drone(snapshot).select(*DATA_COLUMNS)
    got = downstream.read().select(*DATA_COLUMNS)
    return expected.exceptAll(got).count() + got.exceptAll(expected).count()
