"""Crash-test writer process: bulk-inserts (or CRASH_WRITER_OPERATION=upsert|compact|cluster), dies where LABFORMAT_CRASH_AT says.

Its heartbeat and lock are short-lived (`SHORT_LIVED`, or the options JSON in argv[2]): a killed
writer's instant then counts as dead, and its lock as expired, within a second, so the next
writer in the test goes on without waiting minutes.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pyspark.sql import functions as F

import labformat as lf
from labformat.heartbeat import HEARTBEAT_DIR, heartbeat_status
from labformat.storage import Storage
from tests import writer_pool
from tests.helpers import arm_writer_points, telemetry
from tests.writer_pool import WRITER_CONF, WRITER_MASTER

SHORT_LIVED = {"heartbeat_interval_ms": 100, "heartbeat_tolerable_misses": 1, "lock_expire_minutes": 0.01}
ROOT = Path(__file__).resolve().parents[1]


def crash(path, point: str, operation: str | None = None, options: dict | None = None) -> subprocess.CompletedProcess:
    """Run this module's `operation` (bulk insert by default) on the table at `path` in a process of
    its own, killed at `point`; return once that process is gone and its heartbeat has expired.

    A killed writer's instant counts as live until its heartbeat is older than its tolerance
    (Hudi's rule): the next writer in a test must not race that clock, which on a loaded machine
    it can lose, so this waits for the heartbeat to be judged dead as a writer would judge it.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{writer_pool.CRASH_AT: point})
    env.pop("CRASH_WRITER_OPERATION", None)
    if operation:
        env["CRASH_WRITER_OPERATION"] = operation
    args = [str(path)] + ([json.dumps(options)] if options else [])
    process = writer_pool.spawn("tests.crash_writer", args, env)
    out, err = process.communicate(timeout=240)
    proc = subprocess.CompletedProcess(["tests.crash_writer", *args], process.returncode, out, err)
    assert proc.returncode == 86, proc.stdout + proc.stderr  # died at the crash point, not elsewhere
    assert "finished without crashing" not in proc.stdout
    storage = Storage(path)
    beats = [info.path.rsplit("/", 1)[-1] for info in storage.list(HEARTBEAT_DIR)]
    deadline = time.monotonic() + 30
    for instant in (b for b in beats if not b.startswith(".")):
        while heartbeat_status(storage, instant, 0.1, 1).alive:
            assert time.monotonic() < deadline, f"the dead writer's heartbeat {instant} still looks alive after 30 s"
            time.sleep(0.05)
    return proc


if __name__ == "__main__":
    path = sys.argv[1]
    options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else SHORT_LIVED
    arm_writer_points()
    spark = lf.spark_session(master=WRITER_MASTER, **WRITER_CONF)  # usually warm already (tests.writer_pool)
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
