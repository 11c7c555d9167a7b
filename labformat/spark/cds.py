"""Class-data sharing for the local Spark JVM: the classes a labformat session loads, archived once, mapped by every later start.

A Spark JVM loads thousands of classes before its first job; parsing and verifying them is about half of
the 15 s of CPU a `local[1]` writer process spends starting (Java 17, 2 cores). With a dynamic
CDS archive of those classes (`-XX:ArchiveClassesAtExit`, then `-XX:SharedArchiveFile`) the same
start took 8 s of CPU and 10 s instead of 18 s of wall time (00 and 05 at `small`, one run each, ran 13 and
16 s faster than the last run without it). The
tests start a JVM per writer process (dozens of them) and the main job one per notebook, so
`python3 scripts/lab.py test` and `run` prepare the archive once (73 s on a quiet machine, 1 to 3 minutes:
`python -m labformat.spark.cds`; the workload it archives is `labformat/cds_dump.py`), and from then on every
`spark_session` on this machine maps it, a notebook's too (the standalone cluster's daemons and the
tests' Spark Connect server as well). The dump's JVM takes $LABFORMAT_JAVA_OPTIONS like any other: options
that turn sharing off there (`-Xshare:off`) leave no archive, and sessions start without one.

The archive is tied to one Java and one Spark: its name is a digest of the `java` executable
and of pyspark's jars, so a different Java or Spark prepares its own (a JVM given another's archive
starts without it, `-Xshare:auto`). A truncated archive, though, crashes Java 17 (SIGBUS), so one is
used only with its check mark (`<archive>.ok`, its size once a JVM proved it maps) and only at that
size. `LABFORMAT_CDS=0` turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from labformat.spark.java import java_executable

ENV = "LABFORMAT_CDS"


def _java() -> Path | None:
    found = java_executable()
    return Path(found).resolve() if found else None


def _jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def archive_path() -> Path | None:
    """Where this machine's archive for its Java and pyspark lives (whether or not it exists yet)."""
    from labformat.cache_dir import cache_root

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


def _checked(path: Path) -> Path:
    """The archive's check mark: its size, written once the JVM has mapped it (`_maps`)."""
    return path.with_name(path.name + ".ok")


def java_option(user_options: str = "") -> str:
    """`-XX:SharedArchiveFile="..."` when this machine's archive is ready and whole, else the empty
    string; also empty when `user_options` (the caller's own JVM options) already speak of sharing."""
    if not enabled() or any(flag in user_options for flag in ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")):
        return ""
    path = archive_path()
    if path is None:
        return ""
    try:
        whole = path.stat().st_size == int(_checked(path).read_text())
    except (OSError, ValueError):
        return ""
    # Quoted: Spark splits the options like a shell, and a checkout's path may hold spaces.
    return f'-XX:SharedArchiveFile="{path}"' if whole else ""


def prepare(quiet: bool = False) -> Path | None:
    """Create the archive if it is missing: a session in a child process runs a small upsert and
    query with `-XX:ArchiveClassesAtExit`, the JVM writes the archive as it exits, a JVM started with
    `-Xshare:on` proves it maps, and only then is it moved into place with its check mark (a JVM
    never maps half a file: a truncated archive crashes Java 17 rather than being ignored). Its path,
    or None when this Java cannot make one or the cache folder is unusable: sessions then start as
    before. One process prepares at a time; the others wait and use its archive."""
    path = archive_path()
    if path is None or not enabled():
        return None
    if java_option():
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _one_at_a_time(path.parent / ".lock"):
            if java_option():  # prepared by another process while this one waited
                return path
            for stale in path.parent.glob("*.partial*"):  # an interrupted dump's leftovers
                stale.unlink(missing_ok=True)
            return _make(path, quiet)
    except OSError as exc:
        if not quiet:
            print(f"  no class-data sharing archive ({exc}); Spark starts without it", flush=True)
        return None


def log_path() -> Path | None:
    """Where `prepare_in_background`'s child writes its output: beside the archive, one per process."""
    path = archive_path()
    return path.with_name(f"{path.name}.{os.getpid()}.log") if path else None


def prepare_in_background() -> subprocess.Popen[bytes] | None:
    """Start `prepare` in a child process when the archive is missing (None when it is ready, off, or
    this machine cannot have one). The main job runs 00, which counts but times nothing a lesson uses,
    beside it and waits for it (`wait_for`) before any other notebook: one after the other, the dump
    (36 s) and 00 (49 s) took 85 s from a fresh clone; side by side, sharing the two cores, 72 to 78 s.
    Its output goes to `log_path()`."""
    path, log_to = archive_path(), log_path()
    if path is None or log_to is None or not enabled() or java_option():
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_to, "w")
    except OSError:
        return None
    with log:
        return subprocess.Popen([sys.executable, "-m", "labformat.spark.cds"], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)


