"""The benchmark run: each engine's workload, engines alternating, N repetitions; then the equality check and the queries.

    result = run_benchmark("small", repeat=3)       # a JSON-ready dict; raises BenchmarkError on disagreement

Repetition r runs every engine once, always in the same order (A B C ... A B C ...), so slow
drifts of the machine hit every engine alike. By default each engine's workload runs in a process of
its own (`python -m labformat.bench.worker`), so its peak memory (RSS of that process tree:
Python, and for Spark engines the JVM and its Python workers) is its own and every Spark
engine starts from a fresh JVM. `isolate=False` runs everything in this process on one
SparkSession (the smoke test does); memory is then that of the shared process tree.

Per upsert day the run records wall time (the engine's whole call: opening the table,
reading the batch, deduplicating, merging, committing) and bytes written (sizes of the files
that are new or changed in the engine's folder afterwards). Then every finished table is
checked against labformat-bloom's (row count and a hash of all values, see checksum.py),
and the lab's standard queries run on the last repetition's tables; labformat-mor's table is
queried with its log files, then compacted (timed) and queried again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from labformat import datasets
from labformat.bench.engines import (COW_BESIDE, DEFAULT_ENGINES, ENGINES, S3_ENGINES, HISTORY_FILES, MOR, MOR_AFTER, MOR_BEFORE,
                                     PEERS, REFERENCE, WORKLOADS, Engine, Workload, make_engine)
from labformat.bench.memory import PeakRss
from labformat.bench.queries import parse_condition
from labformat.errors import LabformatError

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_WORK_DIR = ROOT / "out" / "bench"


class BenchmarkError(LabformatError):
    """A run whose numbers cannot stand: an engine failed, or the engines' tables or query answers disagree."""


# ---- one engine's workload ------------------------------------------------------------------------

