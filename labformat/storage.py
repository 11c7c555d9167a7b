"""File I/O for one table, on a local disk or on S3: pyarrow.fs for the data, conditional writes for the commit protocol.

One `Storage` interface: reads, listings and deletes shared, and the writes the commit protocol
needs atomic (create if absent, replace, take over if unchanged, touch) each backend's own, as
delta-rs keeps commit atomicity in its LogStore apart from data I/O. `Storage(uri)` picks the backend
by the table path's scheme:

- **local** (`LocalStorage`, a plain path): pyarrow's LocalFileSystem; an instant file is published and created
  exclusively by a hard link from a temp file (link never replaces a file); a heartbeat is
  replaced by a rename.
- **S3** (`S3Storage`; `s3://bucket/prefix`, `s3a://` accepted as a spelling): pyarrow's S3FileSystem for the
  data, and obstore (the Python face of the `object_store` crate delta-rs commits through) for the
  writes that must be conditional: an instant file is a PUT with `If-None-Match: *` (S3 has no
  rename, and a check then a write lets two writers both win), a lock taken over or refreshed is
  a PUT with `If-Match` on the ETag read (Hudi 1.1's storage-based lock, RFC-91).

Credentials and the endpoint come from `storage_options` (the keys delta-rs and hudi-rs take:
`aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`, `aws_region`,
`aws_endpoint_url`, `aws_allow_http`; case-insensitive), else the standard `AWS_*` environment
variables. They travel with the table's URI (`TableUri`) into Spark tasks, which open files
through this module: Spark itself never opens a table path, so no Hadoop S3 connector is needed.
"""

from __future__ import annotations

import errno
import os
import posixpath
import uuid
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from labformat.errors import ConfigError, InvalidInputError, LabformatError

if TYPE_CHECKING:
    from obstore import PutMode
    from obstore.store import ClientConfig, S3Config, S3Store


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


# storage_options key -> the environment variables read when it is not given (first set wins).
S3_OPTIONS = {
    "aws_access_key_id": ("AWS_ACCESS_KEY_ID",),
    "aws_secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "aws_session_token": ("AWS_SESSION_TOKEN",),
    "aws_region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "aws_endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "aws_allow_http": ("AWS_ALLOW_HTTP",),
}
# Other spellings the object_store crate (delta-rs, hudi-rs) accepts for the same settings.
_ALIASES = {"aws_endpoint": "aws_endpoint_url", "endpoint_url": "aws_endpoint_url", "endpoint": "aws_endpoint_url",
            "region": "aws_region", "access_key_id": "aws_access_key_id",
            "secret_access_key": "aws_secret_access_key", "session_token": "aws_session_token",
            "allow_http": "aws_allow_http"}
S3_SCHEMES = ("s3", "s3a")
_LIST_ATTEMPTS = 5


class TableUri(str):
    """A table's base URI that carries the storage options it was opened with.

    Every Spark task that reads or writes the table builds its `Storage` from the base URI it was
    given; this is how the credentials and the endpoint reach it (a cluster's executors have no
    environment of the driver's). Formatting it into a new string drops them: pass it on as it is.
    """

    storage_options: dict[str, str]

    def __new__(cls, uri: str, storage_options: Mapping[str, str] | None = None) -> "TableUri":
        made = super().__new__(cls, uri)
        made.storage_options = dict(storage_options or {})
        return made

    def __reduce__(self) -> tuple[type[TableUri], tuple[str, dict[str, str]]]:
        return TableUri, (str(self), self.storage_options)


