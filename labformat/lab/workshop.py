"""The workshop notebooks' helpers: the preset and Spark session a notebook runs with, scratch tables, short frames of what happened."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import labformat as lf
from labformat import datasets
from labformat.datasets.spec import MINUTES_PER_DAY
from labformat.lab.viz import key_ranges_frame
from labformat.timeline import METADATA_DIR, TIMELINE_DIR

# The headless runner and the tests set these; a learner's JupyterLab leaves them unset.
PRESET_ENV = "LABFORMAT_PRESET"
OUT_ENV = "LABFORMAT_OUT"
DEFAULT_PRESET = "small"
# Below this a "file" is a few row groups of a handful of rows: nothing a learner should tune towards.
MIN_FILE_SIZE = "32KB"
# Hudi's defaults are sized for a cluster: base files up to 120 MB, small below 100 MB, bloom
# filters for 60,000 keys. The workshop keeps the option names and the 120:100 ratio, and scales
# the sizes to the laptop's data: the history is bulk inserted as HISTORY_FILES base files.
HUDI_MAX_FILE_SIZE = 120 * 1024**2
HUDI_SMALL_FILE_LIMIT = 100 * 1024**2
HUDI_BLOOM_NUM_ENTRIES = 60_000
HISTORY_FILES = 32
# max_file_size sits this far above the smallest bulk-inserted file: every history file is then
# at least 87% of the maximum, above the small-file limit (83%), so upserts never pad the
# history's files with new keys (a padded file's key range would span weeks).
HEADROOM = 1.15
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


def scratch(name: str, workdir: str | os.PathLike | None = None) -> Path:
    """An empty folder for a notebook's table `name`, under `workdir` (a test's) or else
    out/work/<preset>/ (emptied first)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise lf.ConfigError(f"scratch table names are letters, digits, '_', '.', '-'; got {name!r}")
    path = (Path(workdir) if workdir is not None else out_dir() / "work" / preset()) / name
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
        if relative.startswith(METADATA_DIR + "/"):
            kind = "metadata table"
        elif relative.startswith(TIMELINE_DIR + "/"):
            kind = "timeline / properties"
        else:
            kind = "base file"
        rows.append({"file": relative, "kind": kind, "bytes": path.stat().st_size})
    return pd.DataFrame(rows, columns=["file", "kind", "bytes"])


def timeline_frame(table: lf.Table) -> pd.DataFrame:
    """The table's instants, oldest first: time, action, state."""
    return pd.DataFrame([{"instant": i.time, "action": i.action.value, "state": i.state.value}
                         for i in table.timeline()], columns=["instant", "action", "state"])


def timeline_files(table: lf.Table) -> list[str]:
    """The suffixes of the table's own timeline files (`.hoodie/<instant>.<suffix>`), oldest instant first,
    each instant's requested -> inflight -> completed."""
    rank = {"requested": 0, "inflight": 1}
    found = []
    for path in (Path(table.path) / TIMELINE_DIR).iterdir():
        match = re.fullmatch(r"(\d{17})\.(.+)", path.name)
        if match and path.is_file():
            instant, suffix = match.groups()
            found.append((instant, rank.get(suffix.rsplit(".", 1)[-1], 2), suffix))
    return [suffix for _, _, suffix in sorted(found)]


def footers_frame(table: lf.Table) -> pd.DataFrame:
    """Per latest base file: rows, row groups, size and the footer's min/max record key (footers only)."""
    files = key_ranges_frame(table)
    # In key order: file ids are random, so listing order would differ from run to run.
    files = files.sort_values(["min_key", "file_id"], ignore_index=True)
    return files[["file_id", "instant", "commit", "rows", "row_groups", "size_bytes", "min_key", "max_key"]]


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


