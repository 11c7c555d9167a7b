"""The driver of tests/test_cluster.py: labformat's operations on a Spark cluster whose executors
run in processes (and a Python) of their own. Prints one JSON line of facts."""

import json
import os
import sys

from pyspark.sql import functions as F

import labformat as lf
from tests.helpers import telemetry


def executor_facts(batches):
    """Runs in a Python worker: its JVM (worker <- daemon <- JVM) and whether labformat came from the shipped zip."""
    import pyarrow as pa

    for _ in batches:
        pass
    with open(f"/proc/{os.getppid()}/stat") as fh:
        jvm = int(fh.read().rsplit(")", 1)[1].split()[1])
    import labformat

    yield pa.RecordBatch.from_pydict({"pid": [jvm], "labformat": [labformat.__file__]})


if __name__ == "__main__":
    master, base, worker_python = sys.argv[1:4]
    spark = lf.spark_session(master=master, **{
        "spark.pyspark.python": worker_python, "spark.ui.enabled": "false", "spark.executor.memory": "768m",
        "spark.sql.shuffle.partitions": "4", "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    driver_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    facts = {"driver_jvm": driver_pid}
    ran = spark.range(4, numPartitions=2).mapInArrow(executor_facts, "pid long, labformat string").collect()
    facts["executor_jvms"] = sorted({r.pid for r in ran})
    facts["executor_labformat"] = sorted({r.labformat for r in ran})

    cow = lf.Table.create(spark, f"{base}/cow", partition_field="day")
    bulk = cow.bulk_insert(telemetry(spark, 400), {"bulk_insert_sort_mode": "GLOBAL_SORT"})
    upsert = cow.upsert(telemetry(spark, 100, start=350).withColumn("battery_pct", F.lit(-1.0)))
    scan = cow.scan(F.col("record_key") >= "20240115090300").measure()
    facts.update(bulk_rows=bulk.rows_written, bulk_write_tasks=bulk.step("write").tasks,
                 upsert_updates=upsert.rows_updated, upsert_inserts=upsert.rows_inserted,
                 cow_rows=cow.read().count(), query_rows=scan.rows_returned,
                 query_files_read=len(scan.files_read), files_in_snapshot=scan.funnel.files_in_snapshot,
                 row_groups_read=scan.details.row_groups_read)

    mor = lf.Table.create(spark, f"{base}/mor", partition_field="day", table_type="MERGE_ON_READ")
    mor.bulk_insert(telemetry(spark, 400))
    delta = mor.upsert(telemetry(spark, 100, start=350).withColumn("battery_pct", F.lit(-1.0)))
    compaction = mor.compact()
    facts.update(mor_log_files=sum(1 for f in delta.files if ".log." in f.path),
                 compaction_instant=compaction.instant, compacted_files=len(compaction.files),
                 mor_rows=mor.read().count())
    print(json.dumps(facts))
    spark.stop()