def wait_for(process: subprocess.Popen[bytes] | None) -> None:
    """Wait for `prepare_in_background`'s child and say how it went: the archive, or why there is none
    (the child's last lines, its exit code, its log)."""
    if process is None:
        return
    if process.poll() is None:
        print("  waiting for the class-data sharing archive, prepared beside the first notebook ...", flush=True)
    code = process.wait()
    log = log_path()
    assert log is not None  # the child was started with it
    if java_option():
        print(f"  archive ready: {archive_path()}", flush=True)
        log.unlink(missing_ok=True)
        return
    try:
        said = [line.strip() for line in log.read_text().splitlines() if line.strip()][-2:]
    except OSError:
        said = []
    print(f"  no class-data sharing archive (exit {code}: {' / '.join(said) or 'no output'}; log: {log}); "
          "Spark starts without it", flush=True)


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """Interrupt `prepare_in_background`'s child (as Ctrl-C would: it then kills its dump's JVM) and wait."""
    if process is None or process.poll() is not None:
        return
    try:
        # A Ctrl-C in the terminal reached it too: a second interrupt could cut its clean-up short.
        process.wait(timeout=2)
        return
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def _one_at_a_time(lock: Path) -> Iterator[None]:
    with open(lock, "a") as held:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock, at worst two processes dump and the last one wins
            yield
            return
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def _make(path: Path, quiet: bool) -> Path | None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    started = time.monotonic()
    if not quiet:
        print("Preparing the Spark JVM's class-data sharing archive, once per Java and Spark "
              "(1 to 3 minutes; every later Spark start then takes about half the CPU) ...", flush=True)
    # A session of its own, so that an interrupt here takes its JVM down with it: a JVM left behind
    # would write its archive a minute later.
    process = subprocess.Popen([sys.executable, "-m", "labformat.cds_dump", str(partial)],
                               env={**os.environ, ENV: "0"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=hasattr(os, "killpg"))
    try:
        output, _ = process.communicate(timeout=900)
    finally:
        if hasattr(os, "killpg"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
    problem = ("" if process.returncode == 0 else (output.strip().splitlines()[-1:] or ["no output"])[0])
    if not problem:
        problem = _maps(partial)
    if problem:
        for leftover in path.parent.glob(f"{partial.name}*"):
            leftover.unlink(missing_ok=True)
        if not quiet:
            print(f"  no archive ({problem}); Spark starts without it", flush=True)
        return None
    os.replace(partial, path)
    _checked(path).write_text(str(path.stat().st_size))
    Path(f"{partial}.classpath").unlink(missing_ok=True)
    if not quiet:
        print(f"  done in {time.monotonic() - started:.0f} s: {path}", flush=True)
    return path


def _maps(archive: Path) -> str:
    """Empty when a JVM on the dump's class path maps `archive` with sharing required, else why not."""
    java = _java()
    try:
        classpath = Path(f"{archive}.classpath").read_text()
    except OSError:
        return "the dump recorded no class path"
    if java is None:
        return "no java"
    with tempfile.TemporaryDirectory() as folder:  # a crashing JVM writes its hs_err file here
        result = subprocess.run([str(java), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath,
                                 "-version"], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        return f"a JVM could not map it (exit {result.returncode})"
    return ""


if __name__ == "__main__":
    print(prepare(quiet="--quiet" in sys.argv[1:]) or "no archive")
