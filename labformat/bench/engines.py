"""The benchmark's engines: one daily-upsert workload (load the history, upsert each batch) per tool.

Every engine gets the same cached drone dataset and writes its table under its own folder:

- `labformat-bloom`, `labformat-simple`, `labformat-bucket`: labformat with that index
  (bulk insert with GLOBAL_SORT, then `Table.upsert` per batch); the BUCKET table has as many
  buckets as the history has base files;
- `labformat-mor`: labformat on a merge-on-read table with the BLOOM index: each upsert a delta
  commit (updates appended to log files), inline compaction off during the days; the runner
  times the queries before and after one `Table.compact()` at the end;
- `spark-rewrite`: the no-index way in plain PySpark: read the whole table, union the batch,
  keep the newest row per key, write everything to a new version folder;
- `spark-sorted-write`: the same with the rows in key order (`orderBy(key).write.parquet`): its load
  is what a GLOBAL_SORT bulk insert is measured against;
- `delta-rs`: `write_deltalake` for the load, `DeltaTable.merge` on the key per batch;
- `pyiceberg`: a SQL catalog on sqlite over a local warehouse; `Table.upsert` on the key;
- `io-floor`: not a table format: pyarrow reads exactly the base files that labformat-bloom's
  upsert of that day rewrote and writes them out again, the least a copy-on-write engine does.

Spark engines read the cached parquet through Spark. The peers are single-process tools:
they read the cached parquet files with pyarrow on their own process, deduplicate the batch
there by labformat's rule (`deduplicate_arrow`), and load the history sorted by key, as
labformat's GLOBAL_SORT bulk insert lays it out.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from labformat import datasets
from labformat.bench.queries import Term, arrow_filter, iceberg_filter, sql_condition
from labformat.model.enums import CompressionCodec, IndexType, SortMode, TableType

KEY = datasets.RECORD_KEY
PRECOMBINE = datasets.PRECOMBINE_FIELD

# The history's base files per preset (labformat-bloom's GLOBAL_SORT bulk insert, one file per task):
# a few dozen at small, a few hundred at medium, so that range pruning has files to prune.
HISTORY_FILES = {"tiny": 4, "small": 32, "medium": 320, "large": 1000}
WORKLOADS = ("seed", "late")

ENGINES = ("labformat-bloom", "labformat-simple", "labformat-bucket", "labformat-mor", "spark-rewrite",
           "spark-sorted-write", "delta-rs", "pyiceberg", "io-floor", "labformat-bloom-s3", "delta-rs-s3")
# Tables on a local S3 server the runner starts (SeaweedFS; `--engines` names them): not run by default.
S3_ENGINES = ("labformat-bloom-s3", "delta-rs-s3")
DEFAULT_ENGINES = tuple(e for e in ENGINES if e not in S3_ENGINES)
# The engine every other table is checked against, and whose rewritten files the I/O floor rewrites.
REFERENCE = "labformat-bloom"
MOR = "labformat-mor"
PEERS = ("delta-rs", "pyiceberg")
# The query rounds' labels around labformat-mor's compaction: the runner times under them, the
# report divides by them. Copy-on-write runs again beside the compacted table (same rounds).
COW_SKIPPING_ON = f"{REFERENCE} (skipping on)"
MOR_BEFORE, MOR_AFTER = f"{MOR} (log files, before compaction)", f"{MOR} (after compaction)"
COW_BESIDE = f"{REFERENCE} (skipping on, beside {MOR} after compaction)"


def bloom_entries_per_file(history_rows: int, history_files: int) -> int:
    """Bloom filters sized for one history file's keys, as the workshop sizes them."""
    return max(1, history_rows // history_files)


def write_sorted(spark, df, path: Path, files: int) -> None:
    """`df.orderBy(key).write.parquet` into `files` files: the sort's shuffle at that many tasks, adaptive
    execution off so that none are coalesced."""
    from labformat.spark.jobs import conf_override

    with conf_override(spark, {"spark.sql.shuffle.partitions": str(files), "spark.sql.adaptive.enabled": "false"}):
        df.orderBy(KEY).write.parquet(str(path))


@dataclass(frozen=True)
class Workload:
    """What every engine runs: a cached dataset (its scenario: `seed` or `late`), how many batch days,
    how many base files the history is loaded as, and the file size to aim for."""

    cached: datasets.CachedDataset
    days: int
    # Bytes: labformat's max_file_size, Iceberg's and delta-rs' target file size. None until the
    # reference has bulk inserted the history: then Hudi's sizes scaled to its files (labformat.workload).
    max_file_size: int | None
    small_file_limit: int | None  # bytes: labformat's small_file_limit (the peers have no such knob)
    history_files: int
    scenario: str = "seed"

    @property
    def bloom_num_entries(self) -> int:
        return bloom_entries_per_file(self.cached.spec.history_rows, self.history_files)

    @property
    def write_options(self) -> dict[str, Any]:
        """labformat's options for every upsert."""
        if self.max_file_size is None or self.small_file_limit is None:
            raise ValueError("the workload's file sizes are not set yet: the reference's load sets them")
        return {"max_file_size": self.max_file_size, "small_file_limit": self.small_file_limit,
                "bloom_num_entries": self.bloom_num_entries}

    def to_json(self) -> dict[str, Any]:
        c = self.cached
        return {"preset": c.spec.name, "spec": c.spec.params(), "root": c.root, "history_path": c.history_path,
                "batch_paths": list(c.batch_paths), "days": self.days, "max_file_size": self.max_file_size,
                "small_file_limit": self.small_file_limit, "history_files": self.history_files,
                "scenario": self.scenario}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Workload":
        spec = datasets.DatasetSpec(**d["spec"])
        cached = datasets.CachedDataset(spec=spec, root=d["root"], history_path=d["history_path"],
                                        batch_paths=list(d["batch_paths"]))
        return cls(cached, d["days"], d["max_file_size"], d["small_file_limit"], d["history_files"], d["scenario"])


def deduplicate_arrow(batch: pa.Table) -> pa.Table:
    """One row per record key, by labformat's rule (labformat/write/dedupe.py `deduplicate`).

    The row with the highest `updated_at` wins; ties go to the row whose remaining columns,
    compared in order, are larger. Nulls sort lowest, as in Spark's `max` of a struct.
    """
    if batch.num_rows == 0:
        return batch
    others = [c for c in batch.column_names if c not in (KEY, PRECOMBINE)]
    ordered = batch.sort_by([(KEY, "ascending"), (PRECOMBINE, "descending")] + [(c, "descending") for c in others])
    keys = ordered.column(KEY).combine_chunks()
    first_of_key = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))
    return ordered.filter(pa.concat_arrays([pa.array([True]), first_of_key]))


