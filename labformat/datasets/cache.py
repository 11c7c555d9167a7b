"""The dataset cache: history and batches written once as parquet, then read back by every lab.

Layout of one cached dataset (`<cache root>/datasets/<preset>-<key_style>-<digest>/`):

    history/            parquet, the initial history
    batch_001/ ...      parquet, one folder per upsert batch
    _COMPLETE.json      written last: spec, generator version, row counts, seconds taken

The cache root is $LABFORMAT_CACHE if set, else `.cache/` in the labformat checkout
(the folder holding labformat's pyproject.toml), else `~/.cache/labformat`. A folder
without the marker is an interrupted run and is regenerated.

Public: `generate(spark, spec, cache_dir=None, *, force=False) -> CachedDataset`,
`load_history(spark, cached)`, `load_batch(spark, cached, day)`, `default_cache_dir(spec)`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from pyspark.sql import DataFrame, SparkSession

from labformat.datasets.drone import GENERATOR_CONF, SCHEMA, batch, history, resolve_spec
from labformat.datasets.spec import GENERATOR_VERSION, DatasetSpec, check_day
from labformat.cache_dir import cache_root
from labformat.errors import DatasetNotCachedError
from labformat.spark.jobs import conf_override

MARKER = "_COMPLETE.json"


@dataclass(frozen=True)
class CachedDataset:
    """Where a generated dataset lives: `history_path`, one path per batch day, and its spec."""

    spec: DatasetSpec
    root: str
    history_path: str
    batch_paths: list[str] = field(default_factory=list)
    history_rows: int | None = None
    batch_rows: list[int] = field(default_factory=list)
    seconds: float | None = None  # time the generating run took (not this call)

    @property
    def marker_path(self) -> str:
        return str(Path(self.root) / MARKER)

    def batch_path(self, day: int) -> str:
        check_day(self.spec, day)
        return self.batch_paths[day - 1]


def default_cache_dir(spec: DatasetSpec | str) -> Path:
    """`<cache root>/datasets/<preset>-<key_style>-<digest>`."""
    return cache_root() / "datasets" / resolve_spec(spec).cache_name


def parquet_bytes(folder: str | os.PathLike[str]) -> int:
    """Bytes of the parquet files of a cached folder (history or one batch): a listing, no data read."""
    return sum(p.stat().st_size for p in Path(folder).glob("*.parquet"))


def _layout(spec: DatasetSpec, root: Path) -> CachedDataset:
    return CachedDataset(
        spec=spec,
        root=str(root),
        history_path=str(root / "history"),
        batch_paths=[str(root / f"batch_{day:03d}") for day in range(1, spec.batch_days + 1)],
    )


# The spec fields the history's rows depend on; the others (batch_days, fractions, ...) only shape batches.
HISTORY_FIELDS = ("key_style", "drones", "history_days", "start", "seed")


# Batches generated at once (threads submitting Spark jobs).
BATCH_WRITERS = 3


def _cached_history_of_same_rows(spec: DatasetSpec, root: Path) -> Path | None:
    """The history folder of a complete sibling cache whose spec gives the same history rows, if any.

    A spec that differs only in its batches (say `late_fraction=0`) then copies a history in
    a fraction of a second instead of generating it again.
    """
    wanted = {f: spec.params()[f] for f in HISTORY_FIELDS}
    for marker_path in sorted(root.parent.glob(f"*/{MARKER}")):
        if marker_path.parent == root:
            continue
        try:
            marker = json.loads(marker_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        other = marker.get("spec") or {}
        if marker.get("generator_version") == GENERATOR_VERSION and {f: other.get(f) for f in HISTORY_FIELDS} == wanted:
            return marker_path.parent / "history"
    return None


def _read_marker(root: Path, spec: DatasetSpec) -> dict[str, Any] | None:
    try:
        marker: dict[str, Any] = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if marker.get("spec") != spec.params() or marker.get("generator_version") != GENERATOR_VERSION:
        return None
    return marker


def _with_marker(cached: CachedDataset, marker: dict[str, Any]) -> CachedDataset:
    return CachedDataset(
        spec=cached.spec,
        root=cached.root,
        history_path=cached.history_path,
        batch_paths=cached.batch_paths,
        history_rows=marker.get("history_rows"),
        batch_rows=list(marker.get("batch_rows", [])),
        seconds=marker.get("seconds"),
    )


def _parquet_rows(path: str) -> int:
    """Row count from the parquet footers (metadata only, no data read)."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(str(p)).num_rows for p in sorted(Path(path).glob("*.parquet")))


