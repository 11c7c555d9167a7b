"""Read-only inspection of any Hudi or labformat table: timeline, file groups, footers, row groups and what range pruning keeps.

Everything comes from the timeline's files, the file listing of the completed commits and the
parquet footers, so it needs no Spark, no schema and nothing labformat wrote: it works on tables
Apache Hudi wrote as well. It never writes to the table (no lock, no rollback of a pending
instant, no metadata table): charts go to a folder the caller names. The only rows it reads are
the record keys of a few row groups, to sample keys for range pruning.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from labformat import properties as P
from labformat.errors import CorruptTableError, TableNotFoundError
from labformat.fileformat.footers import KeyFooter
from labformat.fs_view import FileSystemView
from labformat.model.instant import INSTANT_TIME_RE, WRITE_ACTIONS, State, parse_instant_time
from labformat.schema import RECORD_KEY
from labformat.storage import Storage
from labformat.timeline import TIMELINE_DIR, Timeline

_STATES = {"requested": State.REQUESTED.value, "inflight": State.INFLIGHT.value}
_STATE_RANK = {State.REQUESTED.value: 0, State.INFLIGHT.value: 1, State.COMPLETED.value: 2}


@dataclass(frozen=True)
class Inspection:
    """What `inspect_table` found, one frame per view (each described where it is built)."""

    base_uri: str
    location: str  # the path as the caller gave it (what the text output shows)
    properties: dict[str, str]
    timeline: pd.DataFrame
    file_slices: pd.DataFrame
    base_files: pd.DataFrame
    row_groups: pd.DataFrame
    pruning: pd.DataFrame

    @property
    def file_groups(self) -> pd.DataFrame:
        """One row per file group: partition, file id, its slices, the latest slice's instant and size."""
        if self.file_slices.empty:
            return pd.DataFrame(columns=["partition_path", "file_id", "slices", "latest_instant", "size_bytes",
                                         "log_files", "log_bytes"])
        latest = self.file_slices[self.file_slices["latest"]].set_index(["partition_path", "file_id"])
        groups = self.file_slices.groupby(["partition_path", "file_id"]).size().rename("slices").to_frame()
        groups["latest_instant"] = latest["instant"]
        groups["size_bytes"] = latest["size_bytes"]
        # A merge-on-read file group's latest slice: the log files a snapshot read merges into its base file.
        groups["log_files"] = latest["log_files"]
        groups["log_bytes"] = latest["log_bytes"]
        return groups.reset_index()


# ---- the timeline -------------------------------------------------------------------------------

def _instant_files(storage: Storage) -> list[tuple[str, str, str, str]]:
    """(time, action, state, file) of every instant file in `.hoodie/`, whatever its action: Hudi's
    tables also hold clean, deltacommit, compaction, savepoint ... instants labformat never writes."""
    out = []
    for info in storage.list(TIMELINE_DIR):
        parts = info.path.rsplit("/", 1)[-1].split(".")
        if not parts or not INSTANT_TIME_RE.match(parts[0]) or len(parts) not in (2, 3):
            continue
        if len(parts) == 2:  # `<time>.inflight` is a commit's inflight file (timeline layout 1)
            action, state = ("commit", "inflight") if parts[1] == "inflight" else (parts[1], State.COMPLETED.value)
        elif parts[2] in _STATES:
            action, state = parts[1], _STATES[parts[2]]
        else:
            continue
        out.append((parts[0], action, state, info.path))
    return out


def _utc(seconds: float | None) -> pd.Timestamp | None:
    return None if seconds is None else pd.Timestamp(datetime.fromtimestamp(seconds, timezone.utc))


