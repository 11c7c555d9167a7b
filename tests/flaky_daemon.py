"""A PySpark daemon for the retried-task tests: the first attempt of a Python task that publishes a file
under the prefix `LABFORMAT_TEST_FAIL_AFTER_PUBLISH` names fails just after publishing it.

Set as `spark.python.daemon.module` on a master that retries tasks (`local[2,3]`); every Python worker
is forked from it. The fault goes into `labformat.storage.Storage.publish` when a worker imports that
module (an import hook: the daemon itself must not import pyarrow before forking), so it hits
labformat's own code as it stands, whatever names its files.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

PREFIX_ENV = "LABFORMAT_TEST_FAIL_AFTER_PUBLISH"


def _fail_first_attempts(storage_module) -> None:
    publish = storage_module.Storage.publish
    prefix = os.environ.get(PREFIX_ENV, "")

    def publish_then_fail(self, rel: str, data: bytes) -> None:
        publish(self, rel, data)
        if not prefix or not rel.startswith(prefix):
            return
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0:
            raise RuntimeError(f"test fault: attempt 0 of task {ctx.partitionId()} fails after publishing {rel}")

    storage_module.Storage.publish = publish_then_fail


class _PatchStorage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "labformat.storage":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _fail_first_attempts(module)

        spec.loader.exec_module = exec_and_patch
        return spec


if __name__ == "__main__":
    sys.meta_path.insert(0, _PatchStorage())
    from pyspark.daemon import manager

    manager()
