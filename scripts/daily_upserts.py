"""Headless daily-upsert run: per day, upsert time with its per-step split, the funnel and files rewritten.

    python scripts/daily_upserts.py --preset small --index BLOOM [--key-style random] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

import labformat as lf
from labformat import datasets
from labformat.lab.daily import run_daily_upserts
from labformat.model.report import UPSERT_STEPS

ROOT = Path(__file__).resolve().parents[1]
# The upsert steps a day's row times (validate and start_instant take next to nothing).
STEPS = [s for s in UPSERT_STEPS if s not in ("validate", "start_instant")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--index", default="BLOOM", nargs="+", choices=["BLOOM", "SIMPLE", "BUCKET"])
    parser.add_argument("--key-style", default="monotonic", choices=["monotonic", "random"])
    parser.add_argument("--days", type=int, default=None)
    parser.add_argument("--max-file-size", default="16MB")
    parser.add_argument("--small-file-limit", default="8MB")
    parser.add_argument("--csv", default=None, help="also write the per-day table as CSV")
    args = parser.parse_args(argv)

    spark = lf.spark_session()
    spec = datasets.spec(args.preset, key_style=args.key_style)
    indexes = args.index if isinstance(args.index, list) else [args.index]
    frames = []
    for index in indexes:
        run = run_daily_upserts(
            spark, spec, ROOT / "out" / "tables" / f"daily-{args.preset}-{args.key_style}-{index.lower()}",
            index_type=index, days=args.days,
            options={"max_file_size": args.max_file_size, "small_file_limit": args.small_file_limit},
            on_day=lambda day, r, index=index: print(
                f"{index:6s} day {day}: {r.seconds:6.2f} s  rows {r.rows_in:,}  updated {r.rows_updated:,}  "
                f"inserted {r.rows_inserted:,}  funnel {r.funnel.files_in_snapshot} -> "
                f"{r.funnel.after_range_pruning} -> {r.funnel.after_bloom} -> "
                f"{r.funnel.matched}  rewritten {r.files_rewritten}  created {r.files_created}",
                flush=True),
        )
        print(f"{index:6s} bulk insert: {run.bulk_insert.rows_written:,} rows, {len(run.bulk_insert.files)} files, "
              f"{run.bulk_insert.seconds:.2f} s", flush=True)
        frames.append(run.to_pandas())
    table = pd.concat(frames, ignore_index=True)
    columns = ["index", "day", "seconds"] + [f"{s}_s" for s in STEPS] + [
        "write_tasks", "files_in_snapshot", "after_range_pruning", "after_bloom", "matched", "false_positives",
        "files_rewritten", "files_created", "write_amplification"]
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.precision", 2):
        print(table[[c for c in columns if c in table.columns]].to_string(index=False))
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
