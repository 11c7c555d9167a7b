"""Notebook 06's helpers (`labformat.lab.indexes`): the lab's dataset, the week partition, the random keys, the
records that change week, and the tables of counts the notebook prints."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from labformat import datasets
from labformat.errors import ConfigError
from labformat.lab import indexes as ix
from labformat.model.enums import IndexType


def test_lab_spec_stretches_tiny_to_two_whole_weeks_from_a_monday():
    spec = ix.lab_spec("tiny")
    assert spec.history_days == ix.HISTORY_WEEKS * ix.WEEK_DAYS and spec.batch_days == 1
    assert spec.start_date.weekday() == 0
    assert spec.day_date(spec.history_days - 1).weekday() == 6  # the history ends on a Sunday


def test_lab_spec_takes_at_most_a_fleet_of_drones_and_readings_keep_only_those():
    small = ix.lab_spec("small")
    assert small.drones == ix.FLEET < datasets.spec("small").drones
    assert small.history_days == datasets.spec("small").history_days  # two whole weeks already
    assert ix.lab_spec("tiny").drones == datasets.spec("tiny").drones  # fewer than FLEET: all of them


def test_readings_are_those_of_the_specs_drones_from_the_whole_fleets_dataset(spark):
    one = dataclasses.replace(datasets.spec("tiny"), drones=1)  # tiny's fleet is 2
    history, batch = ix.readings(spark, one)
    assert {r.drone_id for r in history.select("drone_id").distinct().collect()} == {"drone0000"}
    assert {r.drone_id for r in batch.select("drone_id").distinct().collect()} == {"drone0000"}
    assert history.count() == one.history_rows


def test_surge_batch_adds_each_new_drone_the_new_days_readings_of_one_drone(spark):
    one = dataclasses.replace(datasets.spec("tiny"), drones=1)
    _, batch = ix.readings(spark, one)
    new_day = one.batch_date(1).isoformat()
    surged = ix.surge_batch(batch, one, 1, factor=3)
    added = surged.where("drone_id != 'drone0000'")
    assert {r.drone_id for r in added.select("drone_id").distinct().collect()} == {"drone0001", "drone0002"}
    readings = batch.where(f"day = '{new_day}'").dropDuplicates(["record_key"]).count()
    assert added.count() == 2 * readings and added.where(f"day != '{new_day}'").count() == 0
    assert added.select("record_key").distinct().count() == added.count()


def test_lab_spec_refuses_a_history_that_does_not_start_on_a_monday(monkeypatch):
    tuesday = dataclasses.replace(datasets.spec("tiny"), start="2024-01-16")
    monkeypatch.setattr(ix.datasets, "spec", lambda preset: tuesday)
    with pytest.raises(ConfigError, match="Monday"):
        ix.lab_spec("tiny")


def test_origin_gives_bucket_and_record_index_their_own_tables_and_the_others_the_plain_one():
    bases = {(style, index): f"{style}-{index.value}" for style in ("monotonic", "random")
             for index in (IndexType.BLOOM, IndexType.BUCKET, IndexType.RECORD_INDEX)}
    assert ix.origin(bases, "random", IndexType.BUCKET) == "random-BUCKET"
    assert ix.origin(bases, "monotonic", IndexType.RECORD_INDEX) == "monotonic-RECORD_INDEX"
    for index in (IndexType.SIMPLE, IndexType.BLOOM, IndexType.GLOBAL_SIMPLE, IndexType.GLOBAL_BLOOM):
        assert ix.origin(bases, "random", index) == "random-BLOOM"


def _runs(indexes, workloads) -> pd.DataFrame:
    rows = [{"workload": w, "index": i, "read": 10 * n + m, "rows_rewritten": 100 * n + m,
             "duplicates": (n if w == "moves" else None)}
            for n, i in enumerate(indexes) for m, w in enumerate(workloads)]
    return pd.DataFrame(rows)


def test_counts_orders_indexes_and_workloads_as_the_notebook_names_them():
    shuffled = ["RECORD_INDEX", "SIMPLE", "GLOBAL_BLOOM", "BUCKET"]
    runs = _runs(shuffled, ["moves", "time-ordered"])
    table = ix.counts(runs, "read")
    assert list(table.index) == ["SIMPLE", "BUCKET", "GLOBAL_BLOOM", "RECORD_INDEX"]
    assert list(table.columns) == ["time-ordered", "moves"]
    assert table.loc["GLOBAL_BLOOM", "moves"] == 20 and str(table.dtypes.iloc[0]) == "Int64"


def test_measures_keeps_the_duplicates_of_the_moves_workload_only():
    runs = _runs([i.value for i in ix.INDEXES], list(ix.WORKLOADS))
    frame = ix.measures(runs)
    assert list(frame.columns.get_level_values(0).unique()) == ["read by the tag step", "rows rewritten",
                                                                "keys stored twice"]
    assert list(frame["keys stored twice"].columns) == ["moves"]
    assert frame.loc["BUCKET", ("rows rewritten", "random keys")] == 201


@pytest.mark.spark
def test_with_week_names_the_monday_of_each_readings_week(spark):
    df = spark.createDataFrame([("2024-01-15",), ("2024-01-17",), ("2024-01-21",), ("2024-01-22",)], ["day"])
    weeks = [r[ix.PARTITION] for r in ix.with_week(df).orderBy("day").collect()]
    assert weeks == ["2024-01-15", "2024-01-15", "2024-01-15", "2024-01-22"]


@pytest.mark.spark
def test_random_keys_are_distinct_uuid_shaped_and_out_of_time_order(spark):
    keys = [f"2024011509{m:02d}_drone{d:04d}" for m in range(60) for d in range(5)]
    df = spark.createDataFrame([(k,) for k in keys], [datasets.RECORD_KEY])
    out = [r[0] for r in ix.random_keys(df).collect()]
    assert len(set(out)) == len(keys)
    assert all([len(p) for p in k.split("-")] == [8, 4, 4, 4, 12] for k in out)
    assert out != sorted(out)  # the input was in key order; the hashes are not


@pytest.mark.spark
def test_moves_corrects_the_last_day_and_dates_a_share_of_it_to_the_next(spark):
    from pyspark.sql import functions as F

    rows = [(f"k{i:04d}", day, 50.0, "2024-01-21 10:00:00") for i in range(2000)
            for day in (["2024-01-21"] if i % 2 else ["2024-01-20"])]
    history = spark.createDataFrame(rows, ["record_key", "day", "battery_pct", "updated_at"]).withColumn(
        "updated_at", F.to_timestamp("updated_at"))
    moves = ix._moves(history, share=0.05).collect()
    assert len(moves) == 1000  # every reading of the last day, none of the day before
    moved = [r for r in moves if r.day == "2024-01-22"]
    assert 0.02 * 1000 < len(moved) < 0.08 * 1000
    assert {r[ix.PARTITION] for r in moved} == {"2024-01-22"}  # the next day opens a new week
    assert all(r.battery_pct == 49.0 for r in moves)
