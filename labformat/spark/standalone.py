"""A local Spark standalone cluster: a master and N workers from pip's pyspark, bound to 127.0.0.1.

    with StandaloneCluster.start(workers=2, cores=1) as cluster:
        spark = lf.spark_session(master=cluster.master_url)

pip's pyspark ships `bin/spark-class` and the jars but no `sbin/start-master.sh`, so the master
and each worker are started as `spark-class org.apache.spark.deploy.{master.Master,worker.Worker}`
in the foreground, each in its own process group, and stopped with it. Every worker has its own
executor JVM per application, so a job's tasks run in processes apart from the driver, as on a
real cluster. `python -m labformat.spark.standalone` keeps one up for `scripts/lab.py run --master`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labformat.errors import LabformatError


def spark_home() -> Path:
    """The Spark distribution pip's pyspark holds (bin/, jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the daemon's process before it starts: Linux sends it SIGTERM when the process that started it
    dies, so a killed test run or job leaves no master or worker behind (spark-class execs java,
    which keeps the setting)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def _get_json(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            found: dict[str, Any] = json.load(response)
            return found
    except (OSError, ValueError):
        return None


@dataclass
class StandaloneCluster:
    """A running master and its workers; `stop()` (or leaving the `with` block) ends them."""

    master_url: str
    ui_url: str
    processes: list[subprocess.Popen[bytes]]
    work_dir: Path
    workers: int
    cores: int
    logs: list[Path] = field(default_factory=list)

    @classmethod
    def start(cls, work_dir: str | os.PathLike[str], workers: int = 2, cores: int = 1, memory: str = "2g",
              timeout_s: float = 90) -> "StandaloneCluster":
        """Start a master and `workers` workers of `cores` cores and `memory` each; returns once all
        have registered. The workers' environment lacks PYTHONPATH: an executor's Python finds only
        what its interpreter has installed and what the application ships."""
        work_dir = Path(work_dir)
        work_dir.mkdir(parents=True, exist_ok=True)
        home = spark_home()
        spark_class = str(home / "bin" / "spark-class")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "SPARK_REMOTE")}
        env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(work_dir),
                   SPARK_WORKER_DIR=str(work_dir / "work"))
        from labformat.spark.session import jvm_options

        # The master's and workers' JVMs map the prepared class archive too, and take $LABFORMAT_JAVA_OPTIONS.
        daemons = jvm_options(env.get("SPARK_DAEMON_JAVA_OPTS", ""))
        if daemons:
            env["SPARK_DAEMON_JAVA_OPTS"] = f"{env.get('SPARK_DAEMON_JAVA_OPTS', '')} {daemons}".strip()
        port, ui_port = _free_port(), _free_port()
        master_url, ui_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}"
        commands = [[spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(ui_port)]]
        for i in range(workers):
            commands.append([spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                             "--cores", str(cores), "--memory", memory, "--webui-port", str(_free_port()),
                             "--work-dir", str(work_dir / f"worker-{i}")])
        processes: list[subprocess.Popen[bytes]] = []
        logs: list[Path] = []
        cluster = cls(master_url, ui_url, processes, work_dir, workers, cores, logs)
        try:
            for i, command in enumerate(commands):
                log = work_dir / ("master.log" if i == 0 else f"worker-{i - 1}.log")
                logs.append(log)
                with open(log, "ab") as out:
                    processes.append(subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                                      stdin=subprocess.DEVNULL, start_new_session=True,
                                                      preexec_fn=_die_with_parent))
            cluster._wait_for_workers(timeout_s)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _wait_for_workers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [p for p in self.processes if p.poll() is not None]
            if dead:
                raise LabformatError(f"a Spark standalone daemon exited with code {dead[0].returncode}: "
                                     f"{self._log_tail()}")
            state = _get_json(self.ui_url + "/json/")
            if state and state.get("aliveworkers", 0) >= self.workers:
                return
            time.sleep(0.5)
        raise LabformatError(f"the standalone cluster at {self.master_url} did not have {self.workers} "
                             f"workers after {timeout_s:.0f} s: {self._log_tail()}")

    def _log_tail(self) -> str:
        tails = []
        for log in self.logs:
            if log.exists():
                tails.append(f"{log.name}: " + " | ".join(log.read_text(errors="replace").splitlines()[-5:]))
        return "; ".join(tails)

    def state(self) -> dict[str, Any]:
        """The master's JSON view: workers, cores, running and completed applications."""
        return _get_json(self.ui_url + "/json/") or {}

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def __enter__(self) -> "StandaloneCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labformat.spark.standalone",
                                     description="Run a local Spark standalone cluster until interrupted.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="2g", help="memory per worker")
    parser.add_argument("--work-dir", default=".cache/standalone")
    args = parser.parse_args(argv)
    with StandaloneCluster.start(args.work_dir, args.workers, args.cores, args.memory) as cluster:
        print(f"{cluster.master_url} ({args.workers} workers x {args.cores} cores; UI {cluster.ui_url}); "
              "Ctrl-C stops it. The workshop on it, executors running this Python:\n"
              f"  PYSPARK_PYTHON={sys.executable} python3 scripts/lab.py run --master {cluster.master_url}",
              flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
