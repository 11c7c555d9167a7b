"""Pause and crash points of the commit protocol, public for tests and the concurrency lab: `arm(crash_at=point)`
makes the writer process die there, `arm(pause_at=point, pause_dir=folder)` holds it there until a test lets it go
(a test's writer process calls `arm` itself, before it writes: no setting a production job could carry arms a
point), and `holding(Gate(point))` holds one thread there (the concurrent-writers notebook's race).

The points, in the order a write meets them: after_requested, after_start, after_write,
before_publish, after_commit (`write/transaction.py` calls `crash_point` at each).
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

_PAUSE_LIMIT_S = 300.0  # a test that never says "go" must not leave a writer waiting forever
POINTS = ("after_requested", "after_start", "after_write", "before_publish", "after_commit")


@dataclass
class _Armed:
    crash_at: str | None = None
    pause_at: str | None = None
    pause_dir: str | None = None


_armed = _Armed()


def arm(crash_at: str | None = None, pause_at: str | None = None, pause_dir: str | None = None) -> None:
    """Arm this process's points: it dies at `crash_at` (exit code 86, no cleanup) and waits at
    `pause_at` on a file barrier in `pause_dir` (`_pause`). Each call replaces the last; `arm()`
    disarms. ValueError for a point the protocol does not have, or a pause without its folder."""
    for point in (crash_at, pause_at):
        if point is not None and point not in POINTS:
            raise ValueError(f"no point {point!r}; the points are {', '.join(POINTS)}")
    if pause_at is not None and not pause_dir:
        raise ValueError(f"a pause at {pause_at!r} needs the folder of its barrier files (pause_dir)")
    _armed.crash_at, _armed.pause_at, _armed.pause_dir = crash_at, pause_at, pause_dir


def crash_point(name: str) -> None:
    """At a named point of the write protocol: hold the thread a `Gate` holds there, then pause and
    die at once without cleanup where `arm` asked for this point (tests only)."""
    gate = getattr(_held, "gate", None)
    if gate is not None and gate.point == name:
        gate.reached.set()
        if not gate.go.wait(_PAUSE_LIMIT_S):
            raise RuntimeError(f"held at {name} for {_PAUSE_LIMIT_S:g} s and never let go")
    if _armed.pause_at == name and _armed.pause_dir is not None:  # arm() requires the folder
        _pause(name, _armed.pause_dir)
    if _armed.crash_at == name:
        os._exit(86)


def _pause(name: str, folder: str) -> None:
    """A file barrier: create `<folder>/<name>.reached`, then wait until `<folder>/<name>.go` exists.

    Files rather than sleeps, so that a test orders two writers exactly: it waits for `.reached`,
    lets the other writer act, then creates `.go`.
    """
    with open(os.path.join(folder, f"{name}.reached"), "w") as marker:
        marker.write(str(os.getpid()))
    deadline = time.monotonic() + _PAUSE_LIMIT_S
    while not os.path.exists(os.path.join(folder, f"{name}.go")):
        if time.monotonic() > deadline:
            os._exit(87)
        time.sleep(0.02)


# ---- in-process gates: one thread held at a point, the others go on (the concurrency notebook) ----

_held = threading.local()


@dataclass
class Gate:
    """Holds the thread that set it (`holding`) at `point` until `go` is set; `reached` says it got there."""

    point: str
    reached: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)


@contextmanager
def holding(gate: Gate) -> Iterator[Gate]:
    """Within this block, the calling thread stops at `gate.point`; other threads never do
    (a thread-local, unlike `arm`, which holds every writer of the process)."""
    _held.gate = gate
    try:
        yield gate
    finally:
        _held.gate = None
