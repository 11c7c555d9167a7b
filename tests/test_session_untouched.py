"""A write leaves the caller's SparkSession as it found it: every shuffle of a write carries its task
count in the plan (labformat/spark/partitioning.py), none takes `spark.sql.shuffle.partitions`."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import labformat as lf
from labformat.spark.ui import SparkUI
from tests.helpers import telemetry

pytestmark = pytest.mark.spark

# A count no labformat shuffle would choose: a stage of this many tasks took the session's setting.
ODD = 37
SETTINGS = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")


@pytest.fixture
def odd_session(spark):
    """The session with an odd shuffle count, and adaptive execution as the test says; restored after."""
    before = {key: spark.conf.get(key) for key in SETTINGS}
    spark.conf.set("spark.sql.shuffle.partitions", str(ODD))
    yield spark
    for key, value in before.items():
        spark.conf.set(key, value)


def _stages_of(report: lf.WriteReport, ui: SparkUI) -> list:
    groups = {s.group for s in report.steps if s.group}
    return [stage for group in groups for stage in ui.stages(group) if stage.status != "SKIPPED"]


# Each index's joins and counts, with and without partition paths (the join keys differ), a table with
# change data capture (its commit joins the before and after images), and the merge-on-read paths where
# a global index reads the keys logs deleted.
CASES = [("BLOOM", None, "COPY_ON_WRITE"), ("BLOOM", "day", "COPY_ON_WRITE", {"cdc_enabled": True}),
         ("SIMPLE", "day", "COPY_ON_WRITE"), ("GLOBAL_BLOOM", "day", "COPY_ON_WRITE"), ("BUCKET", "day", "COPY_ON_WRITE"),
         ("RECORD_INDEX", "day", "COPY_ON_WRITE"), ("SIMPLE", None, "MERGE_ON_READ"),
         ("GLOBAL_SIMPLE", "day", "MERGE_ON_READ")]
ADAPTIVE_CASES = [("BLOOM", "day", "COPY_ON_WRITE")]


@pytest.mark.parametrize("adaptive, cases", [("false", CASES), ("true", ADAPTIVE_CASES)])
def test_no_write_takes_the_sessions_shuffle_count_or_changes_its_settings(odd_session, tmp_path, monkeypatch,
                                                                         adaptive, cases):
    from pyspark.sql.conf import RuntimeConfig

    spark = odd_session
    spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    settings = {key: spark.conf.get(key) for key in SETTINGS}

    def refuse(self, key, *args):
        raise AssertionError(f"a write set the session's {key}")

    # From here on any change of a session setting fails the test (the old writes pinned two).
    monkeypatch.setattr(RuntimeConfig, "set", refuse)
    monkeypatch.setattr(RuntimeConfig, "unset", refuse)
    ui = SparkUI(spark)
    seen = 0
    for n, (index, partition_field, table_type, *extra) in enumerate(cases):
        created = {"index_type": index, **({"bucket_num": 2} if index == "BUCKET" else {}), **(extra[0] if extra else {})}
        table = lf.Table.create(spark, tmp_path / f"t{n}", partition_field=partition_field, table_type=table_type,
                                options=created)
        table.bulk_insert(telemetry(spark, 400))
        changed = telemetry(spark, 300, start=200).withColumn("battery_pct", F.lit(1.0))
        # The delete writes log files on merge-on-read; the upsert after it meets the keys they deleted.
        reports = [table.upsert(changed), table.delete(telemetry(spark, 20).select("record_key", "day")),
                   table.upsert(changed.where("signal_dbm < 260"))]
        if n == 0:  # a batch in one Spark partition: its joins may take the session's count (partitioning.py)
            table.upsert(changed.where("signal_dbm >= 260").coalesce(1))
        for report in reports:
            stages = _stages_of(report, ui)
            odd = [s.name for s in stages if s.num_tasks == ODD]
            assert not odd, (index, partition_field, table_type, report.operation, odd)
            seen += len(stages)
        assert table.read().count() == 500 - 20
        assert table.read().where("battery_pct = 1.0").count() == 300
        assert {key: spark.conf.get(key) for key in SETTINGS} == settings
    assert seen > 0  # the UI saw the writes' stages


@pytest.mark.classic_only  # reads the JVM's physical plan, which a Connect client has not
def test_partitioned_by_keeps_a_frame_already_so_partitioned_and_repartitions_any_other(spark):
    from labformat.spark import partitioning as P
    from labformat.spark.compat import partitions_of

    by_id = spark.range(100).repartition(3, "id")
    assert P.hash_partitionings(by_id) == [(("id",), 3)]
    assert P.partitioned_by(by_id, ["id"], 3) is by_id
    assert P.hash_partitionings(P.partitioned_by(by_id, ["id"], 5)) == [(("id",), 5)]
    assert P.hash_partitionings(spark.range(10)) == []
    one = spark.range(10).repartition(1)
    assert P.hash_partitionings(one) == [((), 1)] and P.partitioned_by(one, ["id"], 1) is one
    aliased = by_id.withColumn("copy", F.col("id")).select("id", F.col("id").alias("other"))
    assert (("id",), 3) in P.hash_partitionings(aliased) and P.partitioned_by(aliased, ["id"], 3) is aliased
    counts = P.grouped_counts(by_id.withColumn("k", F.col("id") % 2).withColumn("w", F.lit(2)), ["k"],
                              {"n": None, "weight": "w"}, 2)
    assert partitions_of(counts) == 2 and sorted((r.n, r.weight) for r in counts.collect()) == [(50, 100), (50, 100)]
    joined = P.join_partitioned(by_id, spark.range(0, 100, 10).withColumn("hit", F.lit(1)), ["id"])
    assert joined.where("hit = 1").count() == 10 and P.hash_partitionings(joined) == [(("id",), 3)]


def test_labformats_session_builder_sizes_local_shuffles_and_turns_adaptive_execution_off():
    import os

    from labformat.spark.session import DEFAULT_CONF, LOCAL_CONF, local_cores

    assert LOCAL_CONF["spark.sql.adaptive.enabled"] == "false" and "spark.sql.adaptive.enabled" not in DEFAULT_CONF
    assert local_cores("local[3]") == 3 and local_cores("local") == 1 and local_cores("local[2, 4]") == 2
    assert local_cores("local[*]") == len(os.sched_getaffinity(0))
    assert local_cores("local-cluster[2,1,1024]") is None and local_cores("spark://host:7077") is None


def test_a_connect_master_without_the_connect_extra_names_the_install(monkeypatch):
    import importlib.util

    import labformat.spark.session as session
    from labformat.errors import ConfigError

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "grpc" else object())
    monkeypatch.setattr("pyspark.sql.SparkSession.getActiveSession", staticmethod(lambda: None))
    with pytest.raises(ConfigError, match=r"needs grpc: the connect extra \(in the checkout, `pip install -e '\.\[connect\]'`"):
        session.spark_session("sc://localhost:15002")