def bytes_written(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> int:
    """Bytes of the files that are new, or changed, in `after`."""
    return sum(size for path, (size, mtime) in after.items() if before.get(path) != (size, mtime))


def run_workload(engine: Engine, workload: Workload) -> dict[str, Any]:
    """Load, then upsert each batch day; time each, measure bytes written and the peak RSS of the process tree."""
    engine.root.mkdir(parents=True, exist_ok=True)
    days = []
    load_seconds = load_bytes = None
    with PeakRss() as memory:
        if engine.has_load:
            before = engine.file_state()
            started = time.perf_counter()
            engine.load()
            load_seconds = time.perf_counter() - started
            load_bytes = bytes_written(before, engine.file_state())
        for day in range(1, workload.days + 1):
            engine.before_day(day)
            before = engine.file_state()
            started = time.perf_counter()
            engine.upsert(day)
            seconds = time.perf_counter() - started
            written = bytes_written(before, engine.file_state())
            days.append({"day": day, "seconds": round(seconds, 4), "bytes_written": written, **engine.after_day(day)})
    return {
        "engine": engine.name,
        "load_seconds": None if load_seconds is None else round(load_seconds, 4),
        "load_bytes_written": load_bytes,
        "days": days,
        "peak_rss_bytes": memory.peak_bytes,
        "sizes": engine.sizes,
        "root": str(engine.root),
        "check_source": engine.check_source(),  # after the measured part: peers export their snapshot here
    }


def run_job(job: dict[str, Any], spark=None) -> dict[str, Any]:
    """Run one (engine, repetition) job; starts a SparkSession for Spark engines when none is given."""
    workload = Workload.from_json(job["workload"])
    rewritten = {int(day): files for day, files in (job.get("rewritten") or {}).items()} or None
    engine = make_engine(job["engine"], workload, job["root"], None, rewritten)
    engine.storage_options = job.get("storage_options")
    if engine.uses_spark:
        if spark is None:
            import labformat as lf

            spark = lf.spark_session(app_name=f"labformat-bench-{engine.name}", **spark_conf(job.get("driver_memory")))
        engine.spark = spark
    result = run_workload(engine, workload)
    result["repetition"] = job["repetition"]
    return result


def spark_conf(driver_memory: str | None) -> dict[str, str]:
    """The Spark options every Spark engine of a run gets: the same for labformat and the rewrite, so
    that neither is measured with a heap the other lacks. None: the session's default."""
    return {} if driver_memory is None else {"spark.driver.memory": driver_memory}


def driver_memory_of(driver_memory: str | None) -> str:
    """The driver memory a run's Spark engines had, as recorded."""
    from labformat.spark.session import DEFAULT_CONF

    return driver_memory or DEFAULT_CONF["spark.driver.memory"]


def run_isolated(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job in a fresh `python -m labformat.bench.worker` process and return its result."""
    with tempfile.TemporaryDirectory(prefix="labformat-bench-") as tmp:
        job_path, result_path = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job_path.write_text(json.dumps(job))
        code = subprocess.call([sys.executable, "-m", "labformat.bench.worker", str(job_path), str(result_path)],
                               stdin=subprocess.DEVNULL)
        if code != 0 or not result_path.exists():
            raise BenchmarkError(f"the {job['engine']} workload (repetition {job['repetition'] + 1}) failed with "
                                 f"exit code {code}; its error is printed above")
        return json.loads(result_path.read_text())


# ---- the equality check ------------------------------------------------------------------------------

def check_tables(spark, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Checksum every finished table; all must equal the reference engine's (labformat-bloom, else the first)."""
    from labformat.bench.checksum import table_checksum

    checked = []
    for run in runs:
        if run["check_source"] is None:
            continue
        rows, digest = table_checksum(spark, run["check_source"])
        checked.append({"engine": run["engine"], "repetition": run["repetition"], "rows": rows, "hash": str(digest)})
    if not checked:
        return {"reference": None, "agree": True, "tables": []}
    names = [c["engine"] for c in checked]
    reference = next(c for c in checked if c["engine"] == (REFERENCE if REFERENCE in names else names[0]))
    differ = [c for c in checked if (c["rows"], c["hash"]) != (reference["rows"], reference["hash"])]
    result = {"reference": reference["engine"], "rows": reference["rows"], "hash": reference["hash"],
              "agree": not differ, "tables": checked}
    if differ:
        lines = [f"  {c['engine']} (repetition {c['repetition'] + 1}): {c['rows']:,} rows, hash {c['hash']}"
                 for c in differ]
        raise BenchmarkError(
            f"the engines' tables disagree with {reference['engine']} (repetition {reference['repetition'] + 1}: "
            f"{reference['rows']:,} rows, hash {reference['hash']}):\n" + "\n".join(lines))
    return result


# ---- the queries -------------------------------------------------------------------------------------------

Contender = tuple[str, Engine, bool]  # (label, engine, data skipping on?)


def _timed_rounds(contenders: list[Contender], conditions: dict[str, tuple[str, Any]], repeat: int
                  ) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], int]]:
    """One untimed round (first-call costs out of the way), then `repeat` timed rounds alternating the contenders;
    per (query, label) the seconds of each timed call and the rows returned."""
    for condition, terms in conditions.values():
        for _, engine, skipping in contenders:
            engine.query(condition, terms, skipping)
    times: dict[tuple[str, str], list[float]] = {}
    rows: dict[tuple[str, str], int] = {}
    for _ in range(repeat):
        for query, (condition, terms) in conditions.items():
            for label, engine, skipping in contenders:
                started = time.perf_counter()
                rows[(query, label)] = engine.query(condition, terms, skipping)
                times.setdefault((query, label), []).append(round(time.perf_counter() - started, 4))
    return times, rows


