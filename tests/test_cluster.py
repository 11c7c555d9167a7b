"""labformat on a Spark standalone cluster (a master and two 1-core workers, each with executor
JVMs of its own) whose workers' Python has labformat's dependencies but not labformat itself:
`spark_session` ships the package, and the tables it writes read back the same everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import DATA_COLUMNS, assert_same_rows, hudi_snapshot, snapshot

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def worker_python(tmp_path_factory) -> str:
    """A Python for the executors: a fresh virtual environment that sees this one's installed packages
    (a path in a .pth file: pyarrow, numpy, fastavro, ...) but not the editable labformat, whose hook
    is a .pth file of this environment and is not processed from an added path."""
    env_dir = tmp_path_factory.mktemp("worker-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "labformat_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return str(python)


@pytest.fixture(scope="session")
def standalone(tmp_path_factory):
    from labformat.spark.standalone import StandaloneCluster

    with StandaloneCluster.start(tmp_path_factory.mktemp("standalone"), workers=2, cores=1) as cluster:
        yield cluster


def test_the_worker_python_has_the_dependencies_but_not_labformat(worker_python):
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    has = subprocess.run([worker_python, "-c", "import pyarrow, fastavro, numpy, xxhash"], cwd="/", env=clean_env)
    lacks = subprocess.run([worker_python, "-c", "import labformat"], cwd="/", env=clean_env, capture_output=True)
    assert has.returncode == 0
    assert lacks.returncode != 0 and b"No module named 'labformat'" in lacks.stderr


def test_operations_on_a_standalone_cluster_whose_workers_lack_labformat(spark, standalone, worker_python, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PYTHONPATH"] = str(ROOT)  # the driver's tests.helpers; the workers never see it
    proc = subprocess.run([sys.executable, "-m", "tests.cluster_job", standalone.master_url, str(tmp_path), worker_python],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    # Two executors, one per worker, each a JVM apart from the driver's; labformat came from the shipped zip.
    assert len(facts["executor_jvms"]) == 2 and facts["driver_jvm"] not in facts["executor_jvms"]
    assert all("labformat.zip" in f for f in facts["executor_labformat"]), facts["executor_labformat"]
    assert facts["bulk_rows"] == 400 and facts["bulk_write_tasks"] >= 1
    assert (facts["upsert_updates"], facts["upsert_inserts"]) == (50, 50)
    assert facts["cow_rows"] == 450 and facts["mor_rows"] == 450
    assert facts["mor_log_files"] >= 1 and facts["compacted_files"] >= 1
    assert facts["query_rows"] == 150 and facts["query_files_read"] <= facts["files_in_snapshot"]
    assert isinstance(facts["row_groups_read"], int) and facts["row_groups_read"] >= facts["query_files_read"]

    # What the cluster wrote: this session and hudi-rs read the same rows.
    import labformat as lf

    for name in ("cow", "mor"):
        ours = snapshot(lf.Table.open(spark, tmp_path / name).read())
        assert len(ours) == 450
        assert (ours["battery_pct"] == -1.0).sum() == 100
        assert_same_rows(hudi_snapshot(tmp_path / name), ours, DATA_COLUMNS)
