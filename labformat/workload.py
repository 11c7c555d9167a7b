"""The workshop's workload on a table, shared by the lab and the benchmark: Hudi's file sizes scaled to the
data (the history bulk inserted as HISTORY_FILES base files, the write options scaled to them) and the
standard queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

import pandas as pd

import labformat as lf
from labformat import config as C
from labformat import datasets
from labformat.model.enums import SortMode

# Hudi's defaults are sized for a cluster: base files up to 120 MB, small below 100 MB, bloom
# filters for 60,000 keys (the registry's defaults, which are Hudi's). The workshop keeps the option
# names and the 120:100 ratio, and scales the sizes to the laptop's data.
HUDI_MAX_FILE_SIZE = C.default("max_file_size")
HUDI_SMALL_FILE_LIMIT = C.default("small_file_limit")
HUDI_BLOOM_NUM_ENTRIES = C.default("bloom_num_entries")
HISTORY_FILES = 32
# max_file_size sits this far above the smallest bulk-inserted file: every history file is then
# at least 87% of the maximum, above the small-file limit (83%), so upserts never pad the
# history's files with new keys (a padded file's key range would span weeks).
HEADROOM = 1.15


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
        return float(HUDI_MAX_FILE_SIZE / self.max_file_size)

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
    return {"bulk_insert_sort_mode": SortMode.GLOBAL_SORT, "bulk_insert_parallelism": files,
            "bloom_num_entries": max(1, spec.history_rows // files)}


def scaled_sizes(table: lf.Table) -> ScaledSizes:
    """Scale Hudi's sizes to `table`'s bulk-inserted files: max_file_size 15% above the smallest of them,
    small_file_limit at Hudi's 100/120 of it (so none of them is small), bloom filters sized for a file's keys."""
    files = base_files(table)
    if files.empty:
        raise lf.LabformatError(f"{table.path} has no base files to scale the file sizes to")
    smallest = int(files["size_bytes"].min())
    rows = int(files["rows"].median())
    max_size = int(smallest * HEADROOM)
    return ScaledSizes(len(files), smallest, rows, max_size, max_size * HUDI_SMALL_FILE_LIMIT // HUDI_MAX_FILE_SIZE,
                       max(1, rows))


BASE_FILE_COLUMNS = ["path", "file_id", "partition_path", "instant", "min_key", "max_key", "rows", "row_groups",
                     "size_bytes"]


def base_files(table: lf.Table, as_of: str | None = None) -> pd.DataFrame:
    """One row per latest base file: path, file_id, partition_path, instant, min_key, max_key, rows,
    row_groups, size_bytes. Reads only metadata: the file listing and each base file's footer."""
    slices = table.file_slices(as_of)
    footers = table.footers.key_ranges([s.path for s in slices])
    rows = [{"path": s.path, "file_id": s.file_id, "partition_path": s.partition_path,
             "instant": s.base_instant_time, "min_key": footers[s.path].min_key,
             "max_key": footers[s.path].max_key, "rows": footers[s.path].num_rows,
             "row_groups": footers[s.path].num_row_groups, "size_bytes": s.size_bytes}
            for s in slices]
    return pd.DataFrame(rows, columns=BASE_FILE_COLUMNS)


def standard_queries(table: lf.Table, spec: datasets.DatasetSpec) -> dict[str, str]:
    """A point lookup by record key, a one-hour time window, and a non-key filter on drone_id.

    The looked-up key is a real one, taken from the base files' footers, not from a scan: of the
    files' smallest keys, one that the most files' key ranges hold (the smallest such), so that where
    files overlap (a day's inserts packed into small files) column stats keep several files and the
    bloom filters have some to drop; on files with disjoint ranges it is the table's smallest key. The
    window is 10:00-11:00 on the last history day.
    """
    hour = datetime.combine(spec.day_date(spec.history_days - 1), time(10))
    return {
        "point lookup": f"record_key = '{lookup_key(base_files(table))}'",
        "one-hour window": f"ts >= '{hour:%Y-%m-%d %H:%M:%S}' AND ts < '{hour + timedelta(hours=1):%Y-%m-%d %H:%M:%S}'",
        "drone_id filter": "drone_id = 'drone0001'",
    }


def lookup_key(files: pd.DataFrame) -> str:
    """Of the files' `min_key`s, the smallest of those held by the most files' [min_key, max_key]."""
    holding = {key: int(((files["min_key"] <= key) & (files["max_key"] >= key)).sum()) for key in files["min_key"]}
    most = max(holding.values())
    return str(min(key for key, n in holding.items() if n == most))
