"""Hudi's file sizes scaled to the workshop's data: the history bulk inserted as HISTORY_FILES base files, and the write options scaled to them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

import labformat as lf
from labformat import config as C
from labformat import datasets
from labformat.lab.frames import key_ranges_frame
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
    return {"bulk_insert_sort_mode": SortMode.GLOBAL_SORT, "bulk_insert_parallelism": files,
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
