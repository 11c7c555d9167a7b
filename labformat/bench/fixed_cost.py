"""The fixed cost of a commit: upserts that update one record, so they touch exactly one file group.

    .venv/bin/python -m labformat.bench.fixed_cost --repeat 9

Bulk inserts the `tiny` history into a fresh table, then upserts one existing key again and
again (a newer `updated_at`, a new value). What remains is what every commit pays whatever its
size: Spark job scheduling per step, the index lookup, one base-file rewrite, the commit
protocol. The first upsert warms the JVM and the Python workers and is reported apart.
Writes `bench/results/fixed-cost/<date>.json` and adds it to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from labformat.bench.render import FIXED_COST_DIR, RESULTS_DIR, refresh_docs
from labformat.model.enums import IndexType, SortMode


def measure(spark, repeat: int, index_type: IndexType = IndexType.BLOOM) -> dict:
    from pyspark.sql import functions as F

    import labformat as lf
    from labformat import datasets

    cached = datasets.generate(spark, datasets.spec("tiny"))
    folder = Path(tempfile.mkdtemp(prefix="labformat-fixed-cost-"))
    try:
        table = lf.Table.create(spark, folder / "t", record_key=datasets.RECORD_KEY,
                                precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None,
                                options={"index_type": index_type})
        table.bulk_insert(datasets.load_history(spark, cached),
                          {"max_file_size": "64KB", "bulk_insert_sort_mode": SortMode.GLOBAL_SORT})
        # A roomier max for the upserts, so the rewritten file group is never split in two.
        options = {"max_file_size": "1MB", "small_file_limit": 0}
        one = (datasets.load_history(spark, cached).orderBy(datasets.RECORD_KEY).limit(1)
               .withColumn(datasets.PRECOMBINE_FIELD, F.col(datasets.PRECOMBINE_FIELD) + F.expr("INTERVAL 1 DAY")))
        runs = []
        for i in range(repeat + 1):
            batch = one.withColumn("battery_pct", F.lit(float(i)))
            started = time.perf_counter()  # the whole call, as the benchmark times it, not the steps' sum
            report = table.upsert(batch, options)
            seconds = time.perf_counter() - started
            if report.files_rewritten + report.files_created != 1:
                raise RuntimeError(f"expected one file group touched, got {report.files_rewritten} rewritten "
                                   f"+ {report.files_created} created")
            runs.append({"seconds": seconds, **{f"{s.name}_s": s.seconds for s in report.steps if s.seconds},
                         "jobs": {s.name: s.jobs for s in report.steps if s.jobs}})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    warm = runs[1:]
    steps = sorted({k for r in warm for k in r if k.endswith("_s")})
    return {
        "index_type": index_type, "repeat": repeat, "first_seconds": runs[0]["seconds"],
        "median_seconds": statistics.median(r["seconds"] for r in warm),
        "min_seconds": min(r["seconds"] for r in warm), "max_seconds": max(r["seconds"] for r in warm),
        "median_step_seconds": {k[:-2]: statistics.median(r.get(k, 0.0) for r in warm) for k in steps},
        # Spark jobs per step (the same every run): what the fixed cost is mostly made of.
        "step_jobs": warm[-1]["jobs"] if warm else {},
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labformat.bench.fixed_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--index", default=IndexType.BLOOM, type=IndexType, choices=list(IndexType))
    args = parser.parse_args(argv)

    import labformat as lf

    spark = lf.spark_session()
    result = measure(spark, args.repeat, args.index)
    result["date"] = dt.date.today().isoformat()
    folder = RESULTS_DIR / FIXED_COST_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result['date']}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    refresh_docs()
    steps = ", ".join(f"{k} {v:.2f}" for k, v in sorted(result["median_step_seconds"].items(), key=lambda kv: -kv[1]))
    jobs = result["step_jobs"]
    print(f"{args.index} upsert touching one file group: {sum(jobs.values())} Spark jobs ({jobs}), "
          f"median {result['median_seconds']:.2f} s "
          f"(min {result['min_seconds']:.2f}, max {result['max_seconds']:.2f}, {args.repeat} runs after a "
          f"{result['first_seconds']:.2f} s warm-up); median per step: {steps}\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
