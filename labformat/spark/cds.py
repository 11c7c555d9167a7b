"""Class-data sharing for the local Spark JVM: the classes a labformat session loads, archived once, mapped by every later start.

A Spark JVM loads some 20,000 classes before its first job; parsing and verifying them is most of
the 15 s of CPU a `local[1]` writer process spends starting (Java 17, 2 cores). With a dynamic
CDS archive of those classes (`-XX:ArchiveClassesAtExit`, then `-XX:SharedArchiveFile`) the same
start took 8 s of CPU and 10 s instead of 18 s of wall time. The workshop starts a JVM per
notebook and the tests one per writer process, so `python3 scripts/lab.py` prepares the archive
once (`python -m labformat.spark.cds`; the workload it archives is `cds_dump.py`) and every `spark_session` on this machine maps it.

The archive is tied to one Java and one Spark: its name is a digest of the `java` executable
and of pyspark's jars, so a different Java or Spark prepares its own. A JVM that finds the
archive unusable anyway starts without it (`-Xshare:auto`, Java's default), only slower.
`LABFORMAT_CDS=0` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENV = "LABFORMAT_CDS"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found else None


def _jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def archive_path() -> Path | None:
    """Where this machine's archive for its Java and pyspark lives (whether or not it exists yet)."""
    from labformat.datasets.cache import cache_root

    java, jars = _java(), _jars()
    if java is None or not jars.is_dir():
        return None
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    for jar in sorted(jars.iterdir()):
        digest.update(f"|{jar.name}:{jar.stat().st_size}".encode())
    return cache_root() / "jvm" / f"spark-{digest.hexdigest()[:16]}.jsa"


def enabled() -> bool:
    return os.environ.get(ENV, "1").lower() not in ("0", "false", "no", "off")


def java_option() -> str:
    """`-XX:SharedArchiveFile=...` when this machine's archive is ready, else the empty string."""
    if not enabled():
        return ""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path is not None and path.is_file() else ""


def prepare(quiet: bool = False) -> Path | None:
    """Create the archive if it is missing: a session in a child process runs a small upsert and
    query with `-XX:ArchiveClassesAtExit`, the JVM writes the archive as it exits, and it is moved
    into place whole (a JVM starting meanwhile never maps half a file). Its path, or None when
    this Java cannot dump one (a JDK without its base archive): sessions then start as before."""
    path = archive_path()
    if path is None or not enabled():
        return None
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
    if not quiet:
        print("Preparing the Spark JVM's class-data sharing archive (once per Java and Spark) ...", flush=True)
    env = {**os.environ, ENV: "0"}
    result = subprocess.run([sys.executable, "-m", "labformat.spark.cds_dump", str(partial)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        if not quiet:
            tail = result.stdout.strip().splitlines()[-1:] or ["no output"]
            print(f"  no archive ({tail[0]}); Spark starts without it", flush=True)
        return None
    os.replace(partial, path)
    return path


if __name__ == "__main__":
    print(prepare(quiet="--quiet" in sys.argv[1:]) or "no archive")