@dataclass(frozen=True)
class ScaledSizes:
    """Hudi's file-size options scaled down to this preset's data, from the base files a bulk insert wrote."""

    history_files: int
    smallest_file_bytes: int
    rows_per_file: int
    max_file_size: int
    small_file_limit: int
    bloom_num_entries: int

    @property
    def scale(self) -> float:
        """How many times smaller than Hudi's 120 MB the workshop's max_file_size is."""
        return HUDI_MAX_FILE_SIZE / self.max_file_size

    @property
    def options(self) -> dict[str, int]:
        """The write options every workshop upsert uses (Hudi's names, scaled sizes)."""
        return {"max_file_size": self.max_file_size, "small_file_limit": self.small_file_limit,
                "bloom_num_entries": self.bloom_num_entries}

    def frame(self) -> pd.DataFrame:
        """Hudi's default beside the workshop's value, option by option."""
        rows = [("hoodie.parquet.max.file.size", f"{HUDI_MAX_FILE_SIZE / 1024**2:.0f} MB",
                 _kb(self.max_file_size)),
                ("hoodie.parquet.small.file.limit", f"{HUDI_SMALL_FILE_LIMIT / 1024**2:.0f} MB",
                 _kb(self.small_file_limit)),
                ("hoodie.index.bloom.num_entries", f"{HUDI_BLOOM_NUM_ENTRIES:,}", f"{self.bloom_num_entries:,}")]
        return pd.DataFrame(rows, columns=["option", "Hudi default", "this workshop"]).set_index("option")


def _kb(n: int) -> str:
    return f"{n / 1024:,.0f} KB"


