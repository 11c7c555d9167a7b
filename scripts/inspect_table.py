"""Inspect a Hudi or labformat table without changing it: timeline, file groups, base files, row groups, range pruning.

    python scripts/inspect_table.py PATH [--charts DIR] [--sample 12] [--key KEY ...] [--max-rows 20]

Reads only `.hoodie/` and the parquet footers (plus the record keys of a few row groups, to
sample keys); needs no Spark. `--charts DIR` saves the lab's charts as PNG files there (never
inside the table). `--key` checks these record keys against every partition instead of sampling.
"""

from __future__ import annotations

import argparse
import sys

from labformat.errors import LabformatError
from labformat.lab.inspect import inspect_table, render_text, save_charts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="the table's base path (the folder holding .hoodie/)")
    parser.add_argument("--charts", metavar="DIR", help="save the charts as PNG files in this folder")
    parser.add_argument("--sample", type=int, default=12, help="record keys to sample for range pruning")
    parser.add_argument("--key", action="append", help="a record key to check instead of sampling (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-rows", type=int, default=20, help="rows shown per section")
    args = parser.parse_args(argv)
    try:
        inspection = inspect_table(args.path, sample=args.sample, keys=args.key, seed=args.seed)
        print(render_text(inspection, args.max_rows))
        if args.charts:
            for path in save_charts(inspection, args.charts):
                print(f"chart: {path}")
    except (LabformatError, ValueError) as exc:
        print(f"inspect_table: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
