"""Reading base files whole: page checksums verified, and anything unreadable a CorruptTableError naming the file.

Base files carry a CRC32 per data page (`write_page_checksum`, parquet's own page checksum):
a bit flipped on disk is then a failed check, never a different value read back. Readers verify
them (every read of a base file, in a Spark task or not, comes through here). Files without checksums (older
ones, Hudi's) are read as they are.
"""

from __future__ import annotations

from typing import Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from labformat.errors import CorruptTableError
from labformat.storage import Storage


def unreadable(path: str, exc: BaseException, what: str | None = None) -> CorruptTableError:
    """The error for a file of the table that cannot be read: missing, or damaged. `what` names its kind;
    by default told from its folder (change records and the metadata table live under `.hoodie/`)."""
    if what is None:
        what = ("change-record file" if "/.hoodie/cdc/" in f"/{path}" else
                "metadata table file" if "/.hoodie/metadata/" in f"/{path}" else "base file")
    if isinstance(exc, FileNotFoundError):
        return CorruptTableError(f"{what} {path} is missing: deleted after this read or write was planned (a clean "
                                 "that ran meanwhile deletes file slices older than hoodie.cleaner.commits.retained "
                                 "commits) or by hand; run it again")
    return CorruptTableError(f"{what} {path} cannot be read ({type(exc).__name__}: {exc}); the file is damaged")


def read_base_file(storage: Storage, path: str, columns: Sequence[str] | None = None,
                   keep: Callable[[pq.FileMetaData, int], bool] | None = None) -> pa.Table:
    """A base file's rows (all columns, or those of `columns` it has), single-threaded as a Spark
    task has one core; with `keep`, only the row groups `keep(footer, g)` keeps (a reader's
    row-group skipping)."""
    try:
        with storage.fs.open_input_file(storage.full_path(path)) as source:
            parquet = pq.ParquetFile(source, page_checksum_verification=True)
            if columns is not None:
                present = set(parquet.schema_arrow.names)
                columns = [c for c in columns if c in present]
            if keep is None:
                return parquet.read(columns=columns, use_threads=False)
            groups = [g for g in range(parquet.metadata.num_row_groups) if keep(parquet.metadata, g)]
            return parquet.read_row_groups(groups, columns=columns, use_threads=False)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise unreadable(path, exc) from None


def read_base_file_with_footer(storage: Storage, path: str) -> tuple[pa.Table, dict[bytes, bytes], int]:
    """(rows, footer key-value metadata, file size) of a base file, from one open."""
    try:
        with storage.fs.open_input_file(storage.full_path(path)) as source:
            parquet = pq.ParquetFile(source, page_checksum_verification=True)
            kv = parquet.metadata.metadata or {}
            return parquet.read(use_threads=False), kv, source.size()
    except (OSError, ValueError) as exc:
        raise unreadable(path, exc) from None
