"""The one SparkSession builder: local by default, any master accepted, JVM output kept in a log file."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from labformat.errors import ConfigError, JavaNotFoundError
from labformat.spark.java import java_executable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17

_JAVA_FIX = (
    "Spark 4 needs Java {min}+. Install it with `apt-get install openjdk-17-jre-headless` "
    "(Debian/Ubuntu), or create the conda environment from environment.yml "
    "(`conda env create -f environment.yml`), then set JAVA_HOME or put `java` on PATH."
)

# Options every labformat session gets unless the caller overrides them.
DEFAULT_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Arrow batches are what the base-file writers receive; 10k rows keeps task memory flat.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    # One time zone everywhere, or the same data renders differently per laptop.
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "true",
    # Progress bars on the JVM's stderr end up inside notebook cells and break nbval.
    "spark.ui.showConsoleProgress": "false",
    # Spark's own default. The JVM grows its heap towards the limit whatever the work needs: at
    # `small`, 10 days of upserts peaked at 2.83 GiB for the process tree with 4g, 1.76 GiB with 1g,
    # and were no slower (15.5 s against 17.6 s). A cluster sets its own.
    "spark.driver.memory": "1g",
    # Whole-stage codegen of wide projections (the drone generator's) yields Java methods over
    # 8 KB, which the JIT never compiles: they would run interpreted, about 6x slower.
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # The upsert caches its deduplicated batch for one or two passes; compressing that cache cost
    # more than the passes saved (0.75 s vs 0.47 s for an 80k-row batch on 2 cores).
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # GLOBAL_SORT's range bounds come from a sample seeded by Spark's RDD ids, which differ with
    # what ran before (a cold vs warm dataset cache). Sampling up to 10,000 rows per partition
    # takes every row of a `tiny` partition, so its files and key ranges repeat run after run,
    # in the notebooks, the tests and the benchmark alike.
    "spark.sql.execution.rangeExchange.sampleSizePerPartition": "10000",
}

# A local master's defaults besides (a laptop's; a cluster's own configuration is left alone).
# labformat's writes give every shuffle its task count (spark/partitioning.py), so adaptive execution
# has nothing to coalesce there and only runs each query stage as a job of its own: at `small` a
# day's upsert took a median 1.83 s with it and 1.40 s without (8 days each, alternating, one
# process). Without it a shuffle of one's own queries takes spark.sql.shuffle.partitions tasks, and
# Spark's 200 are a cluster's count: twice the cores instead.
LOCAL_CONF = {"spark.sql.adaptive.enabled": "false"}
if hasattr(socket, "AF_UNIX"):  # not on Windows' Python
    # Executors talk to their Python workers over a Unix domain socket rather than TCP on
    # localhost, where each Python task waited about 40 ms for its first Arrow batch (Nagle's
    # algorithm meeting delayed ACKs). 22 tasks of an identity mapInArrow, medians of 15 on 2
    # cores: 0.66-0.70 s over TCP, 0.31-0.39 s over the socket (a JVM-only pass: 0.09 s).
    DEFAULT_CONF["spark.python.unix.domain.socket.enabled"] = "true"


def check_java() -> int:
    """Return the major version of the Java that Spark will use; raise JavaNotFoundError if it cannot start Spark 4."""
    java = java_executable()
    fix = _JAVA_FIX.format(min=MIN_JAVA)
    if java is None:
        home = os.environ.get("JAVA_HOME")
        where = f"JAVA_HOME={home} has no bin/java" if home else "JAVA_HOME is unset"
        raise JavaNotFoundError(f"No Java runtime found ({where}, and no `java` on PATH). {fix}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(f"`{java} -version` failed: {exc}. {fix}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise JavaNotFoundError(f"Could not read the version of {java}. {fix}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0" style
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise JavaNotFoundError(f"{java} is Java {major}. {fix}")
    return major


def default_log_path() -> Path:
    return Path(os.environ.get("LABFORMAT_SPARK_LOG", Path(tempfile.gettempdir()) / "labformat-spark.log"))


@contextmanager
def _jvm_output_to(log_path: Path) -> Iterator[None]:
    """Point file descriptors 1 and 2 at the log while the JVM starts.

    The JVM (and the Python workers it forks later) inherit these descriptors, so
    log4j lines and progress output land in the log, not in a notebook cell.
    Python's own sys.stdout/sys.stderr objects are untouched.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = []
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # no real descriptors (some embedded interpreters): nothing to redirect
        yield
        return
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


MASTER_ENV = "LABFORMAT_SPARK_MASTER"  # the Spark master when no `master` is passed
CONNECT_PREFIX = "sc://"  # a Spark Connect endpoint, e.g. sc://localhost:15002
# What a Spark Connect client imports beyond pyspark (the connect extra's packages), and how to get them.
CONNECT_MODULES = ("grpc", "grpc_status", "google.rpc", "zstandard", "sqlglot")
CONNECT_EXTRA = "the connect extra (in the checkout, `pip install -e '.[connect]'`"

_shipped_zip: Path | None = None


def local_cores(master: str) -> int | None:
    """The cores of a `local`, `local[N]` or `local[*]` master (this machine's for `*`); None for any
    other master, `local-cluster[...]` included."""
    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if not found:
        return None
    if found[1] in (None, "*"):
        # The CPUs this process may use (a container's limit, a taskset), as the JVM counts them.
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return 1 if found[1] is None else (usable or 1)
    return max(1, int(found[1]))


