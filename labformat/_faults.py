"""Crash and pause points for the crash and concurrency tests: `LABFORMAT_CRASH_AT=<point>` kills the writer
process there, `LABFORMAT_PAUSE_AT=<point>` holds it there until the test lets it go."""

from __future__ import annotations

import os
import time

_PAUSE_LIMIT_S = 300.0  # a test that never says "go" must not leave a writer waiting forever


def crash_point(name: str) -> None:
    """At a named point of the write protocol: pause, then die at once without cleanup, when the
    environment asks for this point (tests only)."""
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
