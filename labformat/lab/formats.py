"""Seed 002 in the lab (notebook 08): the same days written by labformat, delta-rs and pyiceberg; what each keeps beside its data.

Each format writes the same history and daily batches (the benchmark's engines, `labformat.bench.engines`)
at its merge-on-read setting where the library has one: labformat a MERGE_ON_READ table compacted
inline every `COMPACT_EVERY` delta commits (Hudi's default); pyiceberg a table whose updates, deletes and
merges are set to `merge-on-read`, each day a delete of the batch's keys and an append in one
transaction; delta-rs a plain table checkpointed every `CHECKPOINT_INTERVAL` commits (Delta Lake's
default), and beside it, for day 1 only, a table with deletion vectors enabled (delta-rs's own planner
refuses to read such a table). After the load and after every day, the metadata each keeps is
counted from its folder (`.hoodie/`, `_delta_log/`, `metadata/`), with the files a query planner
must read to find the data files (each format's protocol applied to the table's state: labformat's
latest metadata-table snapshots, Delta's last checkpoint and the commits after it, Iceberg's
current metadata file, manifest list and manifests), and what the day's write did to data files, by
each library's own report. Then the same queries on the three tables: data files planned, of all.

The days are the notebook's cheapest commits: each day's batch is cut to `BATCH_DRONES` drones (its new
readings, its corrections of the day before and its stale duplicates, as the full batch has them), so
that twenty of them cost little while each is still an upsert that updates existing files.
"""

from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from labformat import datasets
from labformat.bench import engines
from labformat.bench.queries import arrow_filter, iceberg_filter, parse_condition
from labformat.lab import workshop
from labformat.metadata.table import COLUMN_STATS, FILES, MetadataReader
from labformat.timeline import METADATA_DIR

FORMATS = ("labformat", "delta-rs", "pyiceberg")
# Enough daily commits for two Delta checkpoints and four Hudi compactions at their defaults.
DAYS = 20
# Delta Lake's default `delta.checkpointInterval` (Spark's writer: a checkpoint at versions 10, 20, ...).
# delta-rs's own default is 100 (measured with deltalake 1.6: its first checkpoint is version 99), which
# a month of daily commits never reaches; the notebook sets Delta Lake's 10 on the delta-rs table.
CHECKPOINT_INTERVAL = 10
DELTA_RS_DEFAULT_INTERVAL = 100
# Hudi's `hoodie.compact.inline.max.delta.commits` default.
COMPACT_EVERY = 5
# Drones kept in each day's batch: a small, cheap commit that still corrects rows of existing files.
BATCH_DRONES = 2


def dataset(spark, preset: str, days: int = DAYS) -> datasets.CachedDataset:
    """The preset's cached dataset with at least `days` daily batches (`tiny` has 3: a variant of it
    with `days`, generated once)."""
    spec = datasets.spec(preset)
    if spec.batch_days < days:
        spec = datasets.spec(preset, batch_days=days)
    return datasets.generate(spark, spec)


def small_batches(cached: datasets.CachedDataset, days: int, folder: Path,
                  drones: int = BATCH_DRONES) -> datasets.CachedDataset:
    """`cached` with each of its first `days` batches cut to the rows of its first `drones` drones
    (written once under `folder`): the same kinds of rows, a fraction of them."""
    import dataclasses

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    keep = pa.array([f"drone{i:04d}" for i in range(drones)])
    paths = []
    for day in range(1, days + 1):
        target = Path(folder) / f"batch_{day:03d}"
        target.mkdir(parents=True, exist_ok=True)
        rows = engines.read_parquet_folder(cached.batch_path(day))
        pq.write_table(rows.filter(pc.is_in(rows.column("drone_id"), value_set=keep)), target / "part-0.parquet")
        paths.append(str(target))
    return dataclasses.replace(cached, batch_paths=paths + list(cached.batch_paths[days:]))


class _Labformat(engines.LabformatMor):
    """labformat-mor with inline compaction every `compact_every` delta commits."""

    compact_every = COMPACT_EVERY

    def upsert(self, day: int) -> None:
        batch = datasets.load_batch(self.spark, self.workload.cached, day)
        self._report = self.table().upsert(batch, {**self.workload.write_options, "hoodie.compact.inline": True,
                                                    "hoodie.compact.inline.max.delta.commits": self.compact_every})

    def after_day(self, day: int) -> dict:
        report = self._report
        compaction = getattr(report, "compaction", None)
        return {"data files rewritten": report.files_rewritten, "data files added": report.files_created,
                "log or delete files added": report.log_files_written,
                "compacted": compaction is not None and compaction.instant is not None}


