"""Property test: random bulk insert / upsert / delete sequences against a plain dict model of the table.

After every step labformat's snapshot equals the model, and Apache Hudi's own reader (hudi-rs)
returns the same snapshot. Runs on the three non-global indexes (BUCKET on merge-on-read too, where inserts go to log files),
partitioned and not.
"""

from __future__ import annotations

import shutil
import tempfile

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import labformat as lf
from tests.helpers import hudi_snapshot

pytestmark = pytest.mark.spark

SCHEMA = "record_key string, p string, updated_at long, value long"
KEYS = [f"k{i:03d}" for i in range(40)]


def partition_of(key: str) -> str:
    return "a" if int(key[1:]) % 2 else "b"


row = st.tuples(st.sampled_from(KEYS), st.integers(0, 3), st.integers(0, 5))  # key, updated_at, value
operations = st.lists(
    st.one_of(
        st.tuples(st.just("bulk_insert"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=12, unique=True),
                  st.integers(0, 9)),
        st.tuples(st.just("upsert"), st.lists(row, min_size=0, max_size=20)),  # duplicates and ties included
        st.tuples(st.just("delete"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=8)),
    ),
    min_size=2, max_size=5,
)


def apply_to_model(model: dict, op) -> None:
    kind = op[0]
    if kind == "bulk_insert":
        for key in op[1]:
            model[key] = (key, partition_of(key), 0, op[2])
    elif kind == "upsert":
        winners: dict[str, tuple] = {}
        for key, updated_at, value in op[1]:
            candidate = (key, partition_of(key), updated_at, value)
            # highest updated_at wins; ties go to the larger remaining columns (here: value)
            if key not in winners or (updated_at, value) > (winners[key][2], winners[key][3]):
                winners[key] = candidate
        model.update(winners)  # the incoming record replaces the stored one
    else:
        for key in op[1]:
            model.pop(key, None)


def as_frame(model: dict) -> pd.DataFrame:
    frame = pd.DataFrame(sorted(model.values()), columns=["record_key", "p", "updated_at", "value"])
    return frame.reset_index(drop=True)


def check_snapshot(table, path, model) -> None:
    if table.schema() is None:  # nothing committed yet: no data columns to compare
        assert not model and table.read().count() == 0
        return
    ours = table.read().select("record_key", "p", "updated_at", "value").toPandas()
    ours = ours.sort_values("record_key").reset_index(drop=True)
    expected = as_frame(model)
    pd.testing.assert_frame_equal(ours, expected, check_dtype=False)
    theirs = hudi_snapshot(path)
    if len(expected):
        theirs = theirs[["record_key", "p", "updated_at", "value"]].reset_index(drop=True)
        pd.testing.assert_frame_equal(theirs, expected, check_dtype=False)
    else:
        assert len(theirs) == 0


@pytest.mark.parametrize("index_type,table_type", [("BLOOM", "COPY_ON_WRITE"), ("SIMPLE", "COPY_ON_WRITE"),
                                                   ("BUCKET", "COPY_ON_WRITE"), ("BUCKET", "MERGE_ON_READ")])
@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
# Three examples per case (eight cases) and no shrinking: a failing case is printed as found, instead
# of minutes of Spark spent shrinking it.
@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=operations, max_file_size=st.sampled_from(["3KB", "1MB"]))
def test_random_operation_sequences_match_a_dict_model(spark, index_type, table_type, partitioned, ops, max_file_size):
    path = tempfile.mkdtemp(prefix="lf-oracle-")
    try:
        table = lf.Table.create(spark, path, record_key="record_key", precombine_field="updated_at",
                                partition_field="p" if partitioned else None,
                                options={"index_type": index_type, "bucket_num": 3, "table_type": table_type})
        model: dict[str, tuple] = {}
        options = {"max_file_size": max_file_size, "small_file_limit": "2KB"}
        for op in ops:
            kind = op[0]
            if kind == "bulk_insert":
                fresh = [k for k in op[1] if k not in model]  # bulk insert does not look keys up
                op = (kind, fresh, op[2])
                rows = [(k, partition_of(k), 0, op[2]) for k in fresh]
                table.bulk_insert(spark.createDataFrame(rows, SCHEMA), options)
            elif kind == "upsert":
                rows = [(k, partition_of(k), u, v) for k, u, v in op[1]]
                report = table.upsert(spark.createDataFrame(rows, SCHEMA), options)
                distinct = {k for k, _, _ in op[1]}
                assert report.rows_in == len(rows)
                assert report.rows_deduplicated == len(rows) - len(distinct)
                assert report.rows_updated == len(distinct & set(model))
                assert report.rows_inserted == len(distinct - set(model))
            else:
                keys = [(k, partition_of(k)) for k in op[1]]
                report = table.delete(spark.createDataFrame(keys, "record_key string, p string"), options)
                assert report.rows_deleted == len(set(op[1]) & set(model))
            apply_to_model(model, op)
            check_snapshot(table, path, model)
    finally:
        shutil.rmtree(path, ignore_errors=True)
