"""The lab's main job: run the whole workshop headless at a preset; executed notebooks, charts and a summary go to out/."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import labformat as lf
from labformat import datasets
from labformat.model.enums import SortMode
from labformat.spark.session import MASTER_ENV


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def bulk_insert_summary(report: lf.WriteReport, load_seconds: float) -> str:
    """The summary table: headline numbers, per-step durations, and the per-file key ranges."""
    files = report.to_pandas()
    lines = [
        f"bulk insert {report.instant}: {report.rows_written:,} rows -> {len(files)} base files, "
        f"{human_bytes(report.bytes_written)} ({report.options['bulk_insert_sort_mode']}, "
        f"max file size {human_bytes(report.options['max_file_size'])})",
        f"  dataset generation/load: {load_seconds:.1f} s; bulk insert: {report.seconds:.1f} s",
        "",
        "  step            seconds  tasks",
    ]
    lines += [f"  {s.name:<15} {s.seconds:7.2f}  {s.tasks:5d}" for s in report.steps]
    if len(files):
        lines += [
            "",
            f"  file sizes: min {human_bytes(files.size_bytes.min())}, median {human_bytes(files.size_bytes.median())}, "
            f"max {human_bytes(files.size_bytes.max())}; rows per file: median {int(files.rows.median()):,}",
            "",
            "  partition     file group                               rows      size  key range",
        ]
        shown = files.sort_values(["partition_path", "min_key"])
        for row in shown.head(20).itertuples():
            lines.append(f"  {row.partition_path or '(none)':<12}  {row.file_id:<38} {row.rows:>8,} "
                         f"{human_bytes(row.size_bytes):>9}  {row.min_key} .. {row.max_key}")
        if len(shown) > 20:
            lines.append(f"  ... {len(shown) - 20} more files")
    return "\n".join(lines)


def run_bulk_insert(args, out: Path) -> int:
    """The one-table job: generate, bulk insert, print the summary (`--bulk-insert-only`)."""
    spark = lf.spark_session()
    started = time.perf_counter()
    spec = datasets.spec(args.preset, key_style=args.key_style)
    cached = datasets.generate(spark, spec)
    history = datasets.load_history(spark, cached)
    load_seconds = time.perf_counter() - started

    table_path = out / "tables" / f"bulk-insert-{args.preset}-{args.key_style}"
    shutil.rmtree(table_path, ignore_errors=True)
    table = lf.Table.create(spark, table_path, record_key="record_key", precombine_field="updated_at",
                            partition_field=None)
    report = table.bulk_insert(history, {"bulk_insert_sort_mode": args.sort_mode,
                                         "max_file_size": args.max_file_size})
    print(bulk_insert_summary(report, load_seconds))
    print(f"\n  table: {table_path}")
    return 0


def run_workshop(args, out: Path) -> int:
    """Every workshop notebook, headless, at the preset: executed notebooks, charts and summary.md in `out`."""
    from labformat.lab import runner

    folder = runner.SOLUTIONS_DIR if args.notebooks == "solutions" else runner.NOTEBOOKS_DIR
    started = time.perf_counter()
    print(f"Running the workshop ({args.notebooks} notebooks) at preset {args.preset} into {out} ...", flush=True)
    done = runner.run_workshop(out, args.preset, folder, tuple(args.only or ()), prepare_archive=True)
    seconds = time.perf_counter() - started
    print(f"\nDone in {seconds:.0f} s: {len(done)} notebooks in {out / 'notebooks'}, "
          f"{sum(len(e.charts) for e in done)} charts in {out / 'charts'}, summary in {out / 'summary.md'}")
    print((out / "summary.md").read_text())
    broken = runner.broken_claims(out, done)
    if broken:
        print(f"FAILED: {len(broken)} lesson claim(s) on exact quantities did not hold in this run:", file=sys.stderr)
        for claim in broken:
            print(f"  {claim.lab}: {claim.text} ({claim.evidence})", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labformat.lab.main", description=__doc__)
    parser.add_argument("--preset", default="small", help="dataset preset: tiny, small, medium, large")
    parser.add_argument("--out", default=None, help="where everything goes (default <repo>/out)")
    parser.add_argument("--notebooks", default="solutions", choices=["solutions", "learner"],
                        help="run the solution notebooks (every exercise answered, the default) or the learners' "
                             "(exercises left blank)")
    parser.add_argument("--only", nargs="+", metavar="NN",
                        help="run only the notebooks whose name starts with these prefixes (e.g. --only 04); "
                             "the summary then covers those")
    parser.add_argument("--storage", default="local", choices=["local", "s3"],
                        help="where the notebooks' tables live: out/work (default), or a local S3 server "
                             "(SeaweedFS) the job starts and stops; every table operation then goes over S3")
    parser.add_argument("--master", default=None, metavar="URL",
                        help="the Spark master the notebooks' sessions use: spark://host:7077, yarn, k8s://..., "
                             "sc://host:15002 (Spark Connect), or local-standalone (a standalone master and "
                             "2 one-core workers on this machine, started and stopped by the job); default "
                             "$LABFORMAT_SPARK_MASTER, else local[*]")
    parser.add_argument("--bulk-insert-only", action="store_true",
                        help="only generate the dataset and bulk insert it into one table, and print what happened")
    parser.add_argument("--key-style", default="monotonic", choices=["monotonic", "random"],
                        help="(with --bulk-insert-only)")
    parser.add_argument("--sort-mode", default=SortMode.GLOBAL_SORT, type=SortMode, choices=list(SortMode),
                        help="(with --bulk-insert-only)")
    parser.add_argument("--max-file-size", default="32MB", help="(with --bulk-insert-only)")
    args = parser.parse_args(argv)

    out = Path(args.out).resolve() if args.out else Path(__file__).resolve().parents[2] / "out"
    datasets.spec(args.preset)  # an unknown preset fails now, naming the presets
    if args.bulk_insert_only or args.master == LOCAL_STANDALONE:
        # Before the timed bulk insert, and before the cluster's daemons start (they map it too); the
        # workshop prepares it beside its first notebook instead.
        from labformat.spark import cds

        cds.prepare()
    if args.master == LOCAL_STANDALONE:
        return run_on_local_standalone(args, out)
    return run(args, out)


def run(args, out: Path) -> int:
    if args.master:
        os.environ[MASTER_ENV] = args.master  # the notebooks' kernels (and this process) inherit it
    if args.bulk_insert_only:
        return run_bulk_insert(args, out)
    if args.storage == "s3":
        return run_on_s3(args, out)
    return run_workshop(args, out)


LOCAL_STANDALONE = "local-standalone"


def run_on_local_standalone(args, out: Path) -> int:
    """The job on a Spark standalone cluster on this machine: a master and 2 workers of 1 core each,
    every executor a JVM of its own, started here and stopped after. The executors run this
    interpreter (they are on this machine); labformat reaches them as a shipped zip."""
    from labformat.spark.standalone import StandaloneCluster

    work = out / "standalone"
    shutil.rmtree(work, ignore_errors=True)
    with StandaloneCluster.start(work, workers=2, cores=1) as cluster:
        print(f"The notebooks run on a local standalone cluster at {cluster.master_url} (2 workers x 1 core).",
              flush=True)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        args.master = cluster.master_url
        return run(args, out)


def run_on_s3(args, out: Path) -> int:
    """`run_workshop` with the notebooks' tables on a local S3 server: started here, its address and
    credentials handed to the notebooks' kernels in the standard AWS_* variables, stopped after."""
    from labformat.lab.workshop import TABLES_ENV
    from labformat.s3_server import S3Server

    data = out / "s3-server"
    shutil.rmtree(data, ignore_errors=True)
    with S3Server.start(data) as server:
        os.environ.update({TABLES_ENV: server.uri("workshop"), **server.environment()})
        print(f"The notebooks' tables go to {server.uri('workshop')} on a local S3 server (SeaweedFS, "
              f"{server.endpoint}).", flush=True)
        code = run_workshop(args, out)
    shutil.rmtree(data, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
