"""The benchmark's command line: run, record the results, refresh docs/benchmarks.md."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from labformat.bench.engines import DEFAULT_ENGINES, ENGINES, S3_ENGINES, WORKLOADS
from labformat.bench.render import DOCS_PATH, RESULTS_DIR, S3_DIR, record, refresh_docs
from labformat.bench.runner import DEFAULT_WORK_DIR, BenchmarkError, run_benchmark

DESCRIPTION = """\
Daily upserts and queries through labformat (BLOOM, SIMPLE, BUCKET), a plain-PySpark rewrite,
delta-rs, pyiceberg and the I/O floor, engines alternating; the tables are checked equal.
Records bench/results/<date>-<preset>-<workload>.{json,png,md} and rewrites docs/benchmarks.md.

    python -m labformat.bench --preset small --repeat 3
    python -m labformat.bench --preset small --repeat 3 --workload late
    python -m labformat.bench --preset tiny --repeat 1          # a smoke run
    python -m labformat.bench --preset small --repeat 3 --engines labformat-bloom delta-rs \\
        labformat-bloom-s3 delta-rs-s3                          # on a local S3 server (recorded under s3/)
    python -m labformat.bench --docs-only                       # re-render the docs from bench/results
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labformat.bench", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small", help="dataset preset: tiny, small, medium, large (default small)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of every engine's workload (default 3)")
    parser.add_argument("--engines", nargs="+", default=list(DEFAULT_ENGINES), choices=ENGINES, metavar="ENGINE",
                        help=f"a subset of {', '.join(ENGINES)} (default: all but {' and '.join(S3_ENGINES)}, "
                             "whose tables are on a local S3 server the run starts)")
    parser.add_argument("--days", type=int, default=None, help="only the first N upsert days (default: all)")
    parser.add_argument("--workload", default="seed", choices=WORKLOADS,
                        help="seed: the new day and corrections of the previous one (default); "
                             "late: plus late corrections reaching a month back")
    parser.add_argument("--history-files", type=int, default=None,
                        help="base files the history is bulk inserted as (default: 32 at small, 320 at medium)")
    parser.add_argument("--max-file-size", default=None,
                        help="labformat max_file_size and the peers' target file size (default: Hudi's scaled "
                             "to labformat-bloom's history files, as the workshop does); give --small-file-limit too")
    parser.add_argument("--small-file-limit", default=None, help="labformat small_file_limit")
    parser.add_argument("--driver-memory", default=None,
                        help="spark.driver.memory of every Spark engine, labformat's and the rewrite's alike "
                             "(default: labformat's session default, 1g)")
    parser.add_argument("--no-queries", action="store_true",
                        help="skip the standard queries after the upserts (at large they read whole tables)")
    parser.add_argument("--in-process", action="store_true",
                        help="run every engine in this process on one SparkSession (memory is then shared)")
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR), help="where the tables are written")
    parser.add_argument("--results-dir", default=str(RESULTS_DIR), help="where results are recorded")
    parser.add_argument("--docs", default=str(DOCS_PATH), help="the docs page to rewrite")
    parser.add_argument("--no-record", action="store_true", help="print only; record nothing, leave the docs alone")
    parser.add_argument("--docs-only", action="store_true", help="only rewrite the docs from the recorded results")
    args = parser.parse_args(argv)

    if not args.docs_only:
        started = time.perf_counter()
        try:
            result = run_benchmark(args.preset, args.repeat, tuple(args.engines), args.days, args.max_file_size,
                                   args.small_file_limit, args.work_dir, isolate=not args.in_process,
                                   scenario=args.workload, history_files=args.history_files,
                                   driver_memory=args.driver_memory, queries=not args.no_queries)
        except BenchmarkError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 1
        print(f"benchmark finished in {(time.perf_counter() - started) / 60:.1f} minutes", flush=True)
        if args.no_record:
            return 0
        on_s3 = any(e in S3_ENGINES for e in result["engines"])
        for path in record(result, Path(args.results_dir) / S3_DIR if on_s3 else args.results_dir):
            print(f"recorded {path}")
    docs = refresh_docs(args.results_dir, args.docs)
    print(f"rewrote {docs}" if docs else f"no results in {args.results_dir}: docs left alone")
    return 0