class _Delta(engines.DeltaRs):
    """delta-rs with a checkpoint every `checkpoint_interval` commits."""

    checkpoint_interval = CHECKPOINT_INTERVAL

    def table_configuration(self) -> dict[str, str]:
        return {"delta.checkpointInterval": str(self.checkpoint_interval)}

    def after_day(self, day: int) -> dict:
        m = self._metrics
        return {"data files rewritten": m["num_target_files_removed"], "data files added": m["num_target_files_added"],
                "log or delete files added": m.get("num_deletion_vectors_added", 0),
                "rows copied": m["num_target_rows_copied"], "checkpointed": day == _last_checkpoint(self)}


def _last_checkpoint(engine) -> int | None:
    """The version `_last_checkpoint` names (a commit's number: the load is version 0), None before one."""
    import json

    pointer = engine.table_path / "_delta_log" / "_last_checkpoint"
    return json.loads(pointer.read_text())["version"] if pointer.exists() else None


class _DeltaDeletionVectors(_Delta):
    """delta-rs on a table with deletion vectors enabled (Delta's merge-on-read). Kept apart from the
    days' table: delta-rs's pyarrow dataset, which plans its queries, refuses such tables."""

    def table_configuration(self) -> dict[str, str]:
        return {**super().table_configuration(), "delta.enableDeletionVectors": "true"}


