"""The workshop notebooks' session and dataset: a notebook's preset and Spark session, its scratch tables and where it writes."""

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

# The headless runner and the tests set these; a learner's JupyterLab leaves them unset.
PRESET_ENV = "LABFORMAT_PRESET"
OUT_ENV = "LABFORMAT_OUT"
# Where the notebooks' tables live instead of out/work: a folder or `s3://bucket/prefix` (the main
# job's `--storage s3` sets it, and the AWS_* variables its tables are opened with).
TABLES_ENV = "LABFORMAT_TABLES"
DEFAULT_PRESET = "small"
REPO_ROOT = Path(__file__).resolve().parents[2]


def preset() -> str:
    """The dataset preset this notebook runs at: $LABFORMAT_PRESET, else `small`."""
    name = os.environ.get(PRESET_ENV, DEFAULT_PRESET)
    datasets.spec(name)  # an unknown name fails here, naming the presets, not deep in a cell
    return name


TIMED_RUNS = 5  # a timing's repetitions in a lesson: interleaved, after a warm-up, median and spread shown


def timed_runs() -> int:
    """How many times a notebook times each variant: `TIMED_RUNS` at every preset but `tiny`, where
    the tests check the counts and outputs only (a timing there decides nothing) and one run each
    keeps the suite short."""
    return 1 if preset() == "tiny" else TIMED_RUNS


def runs(n: int, kind: str = "") -> str:
    """'5 runs', '1 warm run': a count of timed runs in a sentence or a chart's title."""
    return f"{n} {kind + ' ' if kind else ''}run{'' if n == 1 else 's'}"


def runs_each(n: int | None = None) -> str:
    """'5 runs each' ('1 run each' at `tiny`): a timing chart's title."""
    return f"{runs(timed_runs() if n is None else n)} each"


def progress() -> bool:
    """Whether the notebook's long cells show progress bars: at every preset but `tiny`, whose cells
    take seconds and whose saved outputs nbval compares (a bar's widget differs every run)."""
    return preset() != "tiny"


def session():
    """The notebook's SparkSession: $LABFORMAT_SPARK_MASTER (else every local core), JVM output in a log file."""
    return lf.spark_session(app_name="labformat-workshop")


def out_dir() -> Path:
    """Where the workshop writes: $LABFORMAT_OUT, else `out/` at the repository root."""
    return Path(os.environ.get(OUT_ENV) or REPO_ROOT / "out")


def scratch(name: str, workdir: str | os.PathLike | None = None, local: bool = False) -> Path | str:
    """An empty location for a notebook's table `name` (emptied first): under `workdir` (a test's),
    else under $LABFORMAT_TABLES/<preset>/ (an `s3://` URI there gives a URI here), else under
    out/work/<preset>/. `local`: always a folder on this disk (for other formats' tables)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise lf.ConfigError(f"scratch table names are letters, digits, '_', '.', '-'; got {name!r}")
    root = Path(workdir) if workdir is not None else tables_root(preset(), out_dir(), local)
    if isinstance(root, str):  # a URI
        drop(f"{root}/{name}")
        return f"{root}/{name}"
    path = root / name
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def tables_root(preset_name: str, out: Path, local: bool = False) -> Path | str:
    """Where the notebooks' scratch tables of a preset go: $LABFORMAT_TABLES/<preset> (a folder, or
    an `s3://` URI unless `local`), else <out>/work/<preset>."""
    tables = os.environ.get(TABLES_ENV)
    if tables and "://" in tables:
        if not local:
            return f"{tables.rstrip('/')}/{preset_name}"
    elif tables:
        return Path(tables) / preset_name
    return out / "work" / preset_name


def drop(path: str | os.PathLike) -> None:
    """Delete a scratch table and everything under it, on a local disk or S3."""
    from labformat.storage import Storage

    Storage(path).delete_dir("")


def copy_table(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Copy every file of the table at `source` to `target` (an emptied scratch location)."""
    import pyarrow.fs as pafs

    from labformat.storage import Storage

    src, dst = Storage(source), Storage(target)
    pafs.copy_files(src.root, dst.root, source_filesystem=src.fs, destination_filesystem=dst.fs, use_threads=False)


def new_table(spark, name: str, **options) -> lf.Table:
    """A fresh drone table at `scratch(name)`: record key `record_key`, precombine `updated_at`, no partitions."""
    return lf.Table.create(spark, scratch(name), record_key=datasets.RECORD_KEY,
                           precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None, options=options)


def environment(spark) -> pd.DataFrame:
    """What this lab runs on: Python, Java, Spark, pyarrow, pandas versions and the cores Spark uses."""
    import pyarrow

    from labformat.spark import compat
    from labformat.spark.session import check_java

    rows = [("Python", platform.python_version()), ("Java (major)", str(check_java())),
            ("Spark", spark.version), ("pyarrow", pyarrow.__version__), ("pandas", pd.__version__),
            ("labformat", lf.__version__), ("Spark master", compat.master(spark)),
            ("cores (default parallelism)", str(compat.default_parallelism(spark)))]
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
