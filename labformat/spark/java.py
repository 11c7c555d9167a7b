"""The Java that Spark will start ($JAVA_HOME's, else the first `java` on PATH: what spark-submit runs) and the
options labformat adds to every Spark JVM it starts ($LABFORMAT_JAVA_OPTIONS)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    return shutil.which("java")


OPTIONS_ENV = "LABFORMAT_JAVA_OPTIONS"


def extra_options() -> str:
    """$LABFORMAT_JAVA_OPTIONS: options for every Spark JVM labformat starts (a session's driver and
    executors, a standalone cluster's daemons). The tests set a JIT that stops at its first tier:
    on `tiny` data a JVM's CPU goes to compiling code it runs a few times, and 02 under nbval took
    168 CPU-s with Java's default JIT, 124 with `-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`."""
    return os.environ.get(OPTIONS_ENV, "").strip()