class _Iceberg(engines.PyIceberg):
    """pyiceberg with `write.{update,delete,merge}.mode=merge-on-read`; what it warns is kept."""

    table_properties = {"write.update.mode": "merge-on-read", "write.delete.mode": "merge-on-read",
                        "write.merge.mode": "merge-on-read"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.warnings: list[str] = []

    def upsert(self, day: int) -> None:
        """The day's rows replace those with the same keys: a delete of the keys and an append in one
        transaction, one commit (what `Table.upsert` commits too, which compares every column in Python
        first: 20 s a day at `small` against 2 s, measured)."""
        from pyiceberg.expressions import In

        batch = engines.deduplicate_arrow(engines.read_parquet_folder(self.workload.cached.batch_path(day)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with self.catalog().load_table(self.identifier).transaction() as tx:
                tx.delete(In(engines.KEY, batch.column(engines.KEY).to_pylist()))
                tx.append(batch)
        self.warnings += [str(w.message) for w in caught]

    def after_day(self, day: int) -> dict:
        snapshots = self.catalog().load_table(self.identifier).snapshots()
        ids = [s.snapshot_id for s in snapshots]
        new = [s.summary.additional_properties for s in snapshots[ids.index(self._before) + 1:]]
        total = lambda key: sum(int(summary.get(key, 0)) for summary in new)  # noqa: E731
        return {"data files rewritten": total("deleted-data-files"), "data files added": total("added-data-files"),
                "log or delete files added": total("added-delete-files"), "snapshots": len(new)}


# ---- what each format keeps beside its data ------------------------------------------------------

def _tally(folder: Path, kind_of) -> dict[str, tuple[int, int]]:
    """kind -> (files, bytes) of every file under `folder`, each file's kind from `kind_of(path)`."""
    kinds: dict[str, tuple[int, int]] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            n, b = kinds.get(kind_of(path), (0, 0))
            kinds[kind_of(path)] = (n + 1, b + path.stat().st_size)
    return kinds


def labformat_metadata(engine: _Labformat) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """(kind -> (files, bytes)) under `.hoodie/`, and the files a planner reads: hoodie.properties and
    the metadata table's latest `files` and `column_stats` snapshots (after listing the timeline)."""
    hoodie = engine.table_path / ".hoodie"

    def kind_of(path: Path) -> str:
        rel = path.relative_to(hoodie).parts
        return "metadata table" if rel[0] == Path(METADATA_DIR).name else "timeline" if len(rel) == 1 else "other"

    kinds = _tally(hoodie, kind_of)
    table = engine.table()
    reader = MetadataReader(table.storage, table.active_timeline)
    planner = ["hoodie.properties"] + [p for p in (reader.latest(FILES), reader.latest(COLUMN_STATS)) if p]
    return kinds, planner


def delta_metadata(engine: _Delta) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """(kind -> (files, bytes)) under `_delta_log/`, and the files a reader reads to build the snapshot:
    `_last_checkpoint`, the checkpoint it names and every commit after it (every commit when none)."""
    import json

    log = engine.table_path / "_delta_log"
    kinds = _tally(log, lambda path: "checkpoint" if ".checkpoint" in path.name or path.name == "_last_checkpoint"
                   else "commit" if path.suffix == ".json" else "other")
    pointer = log / "_last_checkpoint"
    since = -1
    planner = []
    if pointer.exists():
        since = json.loads(pointer.read_text())["version"]
        planner = ["_last_checkpoint"] + sorted(p.name for p in log.glob(f"{since:020d}.checkpoint*.parquet"))
    planner += sorted(p.name for p in log.glob("*.json") if int(p.stem) > since)
    return kinds, planner


def iceberg_metadata(engine: _Iceberg) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """(kind -> (files, bytes)) under the table's `metadata/`, and the files a planner reads: the
    catalog's current metadata file, its snapshot's manifest list and every manifest it lists."""
    table = engine.catalog().load_table(engine.identifier)
    folder = Path(table.metadata_location.removeprefix("file://")).parent
    kinds = _tally(folder, lambda path: "table metadata" if path.name.endswith(".metadata.json") else
                   "manifest list" if path.name.startswith("snap-") else
                   "manifest" if path.suffix == ".avro" else "other")
    snapshot = table.current_snapshot()
    planner = [Path(table.metadata_location).name, Path(snapshot.manifest_list).name] + \
        [Path(m.manifest_path).name for m in snapshot.manifests(table.io)]
    return kinds, planner


_INVENTORY = {"labformat": labformat_metadata, "delta-rs": delta_metadata, "pyiceberg": iceberg_metadata}


@dataclass(frozen=True)
class ThreeFormats:
    """The same days in three formats: a row per (format, commit) and a row per (format, query)."""

    commits: pd.DataFrame  # format, commit (0: the load), write s, metadata kinds, planner files, the day's data files
    queries: pd.DataFrame  # format, query, files planned, data files, rows, planning seconds (median)
    notes: dict[str, list[str]]  # format -> what the library said (pyiceberg's warnings), deduplicated
    deletion_vectors_day: dict  # day 1 on delta-rs with deletion vectors enabled: its MERGE's report
    checkpoint_interval: int = CHECKPOINT_INTERVAL  # delta-rs: commits between checkpoints
    compact_every: int = COMPACT_EVERY  # labformat: delta commits between inline compactions

    def checkpoints(self) -> list[int]:
        """The commits after which delta-rs wrote a checkpoint."""
        return self._marked("delta-rs", "checkpointed")

    def compactions(self) -> list[int]:
        """The commits that compacted labformat's merge-on-read table inline."""
        return self._marked("labformat", "compacted")

    def _marked(self, fmt: str, column: str) -> list[int]:
        if column not in self.commits.columns:
            return []
        rows = self.commits[(self.commits["format"] == fmt) & self.commits[column].eq(True)]
        return [int(c) for c in rows["commit"]]

    def kept(self) -> pd.DataFrame:
        """Metadata files kept per commit, one column per format."""
        return self.commits.pivot(index="commit", columns="format", values="metadata files")[list(FORMATS)]

    def metadata(self) -> pd.DataFrame:
        """Metadata files and KB per commit, one column per format."""
        return pd.concat({value: self.commits.pivot(index="commit", columns="format", values=value)[list(FORMATS)]
                          for value in ("metadata files", "metadata KB")}, axis=1)

    def planner(self) -> pd.DataFrame:
        """Files a planner reads per commit, one column per format."""
        return self.commits.pivot(index="commit", columns="format", values="planner files")[list(FORMATS)]

    def merge_on_read(self) -> pd.DataFrame:
        """Day 1's write in each format at its merge-on-read setting: data files rewritten and added,
        log or delete files added (delta-rs: the deletion-vector table's MERGE)."""
        columns = ["data files rewritten", "data files added", "log or delete files added"]
        day1 = self.commits[self.commits["commit"] == 1].set_index("format")[columns]
        day1.loc["delta-rs"] = [self.deletion_vectors_day[c] for c in columns]
        settings = {"labformat": "hoodie.table.type=MERGE_ON_READ",
                    "delta-rs": "delta.enableDeletionVectors=true",
                    "pyiceberg": "write.update.mode=merge-on-read"}
        return day1.reindex(list(FORMATS)).assign(setting=[settings[f] for f in FORMATS])[["setting", *columns]]

    def last(self, fmt: str) -> pd.Series:
        """`fmt`'s row after the last commit."""
        rows = self.commits[self.commits["format"] == fmt]
        return rows.loc[rows["commit"].idxmax()]

    def same_rows(self) -> bool:
        """Did every query return the same rows in every format?"""
        return bool((self.queries.groupby("query")["rows"].nunique() == 1).all())


def _engines(workload, root: Path, spark) -> dict[str, engines.Engine]:
    return {"labformat": _Labformat(workload, root / "labformat", spark),
            "delta-rs": _Delta(workload, root / "delta-rs"), "pyiceberg": _Iceberg(workload, root / "pyiceberg")}


def plan_query(fmt: str, engine: engines.Engine, condition: str) -> tuple[int, int, float]:
    """(data files planned for `condition`, data files in the snapshot, planning seconds) in one format:
    labformat's own scan report (its planning time, metadata table and column stats); delta-rs's
    table opened and its files' log statistics matched by pyarrow; pyiceberg's table loaded from its
    catalog and scanned (`plan_files`: manifests and column metrics)."""
    terms = parse_condition(condition)
    if fmt == "labformat":
        _, scan = engine.table().query(condition)
        return scan.funnel.files_read, scan.funnel.files_in_snapshot, scan.planning_seconds
    start = time.perf_counter()
    if fmt == "delta-rs":
        from deltalake import DeltaTable

        dataset = DeltaTable(str(engine.table_path)).to_pyarrow_dataset()
        planned = len(list(dataset.get_fragments(filter=arrow_filter(terms, dataset.schema))))
        seconds = time.perf_counter() - start
        return planned, len(list(dataset.get_fragments())), seconds
    table = engine.catalog().load_table(engine.identifier)
    planned = len(list(table.scan(row_filter=iceberg_filter(terms, table.schema().as_arrow())).plan_files()))
    seconds = time.perf_counter() - start
    return planned, len(list(table.scan().plan_files())), seconds


def three_formats(spark, cached: datasets.CachedDataset, name: str, days: int, queries: dict[str, str],
                  repeats: int = 3, progress: bool = False, workdir=None, checkpoint_interval: int = CHECKPOINT_INTERVAL,
                  compact_every: int = COMPACT_EVERY, batch_drones: int | None = BATCH_DRONES) -> ThreeFormats:
    """Load the history and upsert `days` batch days in each format (labformat first: its load sets the
    file size every format aims at, as in the benchmark), each day's batch cut to `batch_drones` drones
    (None: whole batches); count the metadata after every commit; then plan each of `queries` on each
    table `repeats` times after a warm-up, and run it once."""
    root = workshop.scratch(name, workdir, local=True)  # delta-rs and pyiceberg write where their engines say
    if batch_drones:
        cached = small_batches(cached, days, root / "batches", batch_drones)
    workload = engines.Workload(cached, days, None, None, engines.HISTORY_FILES.get(cached.spec.name, 32))
    formats = _engines(workload, root, spark)
    formats["labformat"].compact_every = compact_every
    formats["delta-rs"].checkpoint_interval = checkpoint_interval
    rows = []
    bar = tqdm(total=len(formats) * (days + 1), desc="three formats", disable=not progress)
    for fmt, engine in formats.items():
        started = time.perf_counter()
        engine.load()
        if engine.sizes:  # the reference's scaled sizes, for the formats after it
            for other in formats.values():
                other.workload = engine.workload
        for day in range(days + 1):
            if day:
                engine.before_day(day)
                started = time.perf_counter()
                engine.upsert(day)
            seconds = time.perf_counter() - started
            kinds, planner = _INVENTORY[fmt](engine)
            row = {"format": fmt, "commit": day, "write s": round(seconds, 3),
                   "metadata files": sum(n for n, _ in kinds.values()),
                   "metadata KB": round(sum(b for _, b in kinds.values()) / 1024, 1), "planner files": len(planner),
                   **{f"{kind} files": n for kind, (n, _) in kinds.items()}}
            rows.append({**row, **(engine.after_day(day) if day else {})})
            bar.update()
    bar.close()
    planned = []
    for fmt, engine in formats.items():
        for query, condition in queries.items():
            runs = [plan_query(fmt, engine, condition) for _ in range(repeats + 1)][1:]  # the first: a warm-up
            files, total, _ = runs[-1]
            planned.append({"format": fmt, "query": query, "files planned": files, "data files": total,
                            "rows": engine.query(condition, parse_condition(condition)),
                            "planning s (median)": round(statistics.median(r[2] for r in runs), 4)})
    dv = _DeltaDeletionVectors(formats["labformat"].workload, root / "delta-rs-deletion-vectors")
    dv.checkpoint_interval = checkpoint_interval
    dv.load()
    dv.before_day(1)
    dv.upsert(1)
    notes = {"pyiceberg": sorted(set(formats["pyiceberg"].warnings))}
    return ThreeFormats(_counts(pd.DataFrame(rows)), pd.DataFrame(planned), notes, dv.after_day(1),
                        checkpoint_interval, compact_every)


def _counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Every count a whole number, 0 where a format has no such file or fact (a delta-rs table before
    its first checkpoint has no checkpoint files)."""
    for column in frame.columns:
        if column in ("compacted", "checkpointed"):
            frame[column] = frame[column].eq(True)  # NaN where the format never compacts
        elif column not in ("format", "metadata KB", "write s"):
            frame[column] = frame[column].fillna(0).astype(int)
    return frame
