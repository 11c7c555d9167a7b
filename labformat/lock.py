"""The table lock: a file under `.hoodie/.aux/` that one writer at a time holds, briefly, around its timeline changes."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from types import TracebackType

from labformat.errors import ConcurrentWriteError, LockTimeoutError
from labformat.storage import Storage

log = logging.getLogger(__name__)

# Hudi's file-system lock provider keeps its lock file under the timeline folder too; `.aux` is a
# folder every reader skips (hudi-rs and our Timeline list only `.hoodie/`'s own files).
LOCK_PATH = ".hoodie/.aux/lock"
_POLL_S = 0.05


@dataclass(frozen=True)
class LockOwner:
    """Who holds the lock, as written into the lock file when it was taken."""

    owner_id: str  # unique per acquisition: a writer tells its own lock from a successor's
    pid: int
    host: str
    acquired_at: float  # seconds since the epoch
    expire_s: float  # the holder's `hoodie.write.lock.filesystem.expire`, in seconds; 0: never

    @classmethod
    def new(cls, expire_s: float) -> "LockOwner":
        return cls(uuid.uuid4().hex, os.getpid(), socket.gethostname(), time.time(), expire_s)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def parse(cls, raw: bytes) -> "LockOwner | None":
        """The owner a lock file names, or None when it is not one labformat wrote."""
        try:
            fields = json.loads(raw.decode())
            return cls(str(fields["owner_id"]), int(fields["pid"]), str(fields["host"]),
                       float(fields["acquired_at"]), float(fields["expire_s"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.acquired_at, timezone.utc).strftime("%H:%M:%S.%f")[:-3]
        return f"pid {self.pid} on {self.host} (owner {self.owner_id[:8]}, since {since} UTC)"


class TableLock:
    """The table's lock, taken by exclusive create and released by delete; a context manager.

    ::

        with TableLock(storage, wait_s=60, expire_s=30):
            ...  # no other labformat writer changes the timeline meanwhile

    While held, a daemon thread refreshes the file's modification time every quarter of `expire_s`,
    so a live holder's lock never expires; a killed holder's lock expires `expire_s` after its last
    refresh, and the next writer breaks it. The holder's own `expire_s`, stored in the file,
    decides: a waiter configured for a shorter expiry must not break a longer-lived holder's lock.
    """

    def __init__(self, storage: Storage, wait_s: float, expire_s: float):
        self.storage = storage
        self.wait_s = wait_s
        self.expire_s = expire_s
        self.owner: LockOwner | None = None  # ours, while held
        self.broken: list[LockOwner | None] = []  # expired locks this acquisition broke (for tests, reports)
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None
        self._lost = False

    # ---- acquire / release --------------------------------------------------------------------

    def acquire(self) -> "TableLock":
        """Take the lock, waiting up to `wait_s` and breaking an expired one; LockTimeoutError otherwise."""
        if self.owner is not None:
            raise RuntimeError("TableLock is not reentrant: already held")
        deadline = time.monotonic() + self.wait_s
        while True:
            me = LockOwner.new(self.expire_s)
            if self.storage.create_exclusive(LOCK_PATH, me.to_bytes()):
                self.owner, self._lost = me, False
                self._start_refresher()
                return self
            held = self._read()
            if held is None:
                continue  # released between our create and our read: try again at once
            raw, modified = held
            holder = LockOwner.parse(raw)
            if self._expired(holder, modified):
                # Broken and taken in one step: the expired lock is replaced by ours only if it is
                # still the one judged expired (a second waiter that found it expired loses).
                if self.storage.take_over(LOCK_PATH, raw, me.to_bytes()):
                    log.info("%s: broke the expired table lock of %s", self.storage.base_uri, holder)
                    self.broken.append(holder)
                    self.owner, self._lost = me, False
                    self._start_refresher()
                    return self
                continue
            if time.monotonic() >= deadline:
                raise LockTimeoutError(self._timeout_message(holder, modified))
            time.sleep(_POLL_S)

    def release(self) -> None:
        """Give the lock back: delete the file if it is still ours (an expired lock may have been broken)."""
        if self.owner is None:
            return
        self._stop.set()
        if self._refresher is not None:
            self._refresher.join()
        held = self._read()
        if held is not None and self._is_ours(held[0]):
            self.storage.delete(LOCK_PATH)
        self.owner, self._refresher = None, None

    def verify(self) -> None:
        """ConcurrentWriteError unless the lock file is still ours: called before an irreversible step."""
        held = self._read()
        if self.owner is None or self._lost or held is None or not self._is_ours(held[0]):
            holder = LockOwner.parse(held[0]) if held else None
            raise ConcurrentWriteError(
                f"this writer lost the table lock {LOCK_PATH} (another writer took it for expired"
                + (f"; now held by {holder.describe()}" if holder else "") + "); nothing was published. "
                "A writer stalled for longer than hoodie.write.lock.filesystem.expire looks dead to others")

    def __enter__(self) -> "TableLock":
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.release()
        except Exception as cleanup:  # noqa: BLE001 - the error that left the block comes first
            if exc is None:
                raise
            # Not released: it expires `expire_s` after its last refresh, and the next writer breaks it.
            exc.add_note(f"labformat: the table lock {LOCK_PATH} was not released ({type(cleanup).__name__}: "
                         f"{cleanup}); it expires {self.expire_s:g} s after its last refresh")

    # ---- inside ------------------------------------------------------------------------------

    def _read(self) -> tuple[bytes, float] | None:
        """The lock file's bytes and modification time, or None when there is no lock file."""
        modified = self.storage.modified_time(LOCK_PATH)
        if modified is None:
            return None
        try:
            return self.storage.read_bytes(LOCK_PATH), modified
        except FileNotFoundError:
            return None

    def _is_ours(self, raw: bytes) -> bool:
        holder = LockOwner.parse(raw)
        return holder is not None and self.owner is not None and holder.owner_id == self.owner.owner_id

    def _expired(self, holder: LockOwner | None, modified: float) -> bool:
        # A file labformat did not write (no owner to ask) expires by the waiter's own setting.
        expire_s = holder.expire_s if holder is not None else self.expire_s
        return expire_s > 0 and time.time() - modified > expire_s

    def _start_refresher(self) -> None:
        if self.expire_s <= 0:
            return  # never expires: nothing to keep fresh
        self._stop = threading.Event()
        every = self.expire_s / 4

        def refresh() -> None:
            while not self._stop.wait(every):
                try:
                    held = self._read()
                    if held is None or not self._is_ours(held[0]):
                        self._lost = True
                        return
                    self.storage.touch(LOCK_PATH)
                except OSError:
                    pass  # a failed refresh is one missed refresh; the next one may work

        self._refresher = threading.Thread(target=refresh, name="labformat-lock-refresh", daemon=True)
        self._refresher.start()

    def _timeout_message(self, holder: LockOwner | None, modified: float) -> str:
        who = holder.describe() if holder is not None else "an unknown writer (the lock file names no owner)"
        age = time.time() - modified
        expire_s = holder.expire_s if holder is not None else self.expire_s
        expiry = (f"it expires {max(0.0, expire_s - age):.1f} s from now unless its holder refreshes it"
                  if expire_s > 0 else "it never expires (hoodie.write.lock.filesystem.expire=0)")
        return (f"the table lock {LOCK_PATH} is held by {who}, last refreshed {age:.1f} s ago; waited "
                f"{self.wait_s:g} s (hoodie.write.lock.wait_time_ms). Retry later; {expiry}. If that process "
                f"is gone, deleting {LOCK_PATH} frees the table at once")