def timeline_frame(storage: Storage, timeline: Timeline) -> pd.DataFrame:
    """One row per instant in its furthest state: instant, action, state, started (the instant
    time, UTC), file_time (the modification time of its furthest state's file: when it got there,
    unless the table was copied since), and for completed writes the operation, base files and
    rows written."""
    furthest: dict[tuple[str, str], tuple[str, str]] = {}
    for time, action, state, path in _instant_files(storage):
        seen = furthest.get((time, action))
        if seen is None or _STATE_RANK[state] > _STATE_RANK[seen[0]]:
            furthest[(time, action)] = (state, path)
    writes = {i.time: i for i in timeline.completed_writes()}
    rows = []
    for (time, action), (state, path) in sorted(furthest.items()):
        row = {"instant": time, "action": action, "state": state,
               "started": pd.Timestamp(parse_instant_time(time)), "file_time": _utc(storage.modified_time(path)),
               "operation": None, "files_written": None, "rows_written": None}
        if state == State.COMPLETED.value and action in {a.value for a in WRITE_ACTIONS} and time in writes:
            metadata = timeline.commit_metadata(writes[time])
            row.update(operation=metadata.operation_type, files_written=len(metadata.write_stats),
                       rows_written=sum(s.num_writes for s in metadata.write_stats))
        rows.append(row)
    return pd.DataFrame(rows, columns=["instant", "action", "state", "started", "file_time", "operation",
                                       "files_written", "rows_written"])


# ---- file groups, slices, footers ---------------------------------------------------------------

def file_slices_frame(view: FileSystemView) -> pd.DataFrame:
    """Every file slice of every live file group, oldest first within a group: partition_path,
    file_id, instant, path, size_bytes and rows as its commit recorded them, its log files (count
    and bytes; merge-on-read only), latest."""
    rows = []
    for group in view.file_groups():
        latest = group.latest_slice(view.as_of)
        for instant in sorted(group.slices):
            s = group.slices[instant]
            rows.append({"partition_path": s.partition_path, "file_id": s.file_id, "instant": instant,
                         "path": s.path, "size_bytes": s.size_bytes, "rows": s.num_records,
                         "log_files": len(s.log_paths), "log_bytes": s.log_bytes,
                         "latest": latest is not None and latest.base_instant_time == instant})
    return pd.DataFrame(rows, columns=["partition_path", "file_id", "instant", "path", "size_bytes", "rows",
                                       "log_files", "log_bytes", "latest"])


def _footer(storage: Storage, path: str) -> tuple[dict, list[dict]]:
    """One base file's footer: the file's row (key range, rows, row groups, bloom filter) and its row groups'."""
    try:
        meta = pq.read_metadata(storage.full_path(path), filesystem=storage.fs)
    except (OSError, ValueError) as exc:
        raise CorruptTableError(f"cannot read the footer of base file {path}: {exc}") from None
    keys = KeyFooter.parse(meta.metadata)
    key_column = next((i for i in range(meta.num_columns) if meta.schema.column(i).path == RECORD_KEY), None)
    groups = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        stats = group.column(key_column).statistics if key_column is not None else None
        bounded = stats is not None and stats.has_min_max
        groups.append({"path": path, "row_group": g, "rows": group.num_rows,
                       "compressed_bytes": sum(group.column(c).total_compressed_size for c in range(group.num_columns)),
                       "min_key": stats.min if bounded else None, "max_key": stats.max if bounded else None})
    file_row = {"min_key": keys.min_key, "max_key": keys.max_key, "footer_rows": meta.num_rows,
                "row_groups": meta.num_row_groups,
                "bloom_type": keys.bloom_type if keys.bloom is not None else None,
                "bloom_bytes": len(keys.bloom) if keys.bloom is not None else 0}
    return file_row, groups


