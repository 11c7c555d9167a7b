"""Pack this Python environment for a cluster's executors (`spark.archives`), with venv-pack.

A cluster node has Spark and a Python, but not labformat's dependencies (pyarrow, numpy, pandas,
fastavro, xxhash, obstore...). `python3 scripts/lab.py pack` writes `.venv/` as a relocatable
tar.gz; a job ships it with `spark.archives=labformat-env.tar.gz#environment` and runs its
workers with `spark.pyspark.python=./environment/bin/python` (docs/cluster.md). Left out:
pyspark itself (the cluster runs its own Spark, whose Python half the workers get from it) and
labformat (shipped as a zip of the driver's own copy by `ship_labformat`, so the archive never
holds a stale one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_OUTPUT = "labformat-env.tar.gz"

# Paths inside the environment, as venv-pack matches them (relative to its prefix).
EXCLUDED = (
    "lib/python*/site-packages/pyspark/*",
    "lib/python*/site-packages/pyspark-*",
    "lib/python*/site-packages/__editable__*labformat*",
    "lib/python*/site-packages/labformat/*",
    "lib/python*/site-packages/labformat-*",
    "*.labformat-stamp",
    "pip.log",
)


def pack_environment(prefix: str | Path = sys.prefix, output: str | Path = DEFAULT_OUTPUT) -> Path:
    """Write the virtual environment at `prefix` (this interpreter's by default) to `output`."""
    import venv_pack

    output = Path(output).resolve()
    venv_pack.pack(prefix=str(prefix), output=str(output), format="tar.gz", force=True,
                   filters=[("exclude", pattern) for pattern in EXCLUDED])
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/lab.py pack", description=__doc__.splitlines()[0])
    parser.add_argument("--output", "-o", default=DEFAULT_OUTPUT, help=f"the archive to write (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    path = pack_environment(output=args.output)
    size = path.stat().st_size / 2 ** 20
    print(f"wrote {path} ({size:,.0f} MiB). Ship it with\n"
          f"  --conf spark.archives={path}#environment --conf spark.pyspark.python=./environment/bin/python\n"
          "(docs/cluster.md has the YARN, Kubernetes and standalone recipes).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
