"""What differs between a classic and a Spark Connect session, checked on whichever this run has
(classic in the main suite, Connect in tests/test_connect.py's run of this file)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import labformat as lf
from labformat.errors import LabformatError
from labformat.spark.compat import NOT_ON_CONNECT, default_parallelism, distribute, is_connect, partitions_of
from tests.helpers import telemetry

pytestmark = pytest.mark.spark


def test_distribute_puts_each_row_in_a_partition_of_its_own(spark):
    rows = [(f"p{i}", i, f'["a{i}"]') for i in range(7)]
    df = distribute(spark, rows, "path string, n long, logs string")
    got = df.select("*", F.spark_partition_id().alias("part")).collect()
    assert sorted((r.path, r.n, r.logs) for r in got) == rows
    assert sorted(r.part for r in got) == list(range(7)) and partitions_of(df) == 7
    three = distribute(spark, rows, "path string, n long, logs string", tasks=3)
    assert partitions_of(three) == 3 and three.count() == 7


def test_default_parallelism_is_the_sessions(spark):
    assert default_parallelism(spark) == 4  # tests/conftest.py sets spark.default.parallelism=4
    assert partitions_of(spark.range(0, 10, 1, 5)) == 5


def test_reports_hold_measured_numbers_or_say_connect_cannot_measure_them(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    report = t.bulk_insert(telemetry(spark, 400), {"max_file_size": "8KB"})
    write = report.step("write")
    assert write.tasks >= 1  # counted by the status tracker, or from a Connect server's progress reports
    assert write.jobs == NOT_ON_CONNECT if is_connect(spark) else write.jobs >= 1
    scan = t.scan(F.col("signal_dbm") < 100).measure()
    assert scan.rows_returned == 100 and scan.funnel.files_read < scan.funnel.files_in_snapshot
    if is_connect(spark):
        assert scan.details.row_groups_read == NOT_ON_CONNECT
        with pytest.raises(LabformatError, match=NOT_ON_CONNECT):
            lf.spark.SparkUI(spark)
    else:
        assert scan.details.row_groups_read == scan.funnel.files_read


def test_a_sql_filter_and_a_column_skip_the_same_files(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    t.bulk_insert(telemetry(spark, 400), {"max_file_size": "8KB", "bulk_insert_sort_mode": "GLOBAL_SORT"})
    pairs = [("signal_dbm < 100", F.col("signal_dbm") < 100),
             ("record_key >= '2024011509030' AND day = '2024-01-16'",
              (F.col("record_key") >= "2024011509030") & (F.col("day") == "2024-01-16")),
             ("updated_at < '2024-01-15 06:28:00'", F.col("updated_at") < F.lit("2024-01-15 06:28:00").cast("timestamp"))]
    for sql, column in pairs:
        by_sql, by_column = t.scan(sql).measure(), t.scan(column).measure()
        assert by_sql.rows_returned == by_column.rows_returned == t.read().filter(sql).count() > 0, sql
        assert by_sql.funnel.files_read < by_sql.funnel.files_in_snapshot, sql
        if "updated_at" not in sql:  # a Connect Column's cast is the server's to evaluate: no skipping on it
            assert by_sql.files_read == by_column.files_read, sql
