"""A writer process for the concurrency tests: one write of telemetry rows, its outcome printed as one JSON line.

    python -m tests.concurrent_writer <table path> <upsert|bulk_insert|cluster> '<spec JSON>'

spec: `n`, `start`, `prefix` (the rows, as `tests.helpers.telemetry` makes them), `parity` (keep
rows whose id has it: 0 is day 2024-01-15, 1 is 2024-01-16), `battery` (an update: every row gets
this battery_pct and a newer updated_at), `options` (the write's options), `begin_file` (once its
Spark session is up, the writer waits for this file before it opens the table: the test prepares
the table meanwhile). Pause and crash points: the test's environment names them, and the writer arms them
(`tests.helpers.arm_writer_points`, `labformat/hooks.py`).
"""

import json
import os
import sys
import time

from pyspark.sql import functions as F

import labformat as lf
from labformat.spark.compat import is_connect
from tests.helpers import arm_writer_points, telemetry
from tests.writer_pool import WRITER_CONF, WRITER_MASTER

WRITER_MASTER_ENV = "LABFORMAT_TEST_WRITER_MASTER"

if __name__ == "__main__":
    path, operation, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    arm_writer_points()
    # Under tests/test_connect.py the writers are Spark Connect clients of the test session's server.
    # Usually started warm by tests.writer_pool, whose session this returns.
    spark = lf.spark_session(master=os.environ.get(WRITER_MASTER_ENV, WRITER_MASTER), **WRITER_CONF)
    df = telemetry(spark, spec["n"], partitions=1, start=spec.get("start", 0), prefix=spec.get("prefix", "2024011509"))
    if "parity" in spec:
        df = df.where(F.col("signal_dbm") % 2 == spec["parity"])
    if "battery" in spec:
        df = df.withColumn("battery_pct", F.lit(float(spec["battery"]))).withColumn(
            "updated_at", F.col("updated_at") + F.expr("INTERVAL 1 DAY"))
    deadline = time.monotonic() + 300
    while spec.get("begin_file") and not os.path.exists(spec["begin_file"]):
        if time.monotonic() > deadline:
            sys.exit("the test never created the begin file")
        time.sleep(0.02)
    table = lf.Table.open(spark, path)
    try:
        # A table service (`cluster`: a consistent-hashing table's resize) takes no rows.
        args = (spec.get("options"),) if operation == "cluster" else (df, spec.get("options"))
        report = getattr(table, operation)(*args)
        outcome = {"instant": report.instant, "rows_written": report.rows_written,
                   "rows_updated": report.rows_updated, "rolled_back": list(report.rolled_back)}
    except lf.LabformatError as exc:
        outcome = {"error": type(exc).__name__, "message": str(exc)}
    outcome["spark_connect"] = is_connect(spark)
    print(json.dumps(outcome), flush=True)