def read_parquet_folder(path: str) -> pa.Table:
    """A cached parquet folder as one Arrow table (Spark's schema metadata dropped)."""
    table = pq.read_table(path)
    return table.replace_schema_metadata(None)


def files_in_key_order(path: str) -> list[str] | None:
    """The folder's parquet files ordered by their smallest key, when no two files' key ranges overlap
    (the generator range-partitions time-ordered keys); None when they do (random keys). From the
    footers' min/max statistics, no data read."""
    ranges = []
    for file in sorted(Path(path).glob("*.parquet")):
        meta = pq.ParquetFile(file).metadata
        column = meta.schema.to_arrow_schema().get_field_index(KEY)
        stats = [meta.row_group(i).column(column).statistics for i in range(meta.num_row_groups)]
        if not stats or any(s is None or not s.has_min_max for s in stats):
            return None
        ranges.append((min(s.min for s in stats), max(s.max for s in stats), str(file)))
    ranges.sort()
    if any(hi >= next_lo for (_, hi, _), (next_lo, _, _) in zip(ranges, ranges[1:])):
        return None
    return [file for _, _, file in ranges]


def sorted_history(path: str) -> pa.Table | pa.RecordBatchReader:
    """The cached history sorted by key: a stream holding one file at a time when the files' key
    ranges are disjoint (so that `large`'s 172.8M rows never sit in one process's memory at once),
    else the whole folder sorted in memory."""
    files = files_in_key_order(path)
    if files is None:
        return read_parquet_folder(path).sort_by(KEY)
    schema = pq.read_schema(files[0]).remove_metadata()

    def batches():
        for file in files:
            yield from pq.read_table(file, schema=schema).sort_by(KEY).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


