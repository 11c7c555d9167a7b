"""The workshop notebooks' helpers: the preset and Spark session a notebook runs with, scratch tables, short frames of what happened."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

import labformat as lf
from labformat import datasets
from labformat.datasets.spec import MINUTES_PER_DAY
from labformat.lab.viz import key_ranges_frame

# The headless runner and the tests set these; a learner's JupyterLab leaves them unset.
PRESET_ENV = "LABFORMAT_PRESET"
OUT_ENV = "LABFORMAT_OUT"
DEFAULT_PRESET = "small"
# Below this a "file" is a few row groups of a handful of rows: nothing a learner should tune towards.
MIN_FILE_SIZE = "32KB"
REPO_ROOT = Path(__file__).resolve().parents[2]


def preset() -> str:
    """The dataset preset this notebook runs at: $LABFORMAT_PRESET, else `small`."""
    name = os.environ.get(PRESET_ENV, DEFAULT_PRESET)
    datasets.spec(name)  # an unknown name fails here, naming the presets, not deep in a cell
    return name


def session():
    """The notebook's SparkSession: $LABFORMAT_SPARK_MASTER (else every local core), JVM output in a log file."""
    return lf.spark_session(app_name="labformat-workshop")


def out_dir() -> Path:
    """Where the workshop writes: $LABFORMAT_OUT, else `out/` at the repository root."""
    return Path(os.environ.get(OUT_ENV) or REPO_ROOT / "out")


def scratch(name: str) -> Path:
    """An empty folder for a notebook's table `name`, under out/work/<preset>/ (emptied first)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise lf.ConfigError(f"scratch table names are letters, digits, '_', '.', '-'; got {name!r}")
    path = out_dir() / "work" / preset() / name
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def new_table(spark, name: str, **options) -> lf.Table:
    """A fresh drone table at `scratch(name)`: record key `record_key`, precombine `updated_at`, no partitions."""
    return lf.Table.create(spark, scratch(name), record_key=datasets.RECORD_KEY,
                           precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None, options=options)


def environment(spark) -> pd.DataFrame:
    """What this lab runs on: Python, Java, Spark, pyarrow, pandas versions and the cores Spark uses."""
    import pyarrow

    from labformat.spark.session import check_java

    rows = [("Python", platform.python_version()), ("Java (major)", str(check_java())),
            ("Spark", spark.version), ("pyarrow", pyarrow.__version__), ("pandas", pd.__version__),
            ("labformat", lf.__version__), ("Spark master", spark.sparkContext.master),
            ("cores (default parallelism)", str(spark.sparkContext.defaultParallelism))]
    return pd.DataFrame(rows, columns=["component", "version"]).set_index("component")


def describe_dataset(spec: datasets.DatasetSpec) -> pd.DataFrame:
    """The preset's shape: drones, days of history and batches, rows, and what a batch mixes in."""
    rows = [("drones", spec.drones), ("readings per drone per day", MINUTES_PER_DAY),
            ("history days (bulk insert)", spec.history_days), ("history rows", spec.history_rows),
            ("first history day", str(spec.start_date)), ("daily batches (upserts)", spec.batch_days),
            ("rows per batch (about)", spec.approx_batch_rows()),
            ("updates of the previous day", f"{spec.update_fraction:.0%}"),
            ("late corrections (of a day's rows)", f"{spec.late_fraction:.0%} over {spec.late_window_days} days"),
            ("stale duplicates in a batch", f"{spec.duplicate_fraction:.0%}"),
            ("key style", spec.key_style)]
    return pd.DataFrame(rows, columns=["property", "value"]).set_index("property")


def explain_key(key: str) -> dict[str, str]:
    """The parts of a monotonic drone key: `202401150930_drone0042` -> minute 2024-01-15 09:30, drone0042."""
    match = re.fullmatch(r"(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})_(drone\d{4})", key)
    if not match:
        raise lf.InvalidInputError(f"{key!r} is not a monotonic drone key (YYYYMMDDHHmm_droneNNNN)")
    y, mo, d, h, mi, drone = match.groups()
    return {"key": key, "minute": f"{y}-{mo}-{d} {h}:{mi}", "drone": drone}


