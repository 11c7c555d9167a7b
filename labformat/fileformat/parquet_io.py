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

from labformat.errors import CorruptTableError, StorageError, storage_refusal
from labformat.storage import Storage


def unreadable(path: str, exc: BaseException, what: str | None = None) -> CorruptTableError | StorageError:
    """The error for a file of the table that cannot be read: missing, damaged, or refused by the storage
    (StorageError: no permission, ...). `what` names its kind;
    by default told from its folder (change records and the metadata table live under `.hoodie/`)."""
    if what is None:
        what = ("change-record file" if "/.hoodie/cdc/" in f"/{path}" else
                "metadata table file" if "/.hoodie/metadata/" in f"/{path}" else "base file")
    if isinstance(exc, OSError):
        refused = storage_refusal(exc, f"reading {what} {path}")
        if refused is not None:  # the storage said no (permission, ...): not a damaged file
            return refused
    if isinstance(exc, FileNotFoundError):
        return CorruptTableError(f"{what} {path} is missing: deleted after this read or write was planned (a clean "
                                 "that ran meanwhile deletes file slices older than hoodie.cleaner.commits.retained "
                                 "commits) or by hand; run it again")
    return CorruptTableError(f"{what} {path} cannot be read ({type(exc).__name__}: {exc}); the file is damaged")


class CountedFile:
    """A file opened for reading, its reads counted: each `read` is one request to the storage (a ranged
    GET on S3, where opening the file is a HEAD), `requests` and `bytes` so far. Parquet's reader
    asks for the footer first (one read of the file's last 64 KB), then for the column chunks it
    needs; what it asks for is the same on any storage, so a count on a local disk is the count of
    GETs the same read makes on S3 (tests/test_storage_requests.py checks it on a local S3 server)."""

    def __init__(self, source: pa.NativeFile):
        self.source = source
        self.requests = 0
        self.bytes = 0

    def read(self, nbytes: int = -1) -> bytes:
        data = bytes(self.source.read(nbytes))
        self.requests += 1
        self.bytes += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self.source.seek(offset, whence))

    def tell(self) -> int:
        return int(self.source.tell())

    def size(self) -> int:
        return int(self.source.size())

    @property
    def closed(self) -> bool:
        return bool(self.source.closed)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self.source.close()


def read_base_file(storage: Storage, path: str, columns: Sequence[str] | None = None,
                   keep: Callable[[pq.FileMetaData, int], bool] | None = None,
                   counted: Callable[[CountedFile], None] | None = None) -> pa.Table:
    """A base file's rows (all columns, or those of `columns` it has), single-threaded as a Spark
    task has one core; with `keep`, only the row groups `keep(footer, g)` keeps (a reader's
    row-group skipping). With `counted`, the reads go through a `CountedFile` handed to `counted`
    once the file is read (a little slower: each read passes through Python)."""
    try:
        with storage.fs.open_input_file(storage.full_path(path)) as opened:
            source = opened if counted is None else CountedFile(opened)
            try:
                return _read(source, columns, keep)
            finally:
                if counted is not None:
                    counted(source)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise unreadable(path, exc) from None


def _read(source: pa.NativeFile | CountedFile, columns: Sequence[str] | None,
          keep: Callable[[pq.FileMetaData, int], bool] | None) -> pa.Table:
    parquet = pq.ParquetFile(source, page_checksum_verification=True)
    if columns is not None:
        present = set(parquet.schema_arrow.names)
        columns = [c for c in columns if c in present]
    if keep is None:
        return parquet.read(columns=columns, use_threads=False)
    groups = [g for g in range(parquet.metadata.num_row_groups) if keep(parquet.metadata, g)]
    return parquet.read_row_groups(groups, columns=columns, use_threads=False)


def read_base_file_with_footer(storage: Storage, path: str) -> tuple[pa.Table, dict[bytes, bytes], int]:
    """(rows, footer key-value metadata, file size) of a base file, from one open."""
    try:
        with storage.fs.open_input_file(storage.full_path(path)) as source:
            parquet = pq.ParquetFile(source, page_checksum_verification=True)
            kv = parquet.metadata.metadata or {}
            return parquet.read(use_threads=False), kv, source.size()
    except (OSError, ValueError) as exc:
        raise unreadable(path, exc) from None
