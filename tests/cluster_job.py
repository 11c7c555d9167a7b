"""Bulk insert and read on `local-cluster`: executors in JVMs of their own. Prints one JSON line of facts."""

import json
import os
import sys

import labformat as lf
from tests.helpers import telemetry


def executor_jvm_pids(_batches):
    """Runs in a Python worker: its grandparent is the JVM that launched it (worker <- daemon <- JVM)."""
    import pyarrow as pa

    for _ in _batches:
        pass
    with open(f"/proc/{os.getppid()}/stat") as fh:
        jvm = int(fh.read().rsplit(")", 1)[1].split()[1])
    yield pa.RecordBatch.from_pydict({"pid": [jvm]})


if __name__ == "__main__":
    path = sys.argv[1]
    spark = lf.spark_session(master="local-cluster[1,1,1024]", **{"spark.ui.enabled": "false"})
    driver_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    table = lf.Table.create(spark, path, partition_field="day")
    report = table.bulk_insert(telemetry(spark, 400), {"bulk_insert_sort_mode": "GLOBAL_SORT"})
    pids = {r.pid for r in spark.range(4, numPartitions=2).mapInArrow(executor_jvm_pids, "pid long").collect()}
    print(json.dumps({
        "driver_jvm": driver_pid,
        "executor_jvms": sorted(pids),
        "executors": spark.sparkContext._jsc.sc().getExecutorIds().toString(),
        "rows_written": report.rows_written,
        "write_tasks": report.step("write").tasks,
        "read_rows": table.read().count(),
        "instant": report.instant,
    }))
    spark.stop()