def generate(spark: SparkSession, spec: DatasetSpec | str, cache_dir: str | os.PathLike[str] | None = None, *,
             force: bool = False) -> CachedDataset:
    """Write history and every batch of `spec` as parquet under `cache_dir`, unless already complete.

    Returns a `CachedDataset` (paths, spec, row counts). A second call with the same spec
    finds the marker and does no Spark work; `force=True` regenerates.
    """
    spec = resolve_spec(spec)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir(spec)
    cached = _layout(spec, root)
    marker = None if force else _read_marker(root, spec)
    if marker is not None:
        return _with_marker(cached, marker)
    with _generation_lock(root):
        # Another process (a second notebook, the benchmark) may have generated it while this one waited.
        marker = None if force else _read_marker(root, spec)
        if marker is not None:
            return _with_marker(cached, marker)
        return _generate(spark, spec, root, cached)


@contextmanager
def _generation_lock(root: Path) -> Iterator[None]:
    """An exclusive lock on `.generating.lock` inside the dataset's folder (generating never removes it),
    so that two processes generating the same dataset never delete each other's files (POSIX; elsewhere
    no lock)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".generating.lock", "a") as handle:
        try:
            import fcntl
        except ImportError:  # not POSIX
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _generate(spark: SparkSession, spec: DatasetSpec, root: Path, cached: CachedDataset) -> CachedDataset:
    # Only our own entries are removed: cache_dir may be a folder the caller also uses.
    (root / MARKER).unlink(missing_ok=True)
    for old in [root / "history", *root.glob("batch_[0-9][0-9][0-9]")]:
        shutil.rmtree(old, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)

    # Microsecond timestamps (not Spark's legacy INT96) so pyarrow and hudi-rs read them as-is.
    options = {**GENERATOR_CONF, "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
    timings = []
    began = started = time.perf_counter()
    same_history = _cached_history_of_same_rows(spec, root)
    if same_history is not None:
        shutil.copytree(same_history, cached.history_path)
        timings.append(round(time.perf_counter() - started, 3))

    def write(frame: Callable[[], DataFrame], path: str) -> float:
        one = time.perf_counter()
        frame().write.mode("overwrite").parquet(path)
        return round(time.perf_counter() - one, 3)

    with conf_override(spark, options):
        if same_history is None:
            timings.append(write(lambda: history(spark, spec), cached.history_path))
        # A day's batch is a small job that leaves cores idle between its stages; a month of them
        # runs several at once (Spark schedules concurrent jobs from threads), about twice as fast
        # on 2 cores. Each writes its own folder, so the rows do not depend on the interleaving.
        with ThreadPoolExecutor(max_workers=BATCH_WRITERS) as pool:
            timings += list(pool.map(lambda job: write(*job), [
                (lambda day=day: batch(spark, spec, day), path) for day, path in enumerate(cached.batch_paths, start=1)
            ]))

    marker = {
        "spec": spec.params(),
        "generator_version": GENERATOR_VERSION,
        "history_rows": _parquet_rows(cached.history_path),
        "batch_rows": [_parquet_rows(p) for p in cached.batch_paths],
        "seconds": round(time.perf_counter() - began, 3),  # wall time: batches overlap
        "history_seconds": timings[0],
        # Set when the history was copied from a sibling cache: history_seconds is then the copy's time.
        "history_copied_from": Path(same_history).parent.name if same_history is not None else None,
        "batch_seconds": timings[1:],
    }
    # The marker goes last, via a temp name, so a crash never leaves a cache that looks complete.
    tmp = root / (MARKER + ".tmp")
    tmp.write_text(json.dumps(marker, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, root / MARKER)
    return _with_marker(cached, marker)


def _require_complete(cached: CachedDataset) -> None:
    if _read_marker(Path(cached.root), cached.spec) is None:
        raise DatasetNotCachedError(f"no complete dataset at {cached.root}; run datasets.generate(spark, spec) first")


def load_history(spark: SparkSession, cached: CachedDataset) -> DataFrame:
    """The cached history as a DataFrame with exactly SCHEMA."""
    _require_complete(cached)
    return spark.read.schema(SCHEMA).parquet(cached.history_path)


def load_batch(spark: SparkSession, cached: CachedDataset, day: int) -> DataFrame:
    """Cached upsert batch `day` (1..spec.batch_days) as a DataFrame with exactly SCHEMA."""
    path = cached.batch_path(day)
    _require_complete(cached)
    return spark.read.schema(SCHEMA).parquet(path)
