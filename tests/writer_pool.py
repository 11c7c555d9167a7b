"""Writer processes whose Spark session is already up: a test takes a warm one, and the next starts warming meanwhile.

A writer process (`tests.concurrent_writer`, `tests.crash_writer`) spends most of its life starting
a JVM (8-10 s with the class-data archive on 2 busy cores) before a write of a few dozen rows.
`spawn` hands the test a process started earlier for it, which has its `local[1]` session and its
first job behind it, then starts a replacement in the background. Two wait ready (most of these
tests race two writers), so a test waits for a JVM only when it asks for a third. Each process runs one writer
and exits, exactly as a fresh
`python -m <module>` would: the writer modules call `lf.spark_session`, which returns the session
already there, and arm the crash and pause points their test put in the environment
(`tests.helpers.arm_writer_points`), which `spawn` sets before the module runs.

    python -m tests.writer_pool     # a warm process: starts its session, then waits for one job on stdin
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WRITER_MASTER = "local[1]"
# Every writer process's session: one core, no UI, one shuffle partition (tiny writes); its JVM takes
# the tests' $LABFORMAT_JAVA_OPTIONS (the root conftest.py), tuned for starting rather than running long.
WRITER_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
}
# The crash and pause points a test asks of its writer process, which arms them itself
# (`tests.helpers.arm_writer_points`): the library reads no environment variable for them.
CRASH_AT, PAUSE_AT, PAUSE_DIR = "LABFORMAT_CRASH_AT", "LABFORMAT_PAUSE_AT", "LABFORMAT_PAUSE_DIR"
# Set per job, never inherited by a warm process from the test that started it.
_PER_JOB = (PAUSE_AT, CRASH_AT, PAUSE_DIR, "CRASH_WRITER_OPERATION", "SPARK_LOCAL_REMOTE", "LABFORMAT_TEST_WRITER_MASTER")

POOL_SIZE = 2
_ready: list[subprocess.Popen] = []


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _PER_JOB}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _start() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.writer_pool"], env=_base_env(), cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def spawn(module: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """`python -m module *args` with `env`, in a warm process: a Popen whose stdout and stderr the
    caller reads (`communicate`) as usual. A writer of another master (a Spark Connect client) gets a
    fresh process of its own."""
    if env.get("LABFORMAT_TEST_WRITER_MASTER"):
        return subprocess.Popen([sys.executable, "-m", module, *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    for dead in [p for p in _ready if p.poll() is not None]:  # died waiting: say why, hand out another
        _ready.remove(dead)
        sys.stderr.write(f"a warm writer died waiting (exit {dead.returncode}): {dead.stderr.read()[-2000:]}\n")
    process = _ready.pop(0) if _ready else _start()
    while len(_ready) < POOL_SIZE:
        _ready.append(_start())
    process.stdin.write(json.dumps({"module": module, "argv": args, "env": env}) + "\n")
    process.stdin.flush()
    return process


@atexit.register
def _release() -> None:
    """The waiting processes read end-of-file and exit."""
    for process in _ready:
        try:
            process.stdin.close()
            process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()


def _serve() -> None:
    import runpy

    import labformat as lf
    from tests.helpers import telemetry

    spark = lf.spark_session(master=WRITER_MASTER, **WRITER_CONF)
    telemetry(spark, 40, partitions=1).count()  # the first job's code generation, before any writer waits
    line = sys.stdin.readline()
    if not line:
        spark.stop()
        return
    job = json.loads(line)
    # The job's environment exactly, as a fresh process would have it (the JVM and its Python
    # workers keep the one they started with: the test session's, less _PER_JOB).
    os.environ.clear()
    os.environ.update(job["env"])
    sys.argv = [job["module"], *job["argv"]]
    runpy.run_module(job["module"], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _serve()
