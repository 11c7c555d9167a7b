"""A writer process whose Spark master retries failed tasks (`local[2,3]`) and whose tasks' first
attempts fail just after publishing a file under a prefix (`tests/flaky_daemon.py`): upserts
`telemetry(spark, 10)` with its battery readings changed into the table at argv[1].

The test session's master (`local[2]`) never retries a task, so this runs in a process of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import functions as F

import labformat as lf
from tests.flaky_daemon import PREFIX_ENV
from tests.helpers import telemetry

ROOT = Path(__file__).resolve().parents[1]


def upsert_with_retried_tasks(path, fail_after_publishing: str) -> subprocess.CompletedProcess:
    """Run this module's upsert on the table at `path` in a process of its own; every task that
    publishes a file under `fail_after_publishing` fails once, after publishing it, and is retried."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{PREFIX_ENV: fail_after_publishing})
    proc = subprocess.run([sys.executable, "-m", "tests.retried_tasks", str(path)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    return proc


if __name__ == "__main__":
    spark = lf.spark_session(master="local[2,3]", **{
        "spark.python.daemon.module": "tests.flaky_daemon",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
    })
    report = lf.Table.open(spark, sys.argv[1]).upsert(telemetry(spark, 10).withColumn("battery_pct", F.lit(-1.0)))
    print("committed", report.instant)
