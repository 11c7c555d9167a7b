"""The bulk load against Spark writing the same rows alone: labformat's bulk insert beside its plain baseline.

    .venv/bin/python -m labformat.bench.bulk_load --preset medium --repeat 3 --driver-memory 4g

Two pairs, each timed side by side in one session, alternating (issue 35's bulk-load goals):

- `NONE` against `plain`: a bulk insert with no sort at the input's own parallelism, against
  `df.write.parquet` of the same rows (both one task per input partition; labformat's task rolls to
  a new file at `max_file_size`, as Hudi's does);
- `GLOBAL_SORT` against `sorted`: a bulk insert sorted by key into as many base files as the
  benchmark loads the history as (`HISTORY_FILES`), against `df.orderBy(key).write.parquet` at as
  many shuffle partitions, adaptive execution off (the `spark-sorted-write` engine's load).

Every timed call reads the cached history anew and writes a fresh folder. One untimed round on the
`tiny` preset first warms the JVM and the Python workers. Each pair's ratio is the median of the
per-repetition ratios, so a slow moment of a shared machine weighs on both sides of one ratio.
Writes `bench/results/bulk-load/<date>-<preset>.json` and adds it to docs/benchmarks.md.
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

from labformat.bench.engines import HISTORY_FILES, KEY, PRECOMBINE, bloom_entries_per_file, write_sorted
from labformat.bench.render import BULK_LOAD_DIR, RESULTS_DIR, refresh_docs
from labformat.model.enums import SortMode

# (labformat's sort mode, Spark's own write of the same rows): the pairs, in the order they run.
PAIRS = ((SortMode.NONE, "plain"), (SortMode.GLOBAL_SORT, "sorted"))


def _load(spark, cached, mode: SortMode | str, folder: Path, history_files: int) -> int:
    """One timed load of the cached history by `mode` (a sort mode, or Spark's `plain` or `sorted` write)
    into `folder`; the parquet files it wrote."""
    import labformat as lf
    from labformat import datasets

    df = datasets.load_history(spark, cached)
    if mode == "plain":
        df.write.parquet(str(folder))
    elif mode == "sorted":
        write_sorted(spark, df, folder, history_files)  # the spark-sorted-write engine's load
    else:
        table = lf.Table.create(spark, folder, record_key=KEY, precombine_field=PRECOMBINE)
        options = {"bulk_insert_sort_mode": SortMode(mode),
                   "bloom_num_entries": bloom_entries_per_file(cached.spec.history_rows, history_files)}
        if mode == SortMode.GLOBAL_SORT:
            options["bulk_insert_parallelism"] = history_files
        table.bulk_insert(df, options)
    # Data files only: the table's .hoodie folder holds the metadata table's own files.
    return sum(1 for f in folder.rglob("*.parquet") if ".hoodie" not in f.relative_to(folder).parts)


def measure(spark, preset: str, repeat: int, pairs=PAIRS) -> dict:
    from labformat import datasets

    history_files = HISTORY_FILES.get(preset, HISTORY_FILES["small"])
    cached = datasets.generate(spark, datasets.spec(preset))
    warm = datasets.generate(spark, datasets.spec("tiny"))
    work = Path(tempfile.mkdtemp(prefix="labformat-bulk-load-"))
    modes = [m for pair in pairs for m in pair]
    seconds: dict[str, list[float]] = {m: [] for m in modes}
    files: dict[str, int] = {}
    try:
        for mode in modes:  # the warm-up, untimed
            _load(spark, warm, mode, work / f"warm-{mode}", HISTORY_FILES["tiny"])
        for rep in range(repeat):
            for mode in modes:
                folder = work / f"{mode}-{rep}"
                started = time.perf_counter()
                files[mode] = _load(spark, cached, mode, folder, history_files)
                seconds[mode].append(round(time.perf_counter() - started, 3))
                shutil.rmtree(folder, ignore_errors=True)
                print(f"  {mode} repetition {rep + 1}: {seconds[mode][-1]:.1f} s, {files[mode]} files", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "preset": preset, "repeat": repeat, "history_rows": cached.spec.history_rows, "history_files": history_files,
        "driver_memory": spark.sparkContext.getConf().get("spark.driver.memory", "1g"),
        "seconds": seconds, "files": files,
        "pairs": [{"labformat": ours, "spark": theirs,
                   "ratios": [round(a / b, 4) for a, b in zip(seconds[ours], seconds[theirs])],
                   "median_ratio": round(statistics.median(a / b for a, b in zip(seconds[ours], seconds[theirs])), 4)}
                  for ours, theirs in pairs],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labformat.bench.bulk_load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="medium")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--driver-memory", default=None, help="spark.driver.memory (default: the session's, 1g)")
    parser.add_argument("--pairs", nargs="+", default=[ours for ours, _ in PAIRS], choices=[ours for ours, _ in PAIRS],
                        help="which of labformat's sort modes to run, each beside its Spark baseline (default: both)")
    args = parser.parse_args(argv)

    import labformat as lf
    from labformat.bench.runner import machine_info, spark_conf

    spark = lf.spark_session(app_name="labformat-bulk-load",
                             **spark_conf(args.driver_memory))
    result = measure(spark, args.preset, args.repeat, tuple(p for p in PAIRS if p[0] in args.pairs))
    result["date"] = dt.date.today().isoformat()
    result["machine"] = machine_info()
    folder = RESULTS_DIR / BULK_LOAD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result['date']}-{args.preset}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    refresh_docs()
    for pair in result["pairs"]:
        ours, theirs = pair["labformat"], pair["spark"]
        print(f"{ours} ÷ {theirs}: median ratio {pair['median_ratio']:.2f} (medians "
              f"{statistics.median(result['seconds'][ours]):.1f} s and {statistics.median(result['seconds'][theirs]):.1f} s)")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