class Engine:
    """One tool under test, writing its table under `root`.

    The runner calls `load()` once, then `before_day(d)`, `upsert(d)` and `after_day(d)` for
    each batch day, timing only `load()` and `upsert(d)`. `check_source()` says where the
    finished table's rows can be read for the equality check (None: nothing to check).
    """

    name = ""
    uses_spark = False
    has_load = True

    def __init__(self, workload: Workload, root: str | os.PathLike, spark=None):
        self.workload = workload
        self.root = Path(root)
        self.spark = spark
        # File sizes this engine chose on load, for the workload of every later engine (the reference only).
        self.sizes: dict[str, int] | None = None
        # An S3 engine's server (labformat's storage_options keys); the runner sets it.
        self.storage_options: dict[str, str] | None = None

    def file_state(self) -> dict[str, tuple[int, int]]:
        """Every file the engine wrote: path -> (size, mtime in ns); the runner counts bytes written by it."""
        state = {}
        for folder, _, files in os.walk(self.root):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    info = os.stat(path)
                except FileNotFoundError:
                    continue
                state[path] = (info.st_size, info.st_mtime_ns)
        return state

    def load(self) -> None:
        raise NotImplementedError

    def before_day(self, day: int) -> None:
        """Untimed preparation before the upsert of `day`."""

    def upsert(self, day: int) -> None:
        raise NotImplementedError

    def after_day(self, day: int) -> dict[str, Any]:
        """Untimed, after the upsert of `day`: extra facts for the results (`files_rewritten` and
        `bytes_rewritten`: existing data files the upsert replaced, for engines that can tell)."""
        return {}

    def check_source(self) -> dict[str, str] | None:
        raise NotImplementedError

    def query(self, condition: str, terms: tuple[Term, ...], skipping: bool = True) -> int:
        """Run one query (the runner times this call); return the rows it found."""
        raise NotImplementedError(f"{self.name} has no query benchmark")

    def files_read(self, condition: str, terms: tuple[Term, ...], skipping: bool = True) -> tuple[int, int]:
        """(files a query reads, files in the table): not timed."""
        raise NotImplementedError(f"{self.name} has no query benchmark")


