"""A writer process for the crash tests: bulk-inserts into a table, dying where LABFORMAT_CRASH_AT says."""

import sys

import labformat as lf
from tests.helpers import telemetry

if __name__ == "__main__":
    path = sys.argv[1]
    spark = lf.spark_session(master="local[1]", **{
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.ui.enabled": "false",
    })
    table = lf.Table.open(spark, path)
    table.bulk_insert(telemetry(spark, 120, start=1000, prefix="2024011512"))
    print("finished without crashing")