def _query_results(contenders: list[Contender], conditions: dict[str, tuple[str, Any]], times, rows,
                   log: Callable[[str], None], expected: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """The results of timed rounds; BenchmarkError when the contenders' rows (or `expected`, per query) disagree."""
    results = []
    for query, (condition, terms) in conditions.items():
        answers = {label: rows[(query, label)] for label, _, _ in contenders}
        if expected is not None:
            answers = {"(the first round)": expected[query], **answers}
        if len(set(answers.values())) != 1:
            raise BenchmarkError(f"query {query!r} ({condition}) returns different row counts: {answers}")
        for label, engine, skipping in contenders:
            files_read, files_total = engine.files_read(condition, terms, skipping)
            results.append({"query": query, "condition": condition, "engine": label, "seconds": times[(query, label)],
                            "files_read": files_read, "files_total": files_total, "rows": answers[label]})
        log(f"  {query}: {answers[contenders[0][0]]:,} rows; " + ", ".join(
            f"{label} {statistics.median(times[(query, label)]):.2f} s" for label, _, _ in contenders))
    return results


def _conditions(spark, workload: Workload, table_path) -> dict[str, tuple[str, Any]]:
    import labformat as lf
    from labformat.workload import standard_queries

    return {query: (condition, parse_condition(condition))
            for query, condition in standard_queries(lf.Table.open(spark, table_path), workload.cached.spec).items()}


def run_queries(spark, workload: Workload, runs: list[dict[str, Any]], repeat: int,
                log: Callable[[str], None]) -> list[dict[str, Any]]:
    """The lab's standard queries on one repetition's tables, alternating engines; rows must agree.

    labformat runs each query with data skipping on and off; labformat-mor with its log files
    (before the compaction of `compact_and_query`); the peers with their own pruning. After one
    untimed warm-up round, each timed call is the whole query: opening the table, planning, and
    reading every column of every matching row.
    """
    roots = {run["engine"]: run["root"] for run in runs}
    ours = REFERENCE if REFERENCE in roots else next((n for n in roots if n.startswith("labformat-")), None)
    if ours is None:
        return []
    table = make_engine(ours, workload, roots[ours], spark)
    contenders: list[Contender] = [(f"{ours} (skipping on)", table, True), (f"{ours} (skipping off)", table, False)]
    if MOR in roots and ours != MOR:
        contenders.append((MOR_BEFORE, make_engine(MOR, workload, roots[MOR], spark), True))
    contenders += [(name, make_engine(name, workload, roots[name]), True) for name in PEERS if name in roots]
    conditions = _conditions(spark, workload, table.table_path)
    times, rows = _timed_rounds(contenders, conditions, repeat)
    return _query_results(contenders, conditions, times, rows, log)


def compact_and_query(spark, workload: Workload, runs: list[dict[str, Any]], repeat: int, earlier: list[dict[str, Any]],
                      log: Callable[[str], None]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """labformat-mor's table of `runs` compacted (`Table.compact()`, timed), then the standard queries on it again,
    warm-up and `repeat` rounds as `run_queries`; their rows must equal `earlier`'s. (None, []) without that engine.

    Copy-on-write's table (the reference's, skipping on) runs in the same rounds, alternating, so the
    goal's ratio compares two timings taken side by side, not two phases of the run."""
    roots = {run["engine"]: run["root"] for run in runs}
    if MOR not in roots:
        return None, []
    engine = make_engine(MOR, workload, roots[MOR], spark)
    started = time.perf_counter()
    report = engine.compact()
    seconds = time.perf_counter() - started
    compaction = {"engine": MOR, "seconds": round(seconds, 4), "instant": report.instant,
                  "file_slices_compacted": report.details.file_slices_compacted,
                  "log_files_compacted": report.details.log_files_compacted,
                  "log_bytes_compacted": report.details.log_bytes_compacted, "bytes_written": report.bytes_written}
    log(f"  {MOR}: compacted {compaction['file_slices_compacted']} file slices "
        f"({compaction['log_files_compacted']} log files) in {seconds:.2f} s")
    contenders: list[Contender] = [(MOR_AFTER, engine, True)]
    if REFERENCE in roots:
        contenders.append((COW_BESIDE, make_engine(REFERENCE, workload, roots[REFERENCE], spark), True))
    conditions = _conditions(spark, workload, engine.table_path)
    expected = {}
    for q in earlier:
        expected.setdefault(q["query"], q["rows"])
    times, rows = _timed_rounds(contenders, conditions, repeat)
    return compaction, _query_results(contenders, conditions, times, rows, log, expected or None)


# ---- the whole run ------------------------------------------------------------------------------------------

def machine_info() -> dict[str, Any]:
    """Cores, memory and the versions of everything measured."""
    from importlib.metadata import PackageNotFoundError, version

    import psutil

    versions = {}
    for package in ("pyspark", "pyarrow", "deltalake", "pyiceberg", "labformat"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    return {"cores": os.cpu_count(), "memory_bytes": psutil.virtual_memory().total, "system": platform.platform(),
            "python": platform.python_version(), "versions": versions}


def dataset_info(workload: Workload) -> dict[str, Any]:
    """Rows and on-disk (cached parquet) bytes of the history and of each batch used."""
    cached = workload.cached
    return {"history_rows": cached.history_rows, "history_bytes": datasets.parquet_bytes(cached.history_path),
            "batch_rows": list(cached.batch_rows[:workload.days]),
            "batch_bytes": [datasets.parquet_bytes(cached.batch_path(day)) for day in range(1, workload.days + 1)],
            "spec": cached.spec.params()}


def run_order(engines: tuple[str, ...]) -> list[str]:
    """The order engines run in within a repetition: ENGINES' order, io-floor right after the reference it replays."""
    order = [e for e in ENGINES if e in engines and e != "io-floor"]
    if "io-floor" in engines:
        order.insert(order.index(REFERENCE) + 1, "io-floor")
    return order


def estimated_sizes(workload: Workload) -> dict[str, int]:
    """File sizes when the reference does not run: the workshop's scaling applied to the cached history's
    bytes per file (labformat's own files are somewhat bigger: they add Hudi's meta columns)."""
    from labformat.workload import HEADROOM, HUDI_MAX_FILE_SIZE, HUDI_SMALL_FILE_LIMIT

    per_file = datasets.parquet_bytes(workload.cached.history_path) // workload.history_files
    max_size = int(per_file * HEADROOM)
    return {"max_file_size": max_size, "small_file_limit": max_size * HUDI_SMALL_FILE_LIMIT // HUDI_MAX_FILE_SIZE}


def _run_engines(spark, engines: tuple[str, ...], workload: Workload, repeat: int, work: Path, isolate: bool,
                 driver_memory: str | None, storage_options: dict[str, str] | None,
                 log: Callable[[str], None]) -> tuple[list[dict[str, Any]], Workload]:
    """Every repetition of every engine's workload, engines alternating; the runs, and the workload
    with the file sizes the reference chose on its first load."""
    runs: list[dict[str, Any]] = []
    for repetition in range(repeat):
        rewritten = None
        for name in run_order(engines):
            job = {"engine": name, "repetition": repetition, "root": str(work / f"rep{repetition + 1}" / name),
                   "workload": workload.to_json(), "rewritten": rewritten, "driver_memory": driver_memory,
                   "storage_options": storage_options if name in S3_ENGINES else None}
            run = run_isolated(job) if isolate else run_job(job, spark)
            runs.append(run)
            if run.get("sizes") and workload.max_file_size is None:
                workload = dataclasses.replace(workload, **run["sizes"])
            if name == REFERENCE:
                rewritten = {d["day"]: d["rewritten_base_files"] for d in run["days"]}
            log(f"repetition {repetition + 1}/{repeat} {name:18s} "
                + (f"load {run['load_seconds']:6.2f} s  " if run["load_seconds"] is not None else " " * 15)
                + "days " + " ".join(f"{d['seconds']:.2f}" for d in run["days"])
                + f"  total {sum(d['seconds'] for d in run['days']):.2f} s"
                + f"  peak RSS {run['peak_rss_bytes'] / 2**30:.2f} GiB")
    return runs, workload


def run_benchmark(preset: str = "small", repeat: int = 3, engines: tuple[str, ...] = DEFAULT_ENGINES, days: int | None = None,
                  max_file_size: str | int | None = None, small_file_limit: str | int | None = None,
                  work_dir: str | os.PathLike = DEFAULT_WORK_DIR, spark=None, isolate: bool = True,
                  log: Callable[[str], None] = print, scenario: str = "seed",
                  history_files: int | None = None, driver_memory: str | None = None,
                  queries: bool = True) -> dict[str, Any]:
    """Run the benchmark and return its results as a JSON-ready dict (tables go under `work_dir`; the
    dataset is generated into labformat's cache if it is not there yet).

    `scenario` is the workload's dataset scenario: `seed` (the new day and corrections of the previous one) or
    `late` (late corrections reaching a month back too). The history is loaded as `history_files`
    base files (HISTORY_FILES of the preset); without `max_file_size`, every engine's file size is
    Hudi's scaled to labformat-bloom's bulk-inserted files, as in the workshop. `driver_memory`
    (`spark.driver.memory`, the session default when None) is every Spark engine's, the same for all.
    `queries=False` skips the standard queries (and labformat-mor's compaction): at `large` the
    drone_id query alone reads every file of every table, minutes an engine.

    Raises BenchmarkError when an engine fails or the engines' tables or query answers disagree.
    """
    from labformat import config as C

    if scenario not in WORKLOADS:
        raise BenchmarkError(f"unknown workload {scenario!r}; choose from {list(WORKLOADS)}")
    if (max_file_size is None) != (small_file_limit is None):
        raise BenchmarkError("give both max_file_size and small_file_limit, or neither (then they are scaled)")
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise BenchmarkError(f"unknown engine(s) {unknown}; choose from {list(ENGINES)}")
    if "io-floor" in engines and REFERENCE not in engines:
        raise BenchmarkError(f"io-floor rewrites the files {REFERENCE} rewrote: select {REFERENCE} too")
    if repeat < 1 or (days is not None and days < 1):
        raise BenchmarkError(f"repeat and days must be at least 1, got repeat={repeat}, days={days}")
    engines = tuple(e for e in ENGINES if e in engines)
    started_at = dt.datetime.now(dt.timezone.utc)
    started = time.perf_counter()
    if spark is None:
        import labformat as lf

        spark = lf.spark_session(app_name="labformat-bench", **spark_conf(driver_memory))
    spec = datasets.spec(preset, scenario=scenario)
    cached = datasets.generate(spark, spec)
    days = spec.batch_days if days is None else min(days, spec.batch_days)
    files = history_files or HISTORY_FILES.get(preset, HISTORY_FILES["small"])
    if max_file_size is not None:
        sizes = C.resolve({"max_file_size": max_file_size, "small_file_limit": small_file_limit}, [C.Scope.WRITE])
        workload = Workload(cached, days, sizes.max_file_size, sizes.small_file_limit, files, scenario)
        sizes_from = "given"
    else:
        workload = Workload(cached, days, None, None, files, scenario)
        sizes_from = f"scaled to {REFERENCE}'s bulk-inserted history"
        if REFERENCE not in engines:
            workload = dataclasses.replace(workload, **estimated_sizes(workload))
            sizes_from = "estimated from the cached history's bytes per file"
    work = Path(work_dir) / preset / workload.scenario
    shutil.rmtree(work, ignore_errors=True)
    with contextlib.ExitStack() as stack:
        storage_options = None
        if any(e in S3_ENGINES for e in engines):
            from labformat.s3_server import S3Server

            server = stack.enter_context(S3Server.start(work / "s3-server"))
            storage_options = server.storage_options
            log(f"a local S3 server (SeaweedFS) at {server.endpoint} for "
                + ", ".join(e for e in engines if e in S3_ENGINES))
        runs, workload = _run_engines(spark, engines, workload, repeat, work, isolate, driver_memory,
                                      storage_options, log)
        log("checking that every table equals the reference ...")
        check = check_tables(spark, runs)
        log(f"  all {len(check['tables'])} tables agree: {check.get('rows', 0):,} rows, hash {check.get('hash')}")
    shutil.rmtree(work / "s3-server", ignore_errors=True)
    last = [run for run in runs if run["repetition"] == repeat - 1]
    timed_queries: list[dict[str, Any]] = []
    compaction = None
    if queries:
        log("queries ...")
        timed_queries = run_queries(spark, workload, last, repeat, log)
        compaction, after = compact_and_query(spark, workload, last, repeat, timed_queries, log)
        timed_queries += after
    for repetition in range(repeat - 1):  # keep only the last repetition's tables (disk)
        shutil.rmtree(work / f"rep{repetition + 1}", ignore_errors=True)
    for run in runs:
        for day in run["days"]:
            day.pop("rewritten_base_files", None)  # long path lists: the counts stay
    return {
        "preset": preset,
        "workload": workload.scenario,
        "date": started_at.date().isoformat(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "repeat": repeat,
        "isolated": isolate,
        "engines": list(engines),
        "options": {"max_file_size": workload.max_file_size, "small_file_limit": workload.small_file_limit,
                    "sizes_from": sizes_from, "history_files": workload.history_files,
                    "bloom_num_entries": workload.bloom_num_entries, "days": days, "delta_merge_file_size": True,
                    "delta_merge_prunes": True,
                    "queries": queries,
                    # In process, the engines ran on the session given, whatever heap it was started with.
                    "driver_memory": driver_memory_of(driver_memory) if isolate
                    else spark.sparkContext.getConf().get("spark.driver.memory", "1g")},
        "machine": machine_info(),
        "dataset": dataset_info(workload),
        "runs": runs,
        "check": check,
        "queries": timed_queries,
        "compaction": compaction,
    }
