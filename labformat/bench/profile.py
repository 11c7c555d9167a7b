"""A profile of labformat-bloom's daily upsert: each step of each day, and the Spark stages that ran it.

    .venv/bin/python -m labformat.bench.profile --preset medium --days 3 --driver-memory 4g [--conf KEY=VALUE ...]

The benchmark's own engine in this process: the history bulk inserted as the benchmark loads it,
then each day's upsert. Per day it prints the upsert report's steps (`WriteReport.steps`) and, for
each step that ran Spark jobs, their stages from the Spark UI's REST API: tasks, wall time, the
executors' run time (CPU and waiting inside tasks, summed over tasks) and shuffle bytes written.
What issue 35 asks of every speed change: a profile first, naming the part it removes. `--conf`
tries a Spark setting; `--json` keeps the numbers.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from labformat.bench.engines import HISTORY_FILES, Labformat, Workload
from labformat.model.enums import IndexType


def profile(spark, preset: str, days: int, root: Path, log=print) -> dict[str, Any]:
    """Load the preset's history with labformat-bloom under `root`, upsert `days` batches; the profile of each day."""
    from labformat import datasets
    from labformat.spark.ui import SparkUI

    cached = datasets.generate(spark, datasets.spec(preset))
    engine = Labformat(Workload(cached, days, None, None, HISTORY_FILES.get(preset, HISTORY_FILES["small"])),
                       root, spark, IndexType.BLOOM)
    started = time.perf_counter()
    engine.load()
    out: dict[str, Any] = {"preset": preset, "load_seconds": round(time.perf_counter() - started, 3), "days": []}
    log(f"load {out['load_seconds']:.2f} s")
    ui = SparkUI(spark)
    for day in range(1, min(days, cached.spec.batch_days) + 1):
        engine.before_day(day)
        started = time.perf_counter()
        engine.upsert(day)
        seconds = time.perf_counter() - started
        report = engine.last_report
        steps = []
        for step in report.steps:
            stages = []
            if step.group and isinstance(step.jobs, int) and step.jobs:
                for stage in ui.stages(step.group):
                    wall = ((stage.completion_time - stage.submission_time).total_seconds()
                            if stage.completion_time and stage.submission_time else None)
                    stages.append({"stage_id": stage.stage_id, "name": stage.name, "tasks": stage.num_tasks,
                                   "status": stage.status, "wall_seconds": wall,
                                   "executor_run_seconds": stage.executor_run_time_s,
                                   "shuffle_write_bytes": stage.shuffle_write_bytes})
            steps.append({"name": step.name, "seconds": step.seconds, "jobs": step.jobs, "tasks": step.tasks,
                          "stages": stages})
        out["days"].append({"day": day, "seconds": round(seconds, 3), "files_rewritten": report.files_rewritten,
                            "files_created": report.files_created, "steps": steps})
        log(f"day {day}: {seconds:.2f} s, {report.files_rewritten} files rewritten, {report.files_created} created")
        for step in steps:
            log(f"  {step['name']:<24} {step['seconds']:6.2f} s  jobs {step['jobs']}  tasks {step['tasks']}")
            for st in step["stages"]:
                if st["status"] == "SKIPPED":
                    continue
                wall = "–" if st["wall_seconds"] is None else f"{st['wall_seconds']:.2f}"
                log(f"      stage {st['stage_id']:>4} {st['tasks']:>4} tasks  wall {wall} s  "
                    f"run {st['executor_run_seconds']:.2f} s  shuffle {st['shuffle_write_bytes'] / 2**20:.1f} MiB  "
                    f"{st['name'][:60]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labformat.bench.profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="medium")
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--driver-memory", default=None, help="spark.driver.memory (default: the session's, 1g)")
    parser.add_argument("--conf", nargs="*", default=[], metavar="KEY=VALUE", help="more Spark settings to try")
    parser.add_argument("--json", default=None, help="also write the profile to this file")
    args = parser.parse_args(argv)

    import labformat as lf

    from labformat.bench.runner import spark_conf

    conf = {**dict(item.split("=", 1) for item in args.conf), **spark_conf(args.driver_memory)}
    spark = lf.spark_session(app_name="labformat-profile", **conf)
    with tempfile.TemporaryDirectory(prefix="labformat-profile-") as root:
        result = profile(spark, args.preset, args.days, Path(root))
    result["conf"] = conf
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
