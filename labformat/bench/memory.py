"""Peak memory of a process tree (RSS of a process and all its descendants), sampled by a thread."""

from __future__ import annotations

import os
import threading

import psutil

SAMPLE_SECONDS = 0.05


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and every descendant (Spark's JVM and its Python workers included).

    Pages shared between processes count once per process, as `ps` and `top` show them.
    """
    try:
        root = psutil.Process(pid)
        processes = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass  # ended between the listing and the read
    return total


class PeakRss:
    """Samples `tree_rss(pid)` every SAMPLE_SECONDS while the `with` block runs; `.peak_bytes` after.

        with PeakRss() as memory:
            work()
        memory.peak_bytes
    """

    def __init__(self, pid: int | None = None, interval: float = SAMPLE_SECONDS):
        self.pid = os.getpid() if pid is None else pid
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="labformat-bench-rss", daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak_bytes = max(self.peak_bytes, tree_rss(self.pid))
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, tree_rss(self.pid))  # the state at the very end too
