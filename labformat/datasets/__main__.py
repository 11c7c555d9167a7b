"""Command line for the drone dataset: `python -m labformat.datasets sample|generate ...`.

    python -m labformat.datasets sample [--out DIR]          # rewrite datasets/sample/
    python -m labformat.datasets generate small [--key-style random] [--cache-dir DIR] [--force] [--master local[2]]
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labformat.datasets", description=__doc__.splitlines()[0])
    parser.add_argument("--master", default=None, help="Spark master (default: local[*] or $LABFORMAT_SPARK_MASTER)")
    commands = parser.add_subparsers(dest="command", required=True)
    sample = commands.add_parser("sample", help="write the committed sample CSVs")
    sample.add_argument("--out", default=None, help="output folder (default: datasets/sample)")
    gen = commands.add_parser("generate", help="generate a preset into the cache")
    gen.add_argument("preset")
    gen.add_argument("--key-style", default="monotonic")
    gen.add_argument("--cache-dir", default=None)
    gen.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)

    from labformat import datasets

    from labformat.spark.session import spark_session

    spark = spark_session(master=args.master)
    if args.command == "sample":
        paths = datasets.write_sample(spark, *([args.out] if args.out else []))
        for path in paths:
            print(path)
        return 0
    spec = datasets.spec(args.preset, key_style=args.key_style)
    started = time.perf_counter()
    cached = datasets.generate(spark, spec, args.cache_dir, force=args.force)
    print(f"{cached.root}: history {cached.history_rows:,} rows, batches {cached.batch_rows}; "
          f"generated in {cached.seconds} s (this call {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
