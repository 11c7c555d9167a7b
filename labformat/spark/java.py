"""The Java that Spark will start: $JAVA_HOME's, else the first `java` on PATH (what spark-submit runs)."""

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