def s3_options(given: Mapping[str, object] | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The S3 settings of a table: `given` (any key case, the aliases object_store accepts) over the
    environment's AWS_* variables. ConfigError naming an unknown key."""
    if given is not None and not isinstance(given, Mapping):
        raise ConfigError(f"storage_options must be a mapping of option name to value, got {type(given).__name__}")
    out: dict[str, str] = {}
    for key, value in (given or {}).items():
        name = str(key).strip().lower()
        name = _ALIASES.get(name, name)
        if name not in S3_OPTIONS:
            raise ConfigError(f"unknown storage option {key!r}; S3 tables take {', '.join(S3_OPTIONS)}")
        if value is not None:
            out[name] = str(value)
    for name, variables in S3_OPTIONS.items():
        if name not in out:
            found = next((environ[v] for v in variables if environ.get(v)), None)
            if found is not None:
                out[name] = found
    return out


def _allow_http(options: Mapping[str, str]) -> bool:
    """`aws_allow_http`, parsed as every labformat boolean is (`config.parse_bool`): a value that is
    neither true nor false is an error, not a silent no."""
    from labformat.config import parse_bool

    raw = options.get("aws_allow_http")
    if raw is None:
        return False
    try:
        return parse_bool(raw)
    except ValueError:
        raise ConfigError(f"aws_allow_http={raw!r}: expected true or false") from None


@lru_cache(maxsize=16)
def _s3_file_system(options: tuple[tuple[str, str], ...]) -> pafs.S3FileSystem:
    """One pyarrow S3FileSystem per set of options and process (a task reuses its worker's)."""
    o = dict(options)
    kwargs: dict[str, Any] = {"region": o.get("aws_region") or "us-east-1"}
    if "aws_access_key_id" in o:
        kwargs.update(access_key=o["aws_access_key_id"], secret_key=o.get("aws_secret_access_key"),
                      session_token=o.get("aws_session_token"))
    endpoint = o.get("aws_endpoint_url")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        if parts.scheme == "http" and not _allow_http(o):
            raise ConfigError(f"the endpoint {endpoint} is plain http: set aws_allow_http=true to use it")
        kwargs.update(endpoint_override=parts.netloc, scheme=parts.scheme)
    return pafs.S3FileSystem(**kwargs)


def _object_store(bucket: str, prefix: str, options: tuple[tuple[str, str], ...]) -> S3Store:
    """An obstore S3Store rooted at the table's prefix: the conditional writes pyarrow.fs lacks."""
    from obstore.store import S3Store  # only S3 tables need it

    o = dict(options)
    config: S3Config = {"region": o.get("aws_region") or "us-east-1", "virtual_hosted_style_request": False}
    if "aws_access_key_id" in o:
        config["access_key_id"] = o["aws_access_key_id"]
    if "aws_secret_access_key" in o:
        config["secret_access_key"] = o["aws_secret_access_key"]
    if "aws_session_token" in o:
        config["session_token"] = o["aws_session_token"]
    if "aws_endpoint_url" in o:
        config["endpoint"] = o["aws_endpoint_url"]
    client: ClientConfig = {"allow_http": True} if _allow_http(o) else {}
    return S3Store(bucket, prefix=prefix or None, config=config, client_options=client)


class Storage:
    """The table's base path and the few operations the format needs: reads, listings and deletes
    through pyarrow.fs, shared by every backend; the writes the commit protocol needs to be atomic
    (`create_exclusive`, `replace`, `take_over`, `touch`, as delta-rs keeps them in its LogStore) are
    each backend's own: `LocalStorage`, `S3Storage`, `FileSystemStorage` (another pyarrow file system).

    `Storage(uri, storage_options)` picks the backend by the URI's scheme. Paths given to and
    returned by these methods are relative to the base path.
    """

    fs: pafs.FileSystem
    base_uri: str  # a TableUri on S3, carrying the options into tasks
    root: str  # the base path as `fs` knows it

    def __new__(cls, *args: Any, **kwargs: Any) -> "Storage":
        if cls is Storage:  # Storage(uri, ...): the backend of the URI's scheme
            cls = _backend(args[0] if args else kwargs.get("base_uri"))
        return super().__new__(cls)

    def __init__(self, base_uri: str | os.PathLike[str], storage_options: Mapping[str, object] | None = None):
        uri = _checked_path(base_uri)
        if storage_options is None and isinstance(base_uri, TableUri):
            storage_options = base_uri.storage_options
        if storage_options:
            raise ConfigError(f"storage_options apply to s3:// tables; {uri} is not one")
        self._locate(uri)

    def _locate(self, uri: str) -> None:
        self.fs, root = pafs.FileSystem.from_uri(uri)
        self.base_uri, self.root = uri.rstrip("/"), root.rstrip("/")

    def storage_options(self) -> dict[str, str]:
        """The options other readers (hudi-rs, delta-rs) take to open this table: empty for a local one."""
        return dict(getattr(self.base_uri, "storage_options", {}))

    def full_path(self, rel: str) -> str:
        """The path `self.fs` knows a table-relative path by (what pyarrow readers and writers take)."""
        return f"{self.root}/{within_table(rel)}" if rel else self.root

    def uri(self, rel: str) -> str:
        """A location other readers understand (a plain path for local tables, `s3://...` on S3)."""
        return f"{self.base_uri}/{within_table(rel)}" if rel else self.base_uri

    def exists(self, rel: str) -> bool:
        return bool(self.fs.get_file_info(self.full_path(rel)).type != pafs.FileType.NotFound)

    def is_file(self, rel: str) -> bool:
        return bool(self.fs.get_file_info(self.full_path(rel)).type == pafs.FileType.File)

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
            return bytes(stream.read())

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8")

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Plain write (not atomic on a local disk; a PUT on S3 is): for files whose partial state is
        harmless (requested/inflight markers)."""
        self.makedirs(rel.rpartition("/")[0])
        with self.fs.open_output_stream(self.full_path(rel)) as out:
            out.write(data)

    def makedirs(self, rel: str) -> None:
        self.fs.create_dir(self.full_path(rel), recursive=True)

    def honours_conditional_writes(self) -> bool:
        """Whether a second create-if-absent of the same file is refused (what optimistic concurrency
        control relies on): on a local disk always; on S3 probed (`S3Storage`)."""
        return True

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
        """Write `rel` atomically and never overwrite: of two writers publishing the same file, one
        fails with LabformatError and the file holds the other's bytes. A reader sees the whole file
        or no file, which is what makes a completed instant all-or-nothing (`create_exclusive`)."""
        # A check then a rename let a second writer replace a completed file it had just
        # checked was absent (issue 48, case 11: two creators of one table both won).
        if not self.create_exclusive(rel, data):
            raise LabformatError(f"refusing to overwrite {rel}: completed files are immutable")

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Create `rel` holding `data` unless it exists, atomically: False when it already existed.
        What a lock and a requested instant need: of two writers creating the same file, exactly one
        succeeds, and nobody ever sees it half-written."""
        raise LabformatError(f"{self.base_uri}: creating a file exclusively (the table lock, a new instant) "
                             "needs a local disk or S3")

    def replace(self, rel: str, data: bytes) -> None:
        """Write `rel` atomically, replacing any file there: for small files a writer rewrites while
        others may read them (heartbeats). Here a temp file, then a rename over it."""
        tmp = self._temp_beside(rel, data)
        try:
            self.fs.move(self.full_path(tmp), self.full_path(rel))
        except BaseException:
            self._quietly_delete(tmp)
            raise

    def touch(self, rel: str) -> bool:
        """Set `rel`'s modification time to now without changing it; False when it is gone."""
        held = self.read_bytes(rel) if self.exists(rel) else None
        if held is None:
            return False
        self.replace(rel, held)
        return True

    def take_over(self, rel: str, observed: bytes, data: bytes) -> bool:
        """Replace `rel` with `data` if it still holds `observed`, atomically; whether it did. What
        breaking an expired lock needs: of two writers that found the same lock expired, one wins,
        and a fresh lock taken meanwhile is never replaced. Here the file is moved aside (only one
        writer can move a given file), compared, and the new one created exclusively; a fresh file
        moved aside by mistake is put back."""
        aside = f"{rel}.{uuid.uuid4().hex}.broken"
        try:
            self.fs.move(self.full_path(rel), self.full_path(aside))
        except FileNotFoundError:
            return False  # someone else broke or released it first
        try:
            moved = self.read_bytes(aside)
            if moved != observed:
                # A fresh file written after the expired one was broken: give it back. If a third writer
                # took its place meanwhile, the fresh file's owner finds out when it next reads it.
                self.create_exclusive(rel, moved)
                return False
            return self.create_exclusive(rel, data)
        finally:
            self.delete(aside)

    def modified_time(self, rel: str) -> float | None:
        """`rel`'s modification time in seconds since the epoch, or None when it does not exist."""
        info = self.fs.get_file_info(self.full_path(rel))
        if info.type == pafs.FileType.NotFound or info.mtime_ns is None:
            return None
        return float(info.mtime_ns / 1e9)

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

    def list(self, rel: str = "", recursive: bool = False) -> list[FileInfo]:
        """Files (not folders) under `rel`; empty when it does not exist."""
        selector = pafs.FileSelector(self.full_path(rel), recursive=recursive, allow_not_found=True)
        for attempt in range(_LIST_ATTEMPTS):
            try:
                found = self.fs.get_file_info(selector)
                break
            except OSError as exc:
                # pyarrow's local walk fails with ENOENT when a folder appears while it starts (it lists,
                # fails, then finds the folder there) or a file goes while it walks (another writer's
                # temp file): a walk again sees the tree as it is now.
                if exc.errno != errno.ENOENT or attempt == _LIST_ATTEMPTS - 1:
                    raise
        out = []
        prefix = len(self.root) + 1
        for info in found:
            if info.type == pafs.FileType.File:
                out.append(FileInfo(info.path[prefix:], info.size))
        return out


class FileSystemStorage(Storage):
    """A table on another pyarrow file system (`scheme://...`, not a local disk): reads and plain
    writes work; nothing can be created exclusively there, so writers are refused (`create_exclusive`,
    and so the lock, a take-over and a heartbeat's touch), and a completed instant is published by a
    check then a rename, which two writers at once can both pass."""

    def publish(self, rel: str, data: bytes) -> None:
        if self.exists(rel):
            raise LabformatError(f"refusing to overwrite {rel}: completed files are immutable")
        self.replace(rel, data)

    def honours_conditional_writes(self) -> bool:
        return False

    def take_over(self, rel: str, observed: bytes, data: bytes) -> bool:
        return self.create_exclusive(rel, data)  # refused before anything is moved

    def touch(self, rel: str) -> bool:
        return self.create_exclusive(rel, b"")  # refused: a check then a rewrite could bring a file back


class LocalStorage(Storage):
    """A table on a local disk: a hard link from a temp file creates a file exclusively (link never
    replaces a file), a rename replaces one, a move aside takes one over."""

    def _locate(self, uri: str) -> None:
        if "://" in uri:  # file:///path: the URI is the table's name, the path its root
            self.fs, root = pafs.FileSystem.from_uri(uri)
            self.base_uri, self.root = uri.rstrip("/"), root.rstrip("/")
            return
        self.fs = pafs.LocalFileSystem()
        self.base_uri = os.path.abspath(uri)
        self.root = self.base_uri.rstrip("/")

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        self.makedirs(rel.rpartition("/")[0])
        tmp = self._temp_beside(rel, data)
        try:
            os.link(self.full_path(tmp), self.full_path(rel))
            return True
        except FileExistsError:
            return False
        finally:
            self._quietly_delete(tmp)

    def touch(self, rel: str) -> bool:
        try:
            os.utime(self.full_path(rel))
            return True
        except FileNotFoundError:
            return False


class S3Storage(Storage):
    """A table on S3 (`s3://bucket/prefix`): pyarrow's S3FileSystem for the data, obstore's conditional
    PUTs for the writes that must be atomic (S3 has no rename and no link): `If-None-Match: *` creates
    a file exclusively, `If-Match` on the ETag just read takes one over or refreshes it."""

    def __init__(self, base_uri: str | os.PathLike[str], storage_options: Mapping[str, object] | None = None):
        uri = _checked_path(base_uri)
        if storage_options is None and isinstance(base_uri, TableUri):
            storage_options = base_uri.storage_options
        options = s3_options(storage_options)
        self._options = tuple(sorted(options.items()))
        self._store: S3Store | None = None
        self._conditional: bool | None = None  # whether the store honours conditional writes, once probed
        bucket, _, prefix = uri.partition("://")[2].strip("/").partition("/")
        if not bucket:
            raise InvalidInputError(f"{uri}: an S3 table path names a bucket: s3://bucket/prefix")
        self.fs = _s3_file_system(self._options)
        self.bucket, self.prefix = bucket, prefix
        self.root = (f"{bucket}/{prefix}" if prefix else bucket).rstrip("/")
        self.base_uri = TableUri(f"s3://{self.root}", options)

    @property
    def store(self) -> S3Store:
        """The obstore client (made on first use)."""
        if self._store is None:
            self._store = _object_store(self.bucket, self.prefix, self._options)
        return self._store

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_store": None}  # the client is rebuilt where the Storage lands

    def _put(self, rel: str, data: bytes, mode: PutMode | None = None) -> str | None:
        """PUT `rel` (mode: None overwrites, "create" is If-None-Match: *, {"e_tag": t} is If-Match: t);
        its new ETag. FileExistsError / InterruptedError when the condition fails, OSError otherwise."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, BaseError, PreconditionError

        try:
            result = obstore.put(self.store, within_table(rel), data, mode=mode or "overwrite")
        except AlreadyExistsError:
            raise FileExistsError(rel) from None
        except PreconditionError:
            raise InterruptedError(f"{rel} changed since it was read") from None
        except BaseError as exc:
            raise OSError(f"{self.uri(rel)}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from None
        return result["e_tag"]

    def _get(self, rel: str) -> tuple[bytes, str | None] | None:
        """`rel`'s bytes and ETag, or None when it does not exist."""
        import obstore
        from obstore.exceptions import BaseError, NotFoundError

        try:
            got = obstore.get(self.store, within_table(rel))
            return bytes(got.bytes()), got.meta["e_tag"]
        except (NotFoundError, FileNotFoundError):  # obstore raises the builtin for a 404
            return None
        except BaseError as exc:
            raise OSError(f"{self.uri(rel)}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from None

    def write_bytes(self, rel: str, data: bytes) -> None:
        self._put(rel, data)

    def makedirs(self, rel: str) -> None:
        return  # S3 has no folders: a key's prefix is one

    def honours_conditional_writes(self) -> bool:
        """Probed with a scratch object under `.hoodie/` (some S3 gateways ignore If-None-Match, and
        optimistic concurrency control is unsafe there)."""
        if self._conditional is None:  # probed once per Storage
            probe = f".hoodie/.conditional-write-probe.{uuid.uuid4().hex}"
            try:
                self._put(probe, b"1", mode="create")
                try:
                    self._put(probe, b"2", mode="create")
                    self._conditional = False
                except FileExistsError:
                    self._conditional = True
            finally:
                self._quietly_delete(probe)
        return self._conditional

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        try:
            self._put(rel, data, mode="create")
            return True
        except FileExistsError:
            return False

    def replace(self, rel: str, data: bytes) -> None:
        self._put(rel, data)  # a PUT is atomic

    def touch(self, rel: str) -> bool:
        """No such call on S3: the bytes PUT back with If-Match on the ETag just read, so a file
        deleted or replaced meanwhile is never brought back."""
        held = self._get(rel)
        if held is None:
            return False
        try:
            self._put(rel, held[0], mode={"e_tag": held[1]})
            return True
        except InterruptedError:
            return self.exists(rel)

    def take_over(self, rel: str, observed: bytes, data: bytes) -> bool:
        """A PUT with If-Match on the ETag of the bytes compared."""
        held = self._get(rel)
        if held is None or held[0] != observed:
            return False
        try:
            self._put(rel, data, mode={"e_tag": held[1]})
            return True
        except InterruptedError:
            return False

    def modified_time(self, rel: str) -> float | None:
        found = super().modified_time(rel)
        # S3's Last-Modified has whole seconds, cut down: the write happened in the second after
        # it. The later end, so that a live writer's heartbeat or lock never looks older than it is.
        return None if found is None else found + 1.0


def _checked_path(base_uri: object) -> str:
    if not isinstance(base_uri, (str, os.PathLike)) or not os.fspath(base_uri):
        raise InvalidInputError(f"a table path must be a non-empty str or os.PathLike, got {base_uri!r}")
    return os.fspath(base_uri)


def _backend(base_uri: object) -> type[Storage]:
    """The Storage class of a table path: by its scheme (none: a local path)."""
    uri = _checked_path(base_uri)
    scheme = uri.partition("://")[0].lower() if "://" in uri else ""
    if scheme in S3_SCHEMES:
        return S3Storage
    if not scheme or isinstance(pafs.FileSystem.from_uri(uri)[0], pafs.LocalFileSystem):
        return LocalStorage  # a plain path, or file:///path
    return FileSystemStorage