def is_local_master(master: str) -> bool:
    """`local`, `local[*]`, `local-cluster[...]`: executors on this machine, with this interpreter."""
    return master.startswith("local")


def labformat_zip() -> Path:
    """A zip of the labformat package as it is now (pure Python), built once per process, for
    `spark.submit.pyFiles`, `SparkContext.addPyFile` or `SparkSession.addArtifacts(pyfile=True)`."""
    import zipfile

    global _shipped_zip
    if _shipped_zip is None or not _shipped_zip.exists():
        package = Path(__file__).resolve().parents[1]  # labformat/
        target = Path(tempfile.mkdtemp(prefix="labformat-ship-")) / "labformat.zip"
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for source in sorted(package.rglob("*.py")):
                archive.write(source, Path("labformat") / source.relative_to(package))
        _shipped_zip = target
    return _shipped_zip


def ship_labformat(spark: SparkSession) -> None:
    """Make `import labformat` work in the executors' Python workers of `spark` (a session you built
    yourself; `spark_session` does it for every non-local master).

    The package goes as a zip: `addArtifacts(..., pyfile=True)` on Spark Connect, `addPyFile`
    on a classic session. Its dependencies (pyarrow, numpy, pandas, fastavro, ...) must be in the
    executors' Python already: `python3 scripts/lab.py pack` builds an archive of this
    environment for `spark.archives` (docs/cluster.md).
    """
    from labformat.spark.compat import is_connect

    path = str(labformat_zip())
    if is_connect(spark):
        spark.addArtifacts(path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(path)


def jvm_options(user_options: str = "") -> str:
    """The options labformat gives a Spark JVM it starts, beside the caller's `user_options`: the
    prepared class archive (the JVM starts on about half the CPU; left out when the caller's options
    or $LABFORMAT_JAVA_OPTIONS speak of sharing) and $LABFORMAT_JAVA_OPTIONS."""
    from labformat.spark import cds, java

    extra = java.extra_options()
    return " ".join(o for o in (cds.java_option(f"{user_options} {extra}"), extra) if o)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


def spark_session(master: str | None = None, app_name: str = "labformat", log_path: str | os.PathLike[str] | None = None,
                  **conf: object) -> SparkSession:
    """Return the process's SparkSession, creating it if needed.

    `master` is any Spark master URL (`local[*]` by default, or $LABFORMAT_SPARK_MASTER;
    `spark://host:7077`, `local-cluster[...]`, `yarn`, `k8s://...` work unchanged) or a Spark
    Connect endpoint (`sc://host:15002`). Extra Spark options are keyword arguments:
    `spark_session(**{"spark.sql.shuffle.partitions": "8"})`. The JVM's own output goes to
    `log_path` (default: $LABFORMAT_SPARK_LOG or a temp file).

    On a local master the executors run this interpreter (PYSPARK_PYTHON defaults to it). On any
    other, labformat itself is shipped to the executors (`ship_labformat`), and their Python is
    the cluster's: set `spark.pyspark.python` or `spark.archives` (docs/cluster.md).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active

    master = master or os.environ.get(MASTER_ENV, "local[*]")
    options = dict(DEFAULT_CONF)
    cores = local_cores(master)
    if cores:
        options.update(LOCAL_CONF, **{"spark.sql.shuffle.partitions": str(2 * cores)})
    options.update({key: str(value) for key, value in conf.items()})
    if master.startswith(CONNECT_PREFIX):
        missing = [m for m in CONNECT_MODULES if not _importable(m)]
        if missing:
            raise ConfigError(f"master {master!r} is a Spark Connect endpoint, and its client needs "
                              f"{', '.join(missing)}: {CONNECT_EXTRA}; `scripts/lab.py run` and `lab` install it "
                              "for an sc:// master)")
        # The server owns the JVM and its settings; a client sets only SQL options per session.
        builder = SparkSession.builder.remote(master)
        for key, value in options.items():
            if key.startswith("spark.sql."):
                builder = builder.config(key, value)
        spark = builder.getOrCreate()
        ship_labformat(spark)
        return spark

    check_java()
    if "spark.pyspark.python" in options:
        # spark-submit turns this option into PYSPARK_PYTHON; a session built in Python reads only the variable.
        os.environ["PYSPARK_PYTHON"] = options["spark.pyspark.python"]
    elif is_local_master(master):
        # Executors run the same interpreter (and so the same installed labformat) as the driver.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from labformat.spark import java

    # In the default options, which Spark puts before the extra ones: a user's
    # spark.driver.extraJavaOptions (spark-defaults.conf, or passed here) stays theirs.
    key = "spark.driver.defaultJavaOptions"
    driver = jvm_options(f"{options.get(key, '')} {options.get('spark.driver.extraJavaOptions', '')}")
    if driver:
        options[key] = f"{options.get(key, '')} {driver}".strip()
    extra = java.extra_options()
    if extra:
        # The executors' too: separate JVMs on a cluster or `local-cluster[...]`; local mode ignores it.
        executors = "spark.executor.defaultJavaOptions"
        options[executors] = f"{options.get(executors, '')} {extra}".strip()
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in options.items():
        builder = builder.config(key, value)
    with _jvm_output_to(Path(log_path) if log_path else default_log_path()):
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    if not is_local_master(master):
        ship_labformat(spark)
    return spark
