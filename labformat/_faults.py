"""Crash points for the crash tests: `LABFORMAT_CRASH_AT=<point>` kills the writer process there."""

from __future__ import annotations

import os


def crash_point(name: str) -> None:
    """Die at once, without cleanup, when the environment asks for this point (tests only)."""
    if os.environ.get("LABFORMAT_CRASH_AT") == name:
        os._exit(86)