def footers(storage: Storage, slices: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The latest base files with their footers' key range, rows, row groups and bloom filter;
    and their row groups (rows, compressed bytes, record-key min/max from the column statistics)."""
    latest = slices[slices["latest"]].reset_index(drop=True) if not slices.empty else slices
    with ThreadPoolExecutor(max_workers=8) as pool:  # pyarrow releases the GIL while it reads
        found = list(pool.map(lambda p: _footer(storage, p), latest["path"]))
    files = pd.concat([latest.drop(columns=["latest"]).reset_index(drop=True),
                       pd.DataFrame([f for f, _ in found],
                                    columns=["min_key", "max_key", "footer_rows", "row_groups", "bloom_type",
                                             "bloom_bytes"])], axis=1)
    groups = pd.DataFrame([g for _, gs in found for g in gs],
                          columns=["path", "row_group", "rows", "compressed_bytes", "min_key", "max_key"])
    return files, groups


# ---- range pruning ------------------------------------------------------------------------------

def sample_keys(storage: Storage, files: pd.DataFrame, groups: pd.DataFrame, count: int,
                seed: int = 0) -> list[tuple[str, str]]:
    """`count` distinct (partition path, record key) pairs of the table (fewer when it holds fewer):
    each from a random row group of a random non-empty base file, seeded, so a rerun samples the
    same keys. Reads the record-key column of those row groups only; a table without
    `_hoodie_record_key` gives none."""
    # In key order, not listing order: file ids are random, and the same table must give the same sample.
    live = files[files["footer_rows"] > 0].sort_values(["partition_path", "min_key", "max_key"], ignore_index=True)
    if live.empty or count <= 0 or groups.empty or groups["min_key"].isna().all():
        return []
    rng = np.random.default_rng(seed)
    cache: dict[tuple[str, int], list[str]] = {}
    out: dict[tuple[str, str], None] = {}
    for _ in range(20 * count):  # draws, so a table of fewer keys than asked for ends too
        if len(out) == count:
            break
        row = live.iloc[int(rng.integers(len(live)))]
        group = int(rng.integers(int(row["row_groups"])))
        if (row["path"], group) not in cache:
            parquet = pq.ParquetFile(storage.full_path(row["path"]), filesystem=storage.fs)
            cache[(row["path"], group)] = parquet.read_row_group(group, columns=[RECORD_KEY]).column(0).to_pylist()
        keys = cache[(row["path"], group)]
        if keys:
            out[(row["partition_path"], keys[int(rng.integers(len(keys)))])] = None
    return list(out)


def range_pruning(files: pd.DataFrame, keys: list[tuple[str | None, str]]) -> pd.DataFrame:
    """Per key: the base files of its partition (all partitions when None), and those range pruning
    keeps, i.e. whose footer [min key, max key] holds it, as the BLOOM index's first step does. A
    file without a key range cannot be pruned; an empty one holds no key."""
    rows = []
    for partition, key in keys:
        candidates = files if partition is None else files[files["partition_path"] == partition]
        candidates = candidates[candidates["footer_rows"] > 0]
        unranged = candidates["min_key"].isna() | candidates["max_key"].isna()
        kept = candidates[unranged | ((candidates["min_key"] <= key) & (candidates["max_key"] >= key))]
        rows.append({"partition_path": partition, "key": key, "files_in_partition": len(candidates),
                     "kept_by_range": len(kept), "kept_file_ids": ",".join(kept["file_id"].str[:8])})
    return pd.DataFrame(rows, columns=["partition_path", "key", "files_in_partition", "kept_by_range",
                                       "kept_file_ids"])


# ---- the whole inspection -----------------------------------------------------------------------

def inspect_table(path: str | os.PathLike, sample: int = 12, keys: list[str] | None = None,
                  seed: int = 0) -> Inspection:
    """Inspect the table at `path` without changing it: `sample` keys drawn from its base files
    (or the given `keys`, looked up in every partition) are checked against the key ranges."""
    storage = Storage(path)
    if not storage.exists(P.PROPERTIES_PATH):
        raise TableNotFoundError(f"{storage.base_uri} holds no Hudi table (no {P.PROPERTIES_PATH})")
    # Loaded, not checked: inspecting needs none of what labformat requires to write a table.
    props = P.load_properties(storage.read_text(P.PROPERTIES_PATH))
    timeline = Timeline(storage)
    slices = file_slices_frame(FileSystemView(timeline))
    files, groups = footers(storage, slices)
    wanted = [(None, k) for k in keys] if keys else sample_keys(storage, files, groups, sample, seed)
    return Inspection(storage.base_uri, os.fspath(path), props, timeline_frame(storage, timeline), slices, files, groups,
                      range_pruning(files, wanted))


# ---- output -------------------------------------------------------------------------------------

def _mb(size) -> str:
    return f"{size / 1024**2:,.2f} MB"


def _table(frame: pd.DataFrame, max_rows: int) -> str:
    if frame.empty:
        return "  (none)"
    text = frame.head(max_rows).to_string(index=False)
    more = f"\n  ... {len(frame) - max_rows} more" if len(frame) > max_rows else ""
    return "\n".join("  " + line for line in text.splitlines()) + more


def render_text(ins: Inspection, max_rows: int = 20) -> str:
    """The inspection as plain text, one section per view."""
    props = ins.properties
    files, pruning = ins.base_files, ins.pruning
    out = [f"Table {props.get(P.TABLE_NAME, '?')} at {ins.location}",
           f"  {props.get(P.TABLE_TYPE, '?')}, table version {props.get(P.TABLE_VERSION, '?')}, "
           f"record key {props.get(P.RECORD_KEY_FIELDS, '?')}, partition fields "
           f"{props.get(P.PARTITION_FIELDS) or '(none)'}, key generator "
           f"{props.get('hoodie.table.keygenerator.class', '(not recorded)').rsplit('.', 1)[-1]}"]
    stamp = lambda t, fmt: "" if pd.isna(t) else pd.Timestamp(t).strftime(fmt)  # noqa: E731
    timeline = ins.timeline.assign(started=ins.timeline["started"].map(lambda t: stamp(t, "%Y-%m-%d %H:%M:%S.%f")[:-3]),
                                   file_time=ins.timeline["file_time"].map(lambda t: stamp(t, "%Y-%m-%d %H:%M:%S")))
    out += ["", f"Timeline: {len(timeline)} instants "
                f"({(timeline['state'] == 'completed').sum()} completed)", _table(timeline, max_rows)]
    groups = ins.file_groups
    logs = int(groups["log_files"].sum()) if len(groups) else 0
    if not logs:  # copy-on-write, or a merge-on-read table just compacted: no log columns to show
        groups = groups.drop(columns=["log_files", "log_bytes"])
    out += ["", f"File groups: {len(groups)} in {groups['partition_path'].nunique()} partition(s), "
                f"{len(ins.file_slices)} file slices" + (f", {logs} log files in the latest slices" if logs else ""),
            _table(groups, max_rows)]
    shown = files[["partition_path", "file_id", "instant", "size_bytes", "footer_rows", "row_groups", "min_key",
                   "max_key", "bloom_type", "bloom_bytes"]]
    sizes = files["size_bytes"]
    out += ["", f"Base files (latest slices): {len(files)}, "
                + (f"{_mb(sizes.sum())} in all, {_mb(sizes.min())} to {_mb(sizes.max())}, median {_mb(sizes.median())}"
                   if len(files) else "none"), _table(shown, max_rows)]
    groups_shown = ins.row_groups.assign(file_id=ins.row_groups["path"].str.rsplit("/", n=1).str[-1].str.split("_").str[0])
    out += ["", f"Row groups: {len(ins.row_groups)}",
            _table(groups_shown[["file_id", "row_group", "rows", "compressed_bytes", "min_key", "max_key"]], max_rows)]
    if pruning.empty:
        out += ["", "Range pruning: no keys to try (no record keys in the footers)"]
    else:
        out += ["", f"Range pruning for {len(pruning)} keys: keeps {pruning['kept_by_range'].mean():.1f} of "
                    f"{pruning['files_in_partition'].mean():.1f} base files per key on average",
                _table(pruning, max_rows)]
    return "\n".join(out)


def save_charts(ins: Inspection, folder: str | os.PathLike) -> list[Path]:
    """The lab's charts of this table as PNG files in `folder` (created; refused inside the table)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from labformat.lab import frames, viz

    folder = Path(folder).resolve()
    root = Path(ins.base_uri).resolve() if "://" not in ins.base_uri else None
    if root is not None and (folder == root or root in folder.parents):
        raise ValueError(f"charts go outside the table: {folder} is inside {root}")
    folder.mkdir(parents=True, exist_ok=True)
    names = frames.commit_names_of(zip(ins.timeline["instant"], ins.timeline["operation"].fillna("")))
    drawn = [("key_ranges.png", lambda ax: viz.plot_file_key_ranges(
                 ins.base_files.assign(commit=ins.base_files["instant"].map(names)), ax=ax)),
             ("file_sizes.png", lambda ax: viz.plot_file_sizes(ins.base_files, ax=ax)),
             ("timeline.png", lambda ax: viz.plot_instants(ins.timeline, ax=ax)),
             ("range_pruning.png", lambda ax: viz.plot_range_pruning(ins.pruning, ax=ax))]
    saved = []
    for name, draw in drawn:
        fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
        draw(ax)
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
        saved.append(folder / name)
    return saved
