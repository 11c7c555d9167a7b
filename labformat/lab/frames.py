"""Short frames for the notebooks: a table's files, footers and timeline on disk, a write's tasks and plan from its report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import types as T

import labformat as lf
from labformat.model.enums import BloomFilterTypeCode
from labformat import datasets, workload
from labformat.io.files import read_files
from labformat.model.instant import Instant, State
from labformat.timeline import METADATA_DIR, TIMELINE_DIR


def key_ranges_frame(table: lf.Table, as_of: str | None = None) -> pd.DataFrame:
    """One row per latest base file: path, file_id, partition_path, instant, commit (its name: "bulk
    insert", "upsert 3"), min_key, max_key, rows, row_groups, size_bytes. Reads only metadata."""
    files = workload.base_files(table, as_of)
    names = commit_names(table)
    files.insert(files.columns.get_loc("instant") + 1, "commit", [names.get(i, i) for i in files["instant"]])
    return files


def commit_names(table: lf.Table) -> dict[str, str]:
    """A reader's name for each completed write instant, from its commit metadata: "bulk insert",
    then "upsert 1", "upsert 2", ... (and "delete N"), counted per operation in timeline order."""
    writes = [(i.time, table.commit_metadata(i).operation_type) for i in table.timeline()
              if i.action.value in ("commit", "replacecommit", "deltacommit")]
    return commit_names_of(writes)


def commit_names_of(writes) -> dict[str, str]:
    """`commit_names` from (instant time, operation type) pairs in timeline order; pairs with no
    operation (instants that wrote nothing) are left out."""
    names, counts = {}, {}
    for time, operation_type in writes:
        if not operation_type:
            continue
        operation = operation_type.lower().replace("_", " ")
        counts[operation] = counts.get(operation, 0) + 1
        names[time] = operation if operation == "bulk insert" else f"{operation} {counts[operation]}"
    return names


def table_layout(table: lf.Table) -> pd.DataFrame:
    """Every file under the table's folder, relative to it, with its kind and size (a listing, no data)."""
    rows = []
    for info in sorted(table.storage.list("", recursive=True), key=lambda i: i.path):
        relative = info.path
        if relative.startswith(METADATA_DIR + "/"):
            kind = "metadata table"
        elif relative.startswith(TIMELINE_DIR + "/"):
            kind = "timeline / properties"
        else:
            kind = "base file"
        rows.append({"file": relative, "kind": kind, "bytes": info.size})
    return pd.DataFrame(rows, columns=["file", "kind", "bytes"])


def timeline_frame(table: lf.Table) -> pd.DataFrame:
    """The table's instants, oldest first: time, action, state."""
    return pd.DataFrame([{"instant": i.time, "action": i.action.value, "state": i.state.value}
                         for i in table.timeline()], columns=["instant", "action", "state"])


def base_file_names(report: lf.WriteReport) -> pd.DataFrame:
    """The base files a write made, their names split as Hudi names them:
    `<fileId>_<writeToken>_<instantTime>.parquet`, the write token being `<task partition>-<stage id>-<attempt>`."""
    from labformat.model.base_file import BaseFile

    rows = []
    for f in report.files:
        name = BaseFile.parse(f.path)
        task, stage, attempt = name.write_token.split("-")
        rows.append({"file": f.path.rsplit("/", 1)[-1], "file_id": name.file_id, "task_partition": int(task),
                     "stage": int(stage), "attempt": int(attempt), "instant": name.instant_time})
    frame = pd.DataFrame(rows, columns=["file", "file_id", "task_partition", "stage", "attempt", "instant"])
    return frame.sort_values("task_partition", ignore_index=True)


def timeline_files(table: lf.Table) -> list[str]:
    """The suffixes of the table's own timeline files (`.hoodie/<instant>.<suffix>`), oldest instant first,
    each instant's requested -> inflight -> completed."""
    rank = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}
    found = []
    for info in table.storage.list(TIMELINE_DIR):
        name = info.path.rsplit("/", 1)[-1]
        instant = Instant.parse(name)
        if instant is not None:
            found.append((instant.time, rank[instant.state], name.split(".", 1)[1]))
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
    meta = T.StructType([T.StructField(c, T.StringType()) for c in
                         ("_hoodie_file_name", "_hoodie_record_key", "_hoodie_commit_seqno")])
    rows = read_files(table.spark, table.storage.base_uri, [s.path for s in slices], meta).select(
        "_hoodie_file_name", "_hoodie_record_key",
        F.element_at(F.split("_hoodie_commit_seqno", "_"), -1).cast("long").alias("_row"))
    previous = F.lag("_hoodie_record_key").over(Window.partitionBy("_hoodie_file_name").orderBy("_row"))
    unordered = {r[0] for r in rows.withColumn("_previous", previous)
                 .where(F.col("_previous") > F.col("_hoodie_record_key")).select("_hoodie_file_name").distinct().collect()}
    return {s.file_id: Path(s.path).name not in unordered for s in slices}


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
    batches = [datasets.load_batch(table.spark, cached, day).select(F.lit(day).alias("_day"), key, newest)
               for day in days]
    if not batches:
        return 0
    # One window over every day's batch (a single shuffle), not one per day: 28 days took 16 s that way.
    every = reduce(lambda a, b: a.unionByName(b), batches)
    latest = F.max(newest).over(Window.partitionBy("_day", key))
    stale = every.withColumn("_latest", latest).where(F.col(newest) < F.col("_latest")).select(key, newest)
    return table.read().select(key, newest).join(stale, on=[key, newest]).count()