def history_options(spec: datasets.DatasetSpec, files: int = HISTORY_FILES) -> dict[str, Any]:
    """The workshop's bulk insert of the history: GLOBAL_SORT over `files` write tasks, one base file each
    (Hudi's 120 MB maximum is far above a task's share), bloom filters sized for a file's keys."""
    return {"bulk_insert_sort_mode": "GLOBAL_SORT", "bulk_insert_parallelism": files,
            "bloom_num_entries": max(1, spec.history_rows // files)}


def scaled_sizes(table: lf.Table) -> ScaledSizes:
    """Scale Hudi's sizes to `table`'s bulk-inserted files: max_file_size 15% above the smallest of them,
    small_file_limit at Hudi's 100/120 of it (so none of them is small), bloom filters sized for a file's keys."""
    files = key_ranges_frame(table)
    if files.empty:
        raise lf.LabformatError(f"{table.path} has no base files to scale the file sizes to")
    smallest = int(files["size_bytes"].min())
    rows = int(files["rows"].median())
    max_size = int(smallest * HEADROOM)
    return ScaledSizes(len(files), smallest, rows, max_size, max_size * HUDI_SMALL_FILE_LIMIT // HUDI_MAX_FILE_SIZE,
                       max(1, rows))


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


def write_stage(tasks: pd.DataFrame) -> pd.DataFrame:
    """The tasks of the stage that writes base files: what "write tasks" means (not every stage of the write step)."""
    from labformat.lab.projection import write_stage_tasks

    stage = write_stage_tasks(tasks).copy()
    if stage.empty:
        return stage
    # Seconds from the stage's own first launch, so it lines up with its projection (which starts at 0).
    shift = float(stage["launch"].min())
    for column in ("launch", "end", "busy_end"):
        if column in stage.columns:
            stage[column] = stage[column] - shift
    return stage


def project(tasks: pd.DataFrame, cores: int) -> pd.DataFrame:
    """The measured `tasks` laid onto `cores` lanes as Spark would schedule them: a projection, not a measurement."""
    from labformat.lab.projection import project as _project

    return _project(tasks, cores)


def span_seconds(tasks: pd.DataFrame) -> float:
    """Seconds from the first task's launch to the last task's end (0 for no tasks)."""
    if tasks.empty:
        return 0.0
    return float((tasks["launch"] + tasks["duration"]).max() - tasks["launch"].min())


def spread(frame: pd.DataFrame, by: str, columns: list[str]) -> pd.DataFrame:
    """Per value of `by`, each timing column as "median (min-max)" over the repeated runs, and the run count."""
    grouped = frame.groupby(by)
    out = pd.DataFrame({column: grouped[column].agg(
        lambda v: f"{v.median():.2f} ({v.min():.2f}-{v.max():.2f})") for column in columns})
    out["runs"] = grouped.size()
    return out


def files_in_key_order(table: lf.Table) -> dict[str, bool]:
    """Per latest base file (by file id): are its rows stored in record-key order?

    A Spark job: each row's position in its file comes from its commit seqno (`<instant>_<task>_<n>`);
    only the file ids with a row out of order reach the driver.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    slices = table.file_slices()
    if not slices:
        return {}
    rows = table.spark.read.parquet(*[table.storage.spark_path(s.path) for s in slices]).select(
        "_hoodie_file_name", "_hoodie_record_key",
        F.element_at(F.split("_hoodie_commit_seqno", "_"), -1).cast("long").alias("_row"))
    previous = F.lag("_hoodie_record_key").over(Window.partitionBy("_hoodie_file_name").orderBy("_row"))
    unordered = {r[0] for r in rows.withColumn("_previous", previous)
                 .where(F.col("_previous") > F.col("_hoodie_record_key")).select("_hoodie_file_name").distinct().collect()}
    return {s.file_id: Path(s.path).name not in unordered for s in slices}


def sizing_details(report: lf.WriteReport) -> pd.DataFrame:
    """Steps 4-6 of one upsert as it saw them: small files found, the record-size estimate and its source,
    the file groups it wrote to."""
    details = report.details
    rows = [("small files found (step 4)", details.get("small_files")),
            ("bytes per record, estimated (step 5)", details.get("record_size")),
            ("estimate taken from", details.get("record_size_source")),
            ("file groups written (step 7)", details.get("write_targets")),
            ("of which new file groups", report.files_created)]
    return pd.DataFrame(rows, columns=["step", "value"]).set_index("step")


def insert_plan(report: lf.WriteReport, options: dict[str, Any]) -> pd.DataFrame:
    """Per base file an upsert wrote: was it a small file, a new file group, how many inserts and updates
    went in, its size before and after (from the write tasks' stats, in KB; sizes move by a few bytes
    from run to run, the counts do not)."""
    from labformat.config import parse_size

    limit = parse_size(options.get("small_file_limit", 0))
    rows = [{"created": f.created,
             "small_file": (not f.created) and limit > 0 and f.prev_size_bytes < limit,
             "kb_before": round(f.prev_size_bytes / 1024, 1), "inserts": f.inserts, "updates": f.updates,
             "kb_after": round(f.size_bytes / 1024, 1), "min_key": f.min_key, "max_key": f.max_key}
            for f in report.files]
    frame = pd.DataFrame(rows, columns=["created", "small_file", "kb_before", "inserts", "updates",
                                        "kb_after", "min_key", "max_key"])
    # Old file groups in key order, then the new ones: file ids are random, keys and counts are not.
    return frame.sort_values(["created", "min_key", "max_key", "inserts"], ignore_index=True)


def compare_days(days: dict[str, pd.Series], columns: list[str]) -> pd.DataFrame:
    """Named upsert days (rows of `DailyRun.to_pandas()`) side by side, one column each."""
    return pd.DataFrame({name: [day[c] for c in columns] for name, day in days.items()}, index=columns)


def shuffle_waves(steps: dict[int, pd.DataFrame], cores: int) -> pd.DataFrame:
    """Per deduplicate run (keyed by its input partitions): the tasks of its shuffle stage, the waves they
    need on `cores` cores, and the cores idle in the last wave."""
    from labformat.lab.projection import task_stage_labels

    rows = []
    for key, tasks in steps.items():
        labels = task_stage_labels(tasks)
        shuffle = tasks[labels.str.contains("keep newest per key")]
        n = len(shuffle)
        waves = -(-n // cores)
        rows.append({"input_partitions": key, "shuffle_tasks": n, "waves_on_cores": waves,
                     "idle_lanes_in_last_wave": waves * cores - n})
    return pd.DataFrame(rows).set_index("input_partitions")


def stale_duplicates_kept(table: lf.Table, spec: datasets.DatasetSpec, days) -> int:
    """How many stale in-batch duplicates (a key's older version within one day's batch) the table holds.

    Spark jobs over the cached batches and the table; only the count reaches the driver. 0 means
    the precombine field always kept the newest version.
    """
    from functools import reduce

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cached = datasets.generate(table.spark, spec)
    key, newest = datasets.RECORD_KEY, datasets.PRECOMBINE_FIELD
    per_day = []
    for day in days:
        batch = datasets.load_batch(table.spark, cached, day).select(key, newest)
        latest = F.max(newest).over(Window.partitionBy(key))
        per_day.append(batch.withColumn("_latest", latest).where(F.col(newest) < F.col("_latest")).drop("_latest"))
    if not per_day:
        return 0
    stale = reduce(lambda a, b: a.unionByName(b), per_day)
    return table.read().select(key, newest).join(stale, on=[key, newest]).count()


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