def first_rows(df, n: int = 5) -> pd.DataFrame:
    """The `n` smallest-keyed rows of a DataFrame (Spark sorts and limits; only `n` rows reach the driver)."""
    return df.orderBy(datasets.RECORD_KEY).limit(n).toPandas()


def table_layout(table: lf.Table) -> pd.DataFrame:
    """Every file under the table's folder, relative to it, with its kind and size (a listing, no data)."""
    root = Path(table.path)
    rows = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(".hoodie/metadata/"):
            kind = "metadata table"
        elif relative.startswith(".hoodie/"):
            kind = "timeline / properties"
        else:
            kind = "base file"
        rows.append({"file": relative, "kind": kind, "bytes": path.stat().st_size})
    return pd.DataFrame(rows, columns=["file", "kind", "bytes"])


def timeline_frame(table: lf.Table) -> pd.DataFrame:
    """The table's instants, oldest first: time, action, state."""
    return pd.DataFrame([{"instant": i.time, "action": i.action.value, "state": i.state.value}
                         for i in table.timeline()], columns=["instant", "action", "state"])


def footers_frame(table: lf.Table) -> pd.DataFrame:
    """Per latest base file: rows, row groups, size and the footer's min/max record key (footers only)."""
    files = key_ranges_frame(table)
    # In key order: file ids are random, so listing order would differ from run to run.
    files = files.sort_values(["min_key", "file_id"], ignore_index=True)
    return files[["file_id", "instant", "rows", "row_groups", "size_bytes", "min_key", "max_key"]]


def max_overlap(files: pd.DataFrame) -> int:
    """The most base files whose [min_key, max_key] ranges cover one key: 1 means disjoint ranges."""
    events = sorted([(k, 0) for k in files["min_key"].dropna()] + [(k, 1) for k in files["max_key"].dropna()])
    depth = best = 0
    for _, kind in events:  # at equal keys opens (0) come before closes (1): touching ranges overlap
        depth += 1 if kind == 0 else -1
        best = max(best, depth)
    return best


def files_covering(files: pd.DataFrame, key: str) -> int:
    """How many base files' key ranges contain `key`: the candidates range pruning keeps for it."""
    return int(((files["min_key"] <= key) & (files["max_key"] >= key)).sum())


def files_overlapping(files: pd.DataFrame, low: str, high: str) -> int:
    """How many base files' key ranges meet [low, high]: what a key-range query must read."""
    return int(((files["min_key"] <= high) & (files["max_key"] >= low)).sum())


def file_size_for(cached: datasets.CachedDataset, files: int) -> str:
    """A `max_file_size` that splits the history into about `files` base files, as a size string.

    So the same notebook shows several files at `tiny` (a few hundred KB) and at `small` (about
    50 MB). Rounded to whole KB; never below MIN_FILE_SIZE.
    """
    from labformat.config import parse_size

    size = max(datasets.parquet_bytes(cached.history_path) // max(files, 1), parse_size(MIN_FILE_SIZE))
    return f"{size // 1024}KB"


def task_timeline(spark, report: lf.WriteReport, step: str = "write") -> pd.DataFrame:
    """The Spark tasks of one step of a write (from the Spark UI's REST API), ready for `viz.plot_task_timeline`."""
    from labformat.spark import SparkUI

    group = report.step(step).group
    if group is None:
        raise lf.LabformatError(f"step {step!r} of {report.operation} {report.instant} ran no Spark job")
    tasks = SparkUI(spark).task_timeline(group)
    # A slot frees when the executor is done with a task (busy time), before the driver has handled
    # its result (duration): drawn by duration, hand-overs on a busy core would look concurrent.
    return tasks.assign(duration=tasks["busy_s"].fillna(tasks["duration_s"]))


def cores(spark) -> int:
    """Task slots Spark has: the lanes of a task timeline."""
    from labformat.spark import SparkUI

    return SparkUI(spark).total_cores()


def record_summary(lab: str, values: dict[str, Any]) -> None:
    """Keep a notebook's key numbers for the workshop summary (out/summary/<lab>.json)."""
    folder = out_dir() / "summary"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{lab}.json"
    path.write_text(json.dumps({"lab": lab, "preset": preset(), "values": values}, indent=2, default=str) + "\n")
