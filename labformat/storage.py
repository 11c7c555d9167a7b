"""File I/O for one table over pyarrow.fs: local paths now, any pyarrow filesystem URI later."""

from __future__ import annotations

import os
import posixpath
import re
import uuid
from dataclasses import dataclass

import pyarrow.fs as pafs

from labformat.errors import InvalidInputError, LabformatError

# The characters Hadoop's glob syntax (what Spark's file sources expand in every path) gives a meaning.
_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")


@dataclass(frozen=True)
class FileInfo:
    path: str  # relative to the table's base path, '/'-separated
    size: int


def within_table(rel: str) -> str:
    """`rel` itself, checked to stay inside the table's folder: an absolute path or one whose `..`
    leads above the table root is a LabformatError (partition paths are checked before they get
    here; this is the defence in depth)."""
    normal = posixpath.normpath(rel)
    if rel.startswith("/") or normal == ".." or normal.startswith("../"):
        raise LabformatError(f"path {rel!r} leads outside the table's folder")
    return rel


class Storage:
    """The table's base path and the few operations the format needs.

    Paths given to and returned by these methods are relative to the base path.
    """

    def __init__(self, base_uri: str | os.PathLike):
        if not isinstance(base_uri, (str, os.PathLike)) or not os.fspath(base_uri):
            raise InvalidInputError(f"a table path must be a non-empty str or os.PathLike, got {base_uri!r}")
        uri = os.fspath(base_uri)
        if "://" in uri:
            self.fs, root = pafs.FileSystem.from_uri(uri)
            self.base_uri = uri.rstrip("/")
        else:
            root = os.path.abspath(uri)
            self.fs = pafs.LocalFileSystem()
            self.base_uri = root
        self.root = root.rstrip("/")

    def full_path(self, rel: str) -> str:
        """The path `self.fs` knows a table-relative path by (what pyarrow readers and writers take)."""
        return f"{self.root}/{within_table(rel)}" if rel else self.root

    def uri(self, rel: str) -> str:
        """A location other readers understand (a plain path for local tables); Spark takes `spark_path`."""
        return f"{self.base_uri}/{within_table(rel)}" if rel else self.base_uri

    def spark_path(self, rel: str) -> str:
        """The location as Spark's file sources take it: `uri(rel)` with Hadoop's glob characters escaped.

        Spark expands globs in every path it reads (`{a,b}`, `[x`, `*`, `?`); a partition value or a
        table folder holding one would otherwise be read as a pattern, and match nothing.
        """
        return _GLOB_CHARS.sub(r"\\\1", self.uri(rel))

    def exists(self, rel: str) -> bool:
        return self.fs.get_file_info(self.full_path(rel)).type != pafs.FileType.NotFound

    def is_file(self, rel: str) -> bool:
        return self.fs.get_file_info(self.full_path(rel)).type == pafs.FileType.File

    def enclosing(self, marker: str) -> str | None:
        """The nearest folder above the base path that holds `marker` (a path relative to that folder,
        such as a table's `.hoodie/hoodie.properties`), or None."""
        parent = posixpath.dirname(self.root)
        while parent and parent != self.root:
            if self.fs.get_file_info(f"{parent}/{marker}").type == pafs.FileType.File:
                return parent
            parent, previous = posixpath.dirname(parent), parent
            if parent == previous:
                break
        return None

    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self.full_path(rel)) as stream:
            return stream.read()

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8")

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Plain write (not atomic): for files whose partial state is harmless (requested/inflight markers)."""
        self.makedirs(rel.rpartition("/")[0])
        with self.fs.open_output_stream(self.full_path(rel)) as out:
            out.write(data)

    def _temp_beside(self, rel: str, data: bytes) -> str:
        """A temp file holding `data` in `rel`'s folder (hidden, named after it); never left behind
        half-written: a failed write (a full disk) deletes it before the error goes on."""
        folder, _, leaf = rel.rpartition("/")
        tmp = f"{folder}/.{leaf}.{uuid.uuid4().hex}.tmp" if folder else f".{leaf}.{uuid.uuid4().hex}.tmp"
        try:
            self.write_bytes(tmp, data)
        except BaseException:
            self._quietly_delete(tmp)
            raise
        return tmp

    def _quietly_delete(self, rel: str) -> None:
        try:
            self.delete(rel)
        except OSError:
            pass  # the error that brought us here is the one to report

    def publish(self, rel: str, data: bytes) -> None:
        """Write `rel` atomically: a temp file beside it, then a rename; never overwrite.

        A reader sees the whole file or no file, which is what makes a completed instant
        all-or-nothing.
        """
        if self.exists(rel):
            raise LabformatError(f"refusing to overwrite {rel}: completed files are immutable")
        tmp = self._temp_beside(rel, data)
        try:
            self.fs.move(self.full_path(tmp), self.full_path(rel))
        except BaseException:
            self._quietly_delete(tmp)
            raise

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Create `rel` holding `data` unless it exists, atomically: False when it already existed.

        What a lock and a requested instant need: of two writers creating the same file, exactly
        one succeeds, and nobody ever sees it half-written. Local files only for now: the data
        goes to a temp file that is then hard-linked to `rel` (link never replaces a file);
        object stores need a conditional put, which pyarrow.fs does not offer.
        """
        if not isinstance(self.fs, pafs.LocalFileSystem):
            raise LabformatError(f"{self.base_uri}: creating a file exclusively (the table lock, a new instant) "
                                 "is implemented for local tables only")
        self.makedirs(rel.rpartition("/")[0])
        tmp = self._temp_beside(rel, data)
        try:
            os.link(self.full_path(tmp), self.full_path(rel))
            return True
        except FileExistsError:
            return False
        finally:
            self._quietly_delete(tmp)

    def replace(self, rel: str, data: bytes) -> None:
        """Write `rel` atomically, replacing any file there (a temp file, then a rename over it): for
        small files a writer rewrites while others may read them (heartbeats)."""
        tmp = self._temp_beside(rel, data)
        try:
            self.fs.move(self.full_path(tmp), self.full_path(rel))
        except BaseException:
            self._quietly_delete(tmp)
            raise

    def touch(self, rel: str) -> bool:
        """Set `rel`'s modification time to now without rewriting it; False when it is gone (local files)."""
        try:
            os.utime(self.full_path(rel))
            return True
        except FileNotFoundError:
            return False

    def modified_time(self, rel: str) -> float | None:
        """`rel`'s modification time in seconds since the epoch, or None when it does not exist."""
        info = self.fs.get_file_info(self.full_path(rel))
        if info.type == pafs.FileType.NotFound or info.mtime_ns is None:
            return None
        return info.mtime_ns / 1e9

    def delete(self, rel: str) -> bool:
        try:
            self.fs.delete_file(self.full_path(rel))
            return True
        except FileNotFoundError:
            return False

    def delete_dir(self, rel: str) -> bool:
        """Delete the folder `rel` and whatever is left in it; False when it did not exist."""
        try:
            self.fs.delete_dir(self.full_path(rel))
            return True
        except FileNotFoundError:
            return False

    def makedirs(self, rel: str) -> None:
        self.fs.create_dir(self.full_path(rel), recursive=True)

    def list(self, rel: str = "", recursive: bool = False) -> list[FileInfo]:
        """Files (not folders) under `rel`; empty when it does not exist."""
        selector = pafs.FileSelector(self.full_path(rel), recursive=recursive, allow_not_found=True)
        out = []
        prefix = len(self.root) + 1
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                out.append(FileInfo(info.path[prefix:], info.size))
        return out
