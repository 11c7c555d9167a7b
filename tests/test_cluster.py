"""Bulk insert and read with executors in processes of their own (`local-cluster`), not the driver's JVM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import DATA_COLUMNS, assert_same_rows, hudi_snapshot, snapshot, telemetry

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


def test_bulk_insert_and_read_with_separate_executor_processes(spark, tmp_path):
    path = tmp_path / "t"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "tests.cluster_job", str(path)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["executors"] not in ("", "List()"), "local-cluster should have registered executors"
    assert facts["executor_jvms"] and facts["driver_jvm"] not in facts["executor_jvms"]
    assert facts["rows_written"] == facts["read_rows"] == 400
    assert facts["write_tasks"] >= 1
    # What the cluster wrote is a table like any other: this session and hudi-rs read it.
    import labformat as lf

    ours = snapshot(lf.Table.open(spark, path).read())
    assert_same_rows(ours, snapshot(telemetry(spark, 400)), DATA_COLUMNS)
    assert_same_rows(hudi_snapshot(path), ours, DATA_COLUMNS)
