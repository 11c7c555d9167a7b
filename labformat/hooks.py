"""Pause and crash points of the commit protocol, public for tests and the concurrency lab: `LABFORMAT_CRASH_AT=<point>`
kills the writer process there, `LABFORMAT_PAUSE_AT=<point>` holds it there until a test lets it go, and
`holding(Gate(point))` holds one thread there (the concurrent-writers notebook's race).

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


def crash_point(name: str) -> None:
    """At a named point of the write protocol: pause, then die at once without cleanup, when the
    environment asks for this point (tests only)."""
    gate = getattr(_held, "gate", None)
    if gate is not None and gate.point == name:
        gate.reached.set()
        if not gate.go.wait(_PAUSE_LIMIT_S):
            raise RuntimeError(f"held at {name} for {_PAUSE_LIMIT_S:g} s and never let go")
    if os.environ.get("LABFORMAT_PAUSE_AT") == name:
        _pause(name, os.environ["LABFORMAT_PAUSE_DIR"])
    if os.environ.get("LABFORMAT_CRASH_AT") == name:
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
    (a thread-local, unlike the environment variables, which hold every writer of a process)."""
    _held.gate = gate
    try:
        yield gate
    finally:
        _held.gate = None