class Labformat(Engine):
    """labformat with one index type: GLOBAL_SORT bulk insert, then `Table.upsert` per batch."""

    uses_spark = True
    table_type = TableType.COPY_ON_WRITE

    def __init__(self, workload: Workload, root, spark=None, index_type: IndexType = IndexType.BLOOM):
        super().__init__(workload, root, spark)
        self.index_type = IndexType(index_type)
        self.name = f"labformat-{index_type.lower()}"
        self.table_path = self.location()
        self._slices: dict[tuple[str, str], str] = {}
        self._report = None
        self._scans: dict[tuple[str, bool], Any] = {}  # (condition, skipping) -> the last ScanReport

    def location(self) -> Path | str:
        """Where the engine's table is."""
        return self.root / "table"

    def table(self):
        """The engine's labformat table, opened anew."""
        import labformat as lf

        return lf.Table.open(self.spark, self.table_path, storage_options=self.storage_options)

    def load(self) -> None:
        import labformat as lf

        from labformat.workload import scaled_sizes

        w = self.workload
        options = {"index_type": self.index_type}
        if self.index_type is IndexType.BUCKET:
            # As many buckets as the history has base files, so that each bucket's file starts at the
            # size every other engine's files have (Hudi sizes buckets by the data they will hold):
            # Hudi's default of 4 gave `medium` 150 MB buckets, each merged whole in one task.
            options["bucket_num"] = w.history_files
        table = lf.Table.create(self.spark, self.table_path, record_key=KEY, precombine_field=PRECOMBINE,
                                options=options, table_type=self.table_type, storage_options=self.storage_options)
        # One base file per write task (no max_file_size: Hudi's 120 MB is far above a task's share),
        # as the workshop loads its history.
        table.bulk_insert(datasets.load_history(self.spark, w.cached),
                          {"bulk_insert_sort_mode": SortMode.GLOBAL_SORT, "bulk_insert_parallelism": w.history_files,
                           "bloom_num_entries": w.bloom_num_entries})
        if w.max_file_size is None:
            sizes = scaled_sizes(table)
            self.sizes = {"max_file_size": sizes.max_file_size, "small_file_limit": sizes.small_file_limit}
            self.workload = dataclasses.replace(w, **self.sizes)

    def before_day(self, day: int) -> None:
        # The latest slice of each file group now: the base files this day's upsert may rewrite.
        table = self.table()
        self._slices = {(s.partition_path, s.file_id): (table.storage.full_path(s.path), s.size_bytes)
                        for s in table.file_slices()}

    def upsert(self, day: int) -> None:
        batch = datasets.load_batch(self.spark, self.workload.cached, day)
        self._report = self.table().upsert(batch, self.workload.write_options)

    def after_day(self, day: int) -> dict[str, Any]:
        report = self._report
        # Base files replaced by a new slice; a merge-on-read log file leaves its slice's base file as it was.
        rewritten = [f for f in report.files if not f.created and not f.log_file]
        return {
            # Where the upsert's time went, step by step (the report's split), for the profile table.
            "steps": {step.name: round(step.seconds, 4) for step in report.steps},
            "files_rewritten": report.files_rewritten,
            "files_created": report.files_created,
            "log_files_written": report.log_files_written,
            "bytes_rewritten": sum(self._slices[(f.partition_path, f.file_id)][1] for f in rewritten),
            # The previous slice of every file group that got a new one: what the I/O floor rewrites.
            "rewritten_base_files": sorted(self._slices[(f.partition_path, f.file_id)][0] for f in rewritten),
        }

    @property
    def last_report(self):
        """The WriteReport of the last `upsert` (None before one)."""
        return self._report

    def check_source(self) -> dict[str, str]:
        return {"kind": "labformat", "path": str(self.table_path)}


    def query(self, condition, terms, skipping=True) -> int:
        _, scan = self.table().query(condition, options={"data_skipping": skipping})
        self._scans[(condition, skipping)] = scan
        return scan.rows_returned

    def files_read(self, condition, terms, skipping=True) -> tuple[int, int]:
        # The funnel of a query already run (the runner times query() first); a new scan only if none was.
        scan = self._scans.get((condition, skipping))
        if scan is None:
            self.query(condition, terms, skipping)
            scan = self._scans[(condition, skipping)]
        return scan.funnel.files_read, scan.funnel.files_in_snapshot


class LabformatS3(Labformat):
    """labformat-bloom with its table on the runner's local S3 server: the same workload, every byte over HTTP."""

    def __init__(self, workload: Workload, root, spark=None):
        super().__init__(workload, root, spark, IndexType.BLOOM)
        self.name = "labformat-bloom-s3"

    def location(self) -> str:
        return s3_table_uri(self.root)

    def file_state(self) -> dict[str, tuple[int, int]]:
        return s3_file_state(self.table_path, self.storage_options)

    def check_source(self) -> dict[str, Any]:
        return {"kind": "labformat", "path": self.table_path, "storage_options": self.storage_options}