def task_timeline(spark, report: lf.WriteReport, step: str = "write") -> pd.DataFrame:
    """The Spark tasks of one step of a write (from the Spark UI's REST API), ready for `viz.plot_task_timeline`."""
    from labformat.spark import SparkUI

    ui = SparkUI(spark)  # first: on Spark Connect it says the timeline is not available there
    group = report.step(step).group
    if group is None:
        raise lf.LabformatError(f"step {step!r} of {report.operation} {report.instant} ran no Spark job")
    tasks = ui.task_timeline(group)
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


def sizing_details(report: lf.WriteReport) -> pd.DataFrame:
    """Steps 4-6 of one upsert as it saw them: small files found, the record-size estimate and its source,
    the file groups it wrote to."""
    details = report.details
    rows = [("small files found (step 4)", details.small_files),
            ("bytes per record, estimated (step 5)", details.record_size),
            ("estimate taken from", details.record_size_source),
            ("file groups written (step 7)", details.write_targets),
            ("of which new file groups", report.files_created)]
    return pd.DataFrame(rows, columns=["step", "value"]).set_index("step")


def small_file_writes(report: lf.WriteReport, options: dict[str, Any]) -> list:
    """The FileReports of an upsert's existing file groups that were small files before it (below
    `small_file_limit` in `options`; none when it is 0): step 4's finds, as the write's stats saw them."""
    from labformat.config import parse_size

    limit = parse_size(options.get("small_file_limit", 0))
    return [f for f in report.files if not f.created and limit > 0 and f.prev_size_bytes < limit]


def insert_plan(report: lf.WriteReport, options: dict[str, Any]) -> pd.DataFrame:
    """Per base file an upsert wrote: was it a small file, a new file group, how many inserts and updates
    went in, its size before and after (from the write tasks' stats, in KB; sizes move by a few bytes
    from run to run, the counts do not)."""
    small = {id(f) for f in small_file_writes(report, options)}
    rows = [{"created": f.created,
             "small_file": id(f) in small,
             "kb_before": round(f.prev_size_bytes / 1024, 1), "inserts": f.inserts, "updates": f.updates,
             "kb_after": round(f.size_bytes / 1024, 1), "min_key": f.min_key, "max_key": f.max_key}
            for f in report.files]
    frame = pd.DataFrame(rows, columns=["created", "small_file", "kb_before", "inserts", "updates",
                                        "kb_after", "min_key", "max_key"])
    # Old file groups in key order, then the new ones: file ids are random, keys and counts are not.
    return frame.sort_values(["created", "min_key", "max_key", "inserts"], ignore_index=True)


def bloom_filter_bytes(options: dict[str, Any]) -> int:
    """Bytes of the record-key bloom filter every base file written with `options` carries in its footer
    (base64, as Hudi stores it), whatever rows the file holds: sized by bloom_num_entries and bloom_fpp."""
    from labformat.config import option
    from labformat.fileformat.bloom_filter import BloomSpec

    def value(name):
        return options.get(name, option(name).default)

    spec = BloomSpec(type_code=value("bloom_filter_type"), num_entries=int(value("bloom_num_entries")),
                     fpp=float(value("bloom_fpp")))
    return len(spec.build([]).to_base64())


def bloom_filters_frame(specs: dict[str, Any], keys: int) -> pd.DataFrame:
    """Per named `BloomSpec`, once it holds `keys` keys: its type, num_entries, fpp, the rows it has
    (DYNAMIC_V0 adds one per num_entries keys, up to its max entries), its predicted false-positive
    rate and the KB its filter takes in a footer (base64)."""
    rows = []
    for name, spec in specs.items():
        sizes = spec.row_sizes(keys)
        encoded = len(spec.build([f"{i}" for i in range(keys)]).to_base64()) if spec.type_code != BloomFilterTypeCode.SIMPLE \
            else len(spec.build([]).to_base64())
        rows.append({"filter": name, "type": spec.type_code, "num_entries": spec.num_entries, "fpp": spec.fpp,
                     "keys held": keys, "rows": len(sizes), "predicted_fpp": f"{spec.predicted_fpp(keys):.2g}",
                     "footer_kb": round(encoded / 1024, 1)})
    return pd.DataFrame(rows).set_index("filter")


def small_files_found(report: lf.WriteReport, options: dict[str, Any]) -> pd.DataFrame:
    """Step 4 as an upsert saw it: the base files below `small_file_limit` before it wrote (its
    candidates for inserts), smallest first, with their size in bytes and key range, beside
    `max_file_size` (what step 6 fills them up to). Sizes come from the write's own file stats."""
    from labformat.config import parse_size

    most = parse_size(options.get("max_file_size", 0))
    rows = [{"bytes_before": f.prev_size_bytes, "max_file_size": most, "min_key": f.min_key}
            for f in small_file_writes(report, options)]
    frame = pd.DataFrame(rows, columns=["bytes_before", "max_file_size", "min_key"])
    return frame.sort_values(["bytes_before", "min_key"], ignore_index=True)


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


def projection_check(tasks: pd.DataFrame, cores: int) -> pd.DataFrame:
    """The projection's error where it can be measured: `tasks` projected onto the `cores` they ran on,
    beside the span they really took (`projection.against_measurement`)."""
    from labformat.lab.projection import against_measurement

    return against_measurement(tasks, cores).set_index("cores").round({"measured_s": 3, "projected_s": 3, "error_pct": 1})
