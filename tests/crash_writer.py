"""A writer process for the crash tests: bulk-inserts into a table (or upserts, compacts or clusters: CRASH_WRITER_OPERATION=upsert|compact|cluster), dying where LABFORMAT_CRASH_AT says.

Its heartbeat and lock are short-lived (`SHORT_LIVED`, or the options JSON in argv[2]): a killed
writer's instant then counts as dead, and its lock as expired, within a second, so the next
writer in the test goes on without waiting minutes.
"""

import json
import os
import sys

from pyspark.sql import functions as F

import labformat as lf
from tests.helpers import telemetry

SHORT_LIVED = {"heartbeat_interval_ms": 100, "heartbeat_tolerable_misses": 1, "lock_expire_minutes": 0.01}

if __name__ == "__main__":
    path = sys.argv[1]
    options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else SHORT_LIVED
    spark = lf.spark_session(master="local[1]", **{
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.ui.enabled": "false",
    })
    table = lf.Table.open(spark, path)
    if os.environ.get("CRASH_WRITER_OPERATION") == "compact":
        table.compact(options)
    elif os.environ.get("CRASH_WRITER_OPERATION") == "cluster":
        table.cluster(options)
    elif os.environ.get("CRASH_WRITER_OPERATION") == "upsert":  # updates of every key of telemetry(spark, 40)
        table.upsert(telemetry(spark, 40).withColumn("battery_pct", F.lit(-1.0))
                     .withColumn("updated_at", F.timestamp_seconds(F.lit(1800000000))), options)
    else:
        table.bulk_insert(telemetry(spark, 120, start=1000, prefix="2024011512"), options)
    print("finished without crashing")