class LabformatMor(Labformat):
    """labformat on a merge-on-read table, BLOOM index: GLOBAL_SORT bulk insert (a delta commit of base files),
    then `Table.upsert` per batch with inline compaction off, so each day's updates stay in log files; the
    runner compacts once after the last day (`compact`), between its query rounds."""

    table_type = TableType.MERGE_ON_READ

    def __init__(self, workload: Workload, root, spark=None):
        super().__init__(workload, root, spark, IndexType.BLOOM)
        self.name = MOR

    def upsert(self, day: int) -> None:
        batch = datasets.load_batch(self.spark, self.workload.cached, day)
        self._report = self.table().upsert(batch, {**self.workload.write_options, "hoodie.compact.inline": False})

    def compact(self):
        """Merge every file slice with log files into a new base file; the compaction's WriteReport."""
        return self.table().compact(self.workload.write_options)


class SparkRewrite(Engine):
    """Plain PySpark, no index: each day reads the whole table, unions the batch, keeps the newest
    row per key (labformat's tie rule) and overwrites everything as a new version folder."""

    name = "spark-rewrite"
    uses_spark = True

    def __init__(self, workload: Workload, root, spark=None):
        super().__init__(workload, root, spark)
        self.version = 0

    def _version_path(self, version: int) -> Path:
        return self.root / "table" / f"v{version:04d}"

    def load(self) -> None:
        self._write(datasets.load_history(self.spark, self.workload.cached), self._version_path(0))

    def upsert(self, day: int) -> None:
        self._write(self._merged(day), self._version_path(self.version + 1))
        self.version += 1

    def _merged(self, day: int):
        """The current version with the day's batch merged in: the newest row per key."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        current = self.spark.read.parquet(str(self._version_path(self.version)))
        batch = datasets.load_batch(self.spark, self.workload.cached, day)
        newest_first = [F.col(PRECOMBINE).desc()] + [F.col(c).desc() for c in datasets.COLUMNS
                                                     if c not in (KEY, PRECOMBINE)]
        rank = F.row_number().over(Window.partitionBy(KEY).orderBy(*newest_first))
        return current.unionByName(batch).withColumn("_rank", rank).where("_rank = 1").drop("_rank")

    def _write(self, df, path: Path) -> None:
        df.write.parquet(str(path))

    def after_day(self, day: int) -> dict[str, Any]:
        import shutil

        previous = self._version_path(self.version - 1)
        files = [f.stat().st_size for f in previous.glob("*.parquet")]
        shutil.rmtree(previous)  # the overwrite's other half; not timed
        return {"files_rewritten": len(files), "bytes_rewritten": sum(files)}

    def check_source(self) -> dict[str, str]:
        return {"kind": "parquet", "path": str(self._version_path(self.version))}


class SparkSortedWrite(SparkRewrite):
    """The rewrite with its rows in key order: `orderBy(key).write.parquet`, for the load and each day.

    Its load is the fair baseline for labformat's GLOBAL_SORT bulk insert: the same rows, sorted by
    the same key (a sampling pass for the range bounds, a shuffle, a sort) and written as as many
    parquet files as labformat writes base files (the sort's shuffle at `history_files` tasks,
    adaptive execution off so that none are coalesced); what labformat adds beyond it is its own."""

    name = "spark-sorted-write"

    def _write(self, df, path: Path) -> None:
        write_sorted(self.spark, df, path, self.workload.history_files)


class DeltaRs(Engine):
    """delta-rs: `write_deltalake` loads the sorted history; each day MERGEs the deduplicated batch on the key
    (update all columns when matched, insert all when not), pruning target files by the batch's key range."""

    name = "delta-rs"

    def __init__(self, workload: Workload, root, spark=None):
        super().__init__(workload, root, spark)
        self.table_path = self.root / "table"

    def delta_table(self):
        from deltalake import DeltaTable

        return DeltaTable(str(self.table_path), storage_options=self.delta_options())

    def delta_options(self) -> dict[str, str] | None:
        """delta-rs' storage_options (None on a local disk)."""
        return None

    def load(self) -> None:
        from deltalake import write_deltalake

        history = sorted_history(self.workload.cached.history_path)
        # As a table property, so that each MERGE writes files of this size too, not its 100 MB default.
        write_deltalake(str(self.table_path), history, mode="error", target_file_size=self.workload.max_file_size,
                        storage_options=self.delta_options(),
                        configuration={"delta.targetFileSize": str(self.workload.max_file_size),
                                       **self.table_configuration()})

    def table_configuration(self) -> dict[str, str]:
        """More table properties for the load (notebook 08's checkpoints and deletion vectors); none here."""
        return {}

    def upsert(self, day: int) -> None:
        batch = deduplicate_arrow(read_parquet_folder(self.workload.cached.batch_path(day)))
        # streamed_exec=False: the batch is an Arrow table in memory, so delta-rs may read its key range
        # and skip every target file outside it. Its default (True, for sources too large to hold) turns
        # that pruning off and scans the whole table: at `medium` 4.9 s and 4.6 GiB a MERGE instead of
        # 0.8 s and 1.1 GiB; at `large` a first attempt with it grew to the machine's whole memory.
        self._metrics = (self.delta_table()
                         .merge(source=batch, predicate=f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t",
                                streamed_exec=False)
                         .when_matched_update_all()
                         .when_not_matched_insert_all()
                         .execute())

    def _data_files(self) -> dict[str, int]:
        actions = pa.table(self.delta_table().get_add_actions(flatten=True))
        return dict(zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist()))

    def before_day(self, day: int) -> None:
        self._before = self._data_files()

    def after_day(self, day: int) -> dict[str, Any]:
        """From the MERGE's own metrics; the bytes from the files it removed from the log."""
        removed = set(self._before) - set(self._data_files())
        if len(removed) != self._metrics["num_target_files_removed"]:
            raise ValueError(f"delta-rs removed {len(removed)} files from its log but reported "
                             f"{self._metrics['num_target_files_removed']}")
        return {"files_rewritten": self._metrics["num_target_files_removed"],
                "files_added": self._metrics["num_target_files_added"],
                "bytes_rewritten": sum(self._before[p] for p in removed),
                # What its pruning left to read: files scanned, of the table's files before the MERGE.
                "files_scanned": self._metrics["num_target_files_scanned"], "files_before": len(self._before)}

    def check_source(self) -> dict[str, str]:
        """The table as delta-rs' own query engine returns it, streamed to one parquet file for the check."""
        from deltalake import QueryBuilder

        path = self.root / "snapshot.parquet"
        reader = pa.RecordBatchReader.from_stream(
            QueryBuilder().register("drones", self.delta_table()).execute("SELECT * FROM drones"))
        with pq.ParquetWriter(path, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
        return {"kind": "parquet", "path": str(path)}

    def query(self, condition, terms, skipping=True) -> int:
        """Through delta-rs' own query engine (DataFusion), which skips files by the log's min/max statistics.

        (pyarrow's dataset scanner cannot filter the string_view columns delta-rs writes.)
        """
        from deltalake import QueryBuilder

        table = self.delta_table()
        where = sql_condition(terms, pa.schema(table.schema().to_arrow()))
        reader = QueryBuilder().register("drones", table).execute(f"SELECT * FROM drones WHERE {where}")
        return pa.RecordBatchReader.from_stream(reader).read_all().num_rows

    def files_read(self, condition, terms, skipping=True) -> tuple[int, int]:
        """Files whose min/max statistics in the delta log may match (as delta-rs hands them to pyarrow), of all files."""
        dataset = self.delta_table().to_pyarrow_dataset()
        matching = list(dataset.get_fragments(filter=arrow_filter(terms, dataset.schema)))
        return len(matching), len(list(dataset.get_fragments()))


class DeltaRsS3(DeltaRs):
    """delta-rs with its table on the runner's local S3 server (the same server as labformat-bloom-s3)."""

    name = "delta-rs-s3"

    def __init__(self, workload: Workload, root, spark=None):
        super().__init__(workload, root, spark)
        self.table_path = s3_table_uri(self.root)

    def delta_options(self) -> dict[str, str]:
        # delta-rs takes the same keys (object_store's); its S3 commits are conditional PUTs too.
        return dict(self.storage_options or {})

    def file_state(self) -> dict[str, tuple[int, int]]:
        return s3_file_state(self.table_path, self.storage_options)


def s3_table_uri(root: Path) -> str:
    """The S3 location of an engine's table: the runner's bucket, under the engine's local root's last parts."""
    from labformat.s3_server import BUCKET

    return f"s3://{BUCKET}/{'/'.join(root.parts[-4:])}/table"


def s3_file_state(uri: str, storage_options: dict[str, str] | None) -> dict[str, tuple[int, int]]:
    """`Engine.file_state` of a table on S3, from one listing (mtime: S3's Last-Modified)."""
    import pyarrow.fs as pafs

    from labformat.storage import Storage

    storage = Storage(uri, storage_options)
    infos = storage.fs.get_file_info(pafs.FileSelector(storage.root, recursive=True, allow_not_found=True))
    return {i.path: (i.size, i.mtime_ns or 0) for i in infos if i.type == pafs.FileType.File}


class PyIceberg(Engine):
    """pyiceberg: a SQL catalog on sqlite with a local warehouse; `append` loads the sorted history,
    `Table.upsert` on the key applies each deduplicated batch."""

    name = "pyiceberg"
    identifier = "bench.drones"
    table_properties: dict[str, str] = {}  # more for the table's creation (notebook 08's merge-on-read modes)

    def __init__(self, workload: Workload, root, spark=None):
        super().__init__(workload, root, spark)
        self._catalog = None

    def catalog(self):
        if self._catalog is None:
            from pyiceberg.catalog.sql import SqlCatalog

            warehouse = self.root / "warehouse"
            warehouse.mkdir(parents=True, exist_ok=True)
            self._catalog = SqlCatalog("bench", uri=f"sqlite:///{self.root / 'catalog.db'}",
                                       warehouse=warehouse.as_uri())
        return self._catalog

    def load(self) -> None:
        history = read_parquet_folder(self.workload.cached.history_path).sort_by(KEY)
        catalog = self.catalog()
        catalog.create_namespace("bench")
        table = catalog.create_table(self.identifier, schema=history.schema,
                                     properties={"write.target-file-size-bytes": str(self.workload.max_file_size),
                                                 **self.table_properties})
        table.append(history)

    def upsert(self, day: int) -> None:
        batch = deduplicate_arrow(read_parquet_folder(self.workload.cached.batch_path(day)))
        self.catalog().load_table(self.identifier).upsert(batch, join_cols=[KEY])

    def before_day(self, day: int) -> None:
        self._before = self.catalog().load_table(self.identifier).current_snapshot().snapshot_id

    def after_day(self, day: int) -> dict[str, Any]:
        """Summed over the snapshots the upsert committed (an overwrite of the matched files, then appends)."""
        snapshots = self.catalog().load_table(self.identifier).snapshots()
        ids = [s.snapshot_id for s in snapshots]
        new = [s.summary.additional_properties for s in snapshots[ids.index(self._before) + 1:]]
        total = lambda key: sum(int(summary.get(key, 0)) for summary in new)  # noqa: E731
        return {"files_rewritten": total("deleted-data-files"), "files_added": total("added-data-files"),
                "bytes_rewritten": total("removed-files-size")}

    def check_source(self) -> dict[str, str]:
        """The table as pyiceberg's own scan returns it, written to one parquet file for the check."""
        path = self.root / "snapshot.parquet"
        pq.write_table(self.catalog().load_table(self.identifier).scan().to_arrow(), path)
        return {"kind": "parquet", "path": str(path)}

    def query(self, condition, terms, skipping=True) -> int:
        table = self.catalog().load_table(self.identifier)
        return table.scan(row_filter=iceberg_filter(terms, table.schema().as_arrow())).to_arrow().num_rows

    def files_read(self, condition, terms, skipping=True) -> tuple[int, int]:
        """Data files left after manifest and column-metrics pruning, of all data files."""
        table = self.catalog().load_table(self.identifier)
        row_filter = iceberg_filter(terms, table.schema().as_arrow())
        return (len(list(table.scan(row_filter=row_filter).plan_files())),
                len(list(table.scan().plan_files())))


class IoFloor(Engine):
    """The I/O floor: per day, pyarrow reads the base files labformat-bloom's upsert rewrote and writes
    each back (same codec and row-group size) on all cores, and nothing else: no batch, no index, no merge."""

    name = "io-floor"
    has_load = False

    def __init__(self, workload: Workload, root, spark=None, rewritten: dict[int, list[str]] | None = None):
        super().__init__(workload, root, spark)
        if rewritten is None:
            raise ValueError("the I/O floor needs the base files labformat-bloom rewrote each day")
        self.rewritten = rewritten

    def load(self) -> None:
        pass

    def upsert(self, day: int) -> None:
        out = self.root / f"day_{day:03d}"
        out.mkdir(parents=True)
        jobs = [(source, out / f"{i:05d}.parquet") for i, source in enumerate(self.rewritten[day])]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(lambda job: _rewrite_file(*job), jobs))

    def check_source(self) -> None:
        return None


