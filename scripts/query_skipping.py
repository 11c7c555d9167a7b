"""Headless: query time and files read with data skipping on vs off, and BLOOM lookups footer vs metadata.

    python scripts/query_skipping.py --preset small [--repeats 3] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import pandas as pd

import labformat as lf
from labformat import datasets
from labformat.lab.daily import run_daily_upserts
from labformat.lab.queries import compare_lookup_sources, compare_skipping
from labformat.workload import standard_queries

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--days", type=int, default=2, help="upsert days before querying")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-file-size", default="8MB")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)

    spark = lf.spark_session()
    spec = datasets.spec(args.preset)
    options = {"max_file_size": args.max_file_size, "small_file_limit": 0}
    tables = ROOT / "out" / "tables"
    run = run_daily_upserts(spark, spec, tables / f"query-{args.preset}", "BLOOM", options, days=args.days)
    table = lf.Table.open(spark, run.table_path)
    skipping = compare_skipping(table, standard_queries(table, spec), args.repeats)
    # The lookup comparison needs bloom filters in the metadata table: a table of its own, the history only.
    shutil.rmtree(tables / f"lookup-{args.preset}", ignore_errors=True)
    lookup = lf.Table.create(spark, tables / f"lookup-{args.preset}", record_key=datasets.RECORD_KEY,
                             precombine_field=datasets.PRECOMBINE_FIELD, options={"bloom_filter_enable": True})
    cached = datasets.generate(spark, spec)
    lookup.bulk_insert(datasets.load_history(spark, cached), {"bulk_insert_sort_mode": "GLOBAL_SORT", **options})
    lookups = compare_lookup_sources(lookup, datasets.load_batch(spark, cached, 1), options, args.repeats,
                                     workdir=tables)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.precision", 3):
        print(f"queries on {args.preset} after {args.days} upsert days ({args.repeats} runs each, medians):")
        print(skipping.to_string(index=False))
        print("\nBLOOM index tag step, day-1 upsert, footers vs metadata table:")
        print(lookups.to_string())
    if args.csv:
        skipping.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
