"""The notebooks' sweeps, headless: each writes a CSV of the run's numbers and a PNG of its chart.

    .venv/bin/python scripts/sweep.py file-size --preset small --history-files 64 16 4
    .venv/bin/python scripts/sweep.py sort-modes --preset small --max-file-size 8MB
    .venv/bin/python scripts/sweep.py indexes --preset small --days 3 --max-file-size 8MB

Output goes to out/sweeps/<sweep>-<preset>.csv and .png (or --out).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import labformat as lf  # noqa: E402
from labformat import datasets  # noqa: E402
from labformat.lab import frames, sweeps, viz, workshop  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", choices=["file-size", "sort-modes", "indexes"])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--key-style", default="monotonic", choices=list(datasets.KEY_STYLES))
    parser.add_argument("--history-files", nargs="+", type=int, default=[64, 16, 4],
                        help="file-size: bulk insert the history as this many files; max_file_size is scaled to them")
    parser.add_argument("--repeats", type=int, default=3, help="file-size: query runs per size")
    parser.add_argument("--small-file-limit", default="0", help="(indexes)")
    parser.add_argument("--max-file-size", default="8MB", help="(sort-modes, indexes)")
    parser.add_argument("--days", type=int, default=3, help="upsert days (indexes)")
    parser.add_argument("--out", default=None, help="folder for the CSV and PNG (default out/sweeps)")
    args = parser.parse_args(argv)

    out = Path(args.out) if args.out else workshop.REPO_ROOT / "out" / "sweeps"
    out.mkdir(parents=True, exist_ok=True)
    workdir = out / "tables"
    spark = lf.spark_session()
    spec = datasets.spec(args.preset, key_style=args.key_style)

    if args.sweep == "file-size":
        frame = sweeps.file_size_sweep(spark, spec, args.history_files, repeats=args.repeats, workdir=workdir,
                                       progress=True)
        viz.plot_file_size_tradeoff(frame)
    elif args.sweep == "sort-modes":
        modes = sweeps.bulk_insert_sort_modes(spark, spec, ["NONE", "GLOBAL_SORT", "PARTITION_SORT"],
                                              {"max_file_size": args.max_file_size}, workdir=workdir, progress=True)
        _, axes = plt.subplots(len(modes), 1, figsize=(10, 3.5 * len(modes)), layout="constrained")
        rows = []
        for ax, (mode, load) in zip(axes, modes.items()):
            report, files = load.report, load.files
            viz.plot_file_key_ranges(files, ax=ax)
            ax.set_title(f"{mode}: {ax.get_title()}")
            rows.append({"sort_mode": mode, "files": len(files), "max_overlap": frames.max_overlap(files),
                         "seconds": report.seconds, "write_tasks": report.step("write").tasks,
                         "bytes_written": report.bytes_written})
        frame = pd.DataFrame(rows)
    else:
        options = {"max_file_size": args.max_file_size, "small_file_limit": args.small_file_limit}
        frame = sweeps.compare_indexes(spark, spec, ["BLOOM", "SIMPLE", "BUCKET"], args.days, options,
                                       workdir=workdir, progress=True)
        _, axes = plt.subplots(1, 3, figsize=(16, 4.5), layout="constrained", sharey=True)
        for ax, (index, days) in zip(axes, frame.groupby("index", sort=False)):
            viz.plot_step_times(days.reset_index(drop=True), ax=ax)
            ax.set_title(f"{index}: {ax.get_title()}")

    stem = out / f"{args.sweep}-{args.preset}"
    frame.to_csv(stem.with_suffix(".csv"), index=False)
    plt.savefig(stem.with_suffix(".png"), dpi=110)
    print(frame.to_string(index=False))
    print(f"\nwrote {stem.with_suffix('.csv')} and {stem.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