def _rewrite_file(source: str, target: Path) -> None:
    """Write `source`'s rows to `target` as its writer did: same codec, row-group size and dictionary
    columns, same footer key-values."""
    parquet = pq.ParquetFile(source)
    meta = parquet.metadata
    first = meta.row_group(0) if meta.num_row_groups else None
    codec = first.column(0).compression.lower() if first is not None else CompressionCodec.SNAPPY.value
    dictionary = True if first is None else [
        first.column(i).path_in_schema for i in range(first.num_columns)
        if any(e in first.column(i).encodings for e in ("RLE_DICTIONARY", "PLAIN_DICTIONARY"))]
    # The footer's key-values (bloom filter, key range) once, as footer entries; pyarrow's own
    # ARROW:schema entry is rewritten from a schema without them, as labformat's writer does.
    footer = {k: v for k, v in (meta.metadata or {}).items() if k != b"ARROW:schema"}
    table = parquet.read().replace_schema_metadata(None)
    with pq.ParquetWriter(target, table.schema, compression=codec, write_statistics=True,
                          use_dictionary=dictionary) as writer:
        writer.write_table(table, row_group_size=first.num_rows if first is not None and first.num_rows else None)
        if footer:
            writer.add_key_value_metadata(footer)


def make_engine(name: str, workload: Workload, root, spark=None, rewritten: dict[int, list[str]] | None = None) -> Engine:
    """The engine called `name` (one of ENGINES), writing under `root`."""
    if name == MOR:
        return LabformatMor(workload, root, spark)
    if name in S3_ENGINES:
        return {"labformat-bloom-s3": LabformatS3, "delta-rs-s3": DeltaRsS3}[name](workload, root, spark)
    if name.startswith("labformat-"):
        index = name.removeprefix("labformat-").upper()
        if index not in IndexType.__members__:
            raise ValueError(f"unknown engine {name!r}; choose from {list(ENGINES)}")
        return Labformat(workload, root, spark, IndexType(index))
    classes = {"spark-rewrite": SparkRewrite, "spark-sorted-write": SparkSortedWrite, "delta-rs": DeltaRs,
               "pyiceberg": PyIceberg}
    if name == "io-floor":
        return IoFloor(workload, root, spark, rewritten)
    if name not in classes:
        raise ValueError(f"unknown engine {name!r}; choose from {list(ENGINES)}")
    return classes[name](workload, root, spark)
