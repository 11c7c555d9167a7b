"""Writer heartbeats: `.hoodie/.heartbeat/<instant>`, refreshed while a write is in flight, tell a live writer from a dead one."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from labformat.errors import ConcurrentWriteError
from labformat.storage import Storage

HEARTBEAT_DIR = ".hoodie/.heartbeat"  # Hudi's folder and naming: one file per instant, named by its time


def heartbeat_path(instant_time: str) -> str:
    return f"{HEARTBEAT_DIR}/{instant_time}"


@dataclass(frozen=True)
class HeartbeatStatus:
    """What the heartbeat of one pending instant says about its writer."""

    instant_time: str
    age_s: float | None  # seconds since the last beat; None: no heartbeat file
    tolerance_s: float  # older than this, the writer counts as dead
    pid: int | None = None
    host: str | None = None

    @property
    def alive(self) -> bool:
        return self.age_s is not None and self.age_s <= self.tolerance_s

    def describe(self) -> str:
        if self.age_s is None:
            return "no heartbeat"
        writer = f", pid {self.pid} on {self.host}" if self.pid is not None else ""
        return f"heartbeat {self.age_s:.1f} s ago{writer}"


class Heartbeat:
    """This writer's heartbeat for its instant: a daemon thread in the driver refreshes the file's
    modification time every `interval_s`, from `start` until `stop` (which deletes the file).

    The file holds the writer's interval and tolerable misses, so whoever judges it uses the
    writer's own tolerance: a writer beating every minute is not declared dead by a checker that
    expects a beat every second.
    """

    def __init__(self, storage: Storage, instant_time: str, interval_s: float, tolerable_misses: int):
        self.storage = storage
        self.instant_time = instant_time
        self.interval_s = interval_s
        self.tolerable_misses = tolerable_misses
        self.lost = False  # the file vanished under us: another writer took this instant for dead
        # Tells this writer's file from one another writer made for the same instant (a resumed clean's).
        self.owner_id = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> str:
        return heartbeat_path(self.instant_time)

    def start(self) -> "Heartbeat":
        body = {"instant": self.instant_time, "pid": os.getpid(), "host": socket.gethostname(),
                "interval_ms": int(self.interval_s * 1000), "tolerable_misses": self.tolerable_misses,
                "owner_id": self.owner_id}
        self.storage.replace(self.path, json.dumps(body).encode())
        self._thread = threading.Thread(target=self._beat, name=f"labformat-heartbeat-{self.instant_time}",
                                        daemon=True)
        self._thread.start()
        return self

    def check(self) -> None:
        """ConcurrentWriteError unless the heartbeat file is still this writer's: a writer that took
        this instant for dead (this process was frozen past its tolerance) deleted it when it rolled
        the instant back. Read now, not left to the beating thread, which may not have run since the
        process was resumed."""
        try:
            body = json.loads(self.storage.read_text(self.path))
            ours = isinstance(body, dict) and body.get("owner_id") == self.owner_id
        except (FileNotFoundError, ValueError):  # UnicodeDecodeError included
            ours = False
        if self.lost or not ours:
            raise ConcurrentWriteError(
                f"the heartbeat of instant {self.instant_time} is gone or another writer's: another writer "
                "took this write for dead (it stalled for longer than hoodie.client.heartbeat.interval_in_ms "
                "x (tolerable misses + 1)) and rolled it back; nothing was committed")

    def stop(self) -> None:
        """Stop beating and delete the heartbeat file (the instant is committed, rolled back or abandoned)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.storage.delete(self.path)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                # A touch, not a rewrite: a heartbeat deleted by a writer that rolled this instant
                # back must stay deleted, not come back to make a dead instant look alive.
                if not self.storage.touch(self.path):
                    self.lost = True
                    return
            except OSError:
                pass  # one missed beat; the tolerance is there for this


def heartbeat_status(storage: Storage, instant_time: str, interval_s: float, tolerable_misses: int) -> HeartbeatStatus:
    """The heartbeat of `instant_time`, judged by the tolerance its writer stored
    (interval x (tolerable misses + 1)); `interval_s` and `tolerable_misses` stand in when the file
    does not say (it is not one labformat wrote)."""
    rel = heartbeat_path(instant_time)
    modified = storage.modified_time(rel)
    if modified is None:
        return HeartbeatStatus(instant_time, None, interval_s * (tolerable_misses + 1))
    pid = host = None
    try:
        body = json.loads(storage.read_text(rel))
        interval_s = float(body["interval_ms"]) / 1000
        tolerable_misses = int(body["tolerable_misses"])
        pid, host = int(body["pid"]), str(body["host"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return HeartbeatStatus(instant_time, max(0.0, time.time() - modified), interval_s * (tolerable_misses + 1),
                           pid, host)


def delete_heartbeats(storage: Storage, keep: set[str]) -> list[str]:
    """Delete the heartbeat files of instants not in `keep` (the pending ones): left by a writer
    killed after publishing, or by one whose instant was rolled back. Under the table lock."""
    deleted = []
    for info in storage.list(HEARTBEAT_DIR):
        leaf = info.path.rsplit("/", 1)[-1]
        if leaf.startswith("."):
            continue  # a temp file of a heartbeat being written
        if leaf not in keep:
            storage.delete(info.path)
            deleted.append(leaf)
    return deleted
