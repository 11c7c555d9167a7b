"""Benchmark results rendered: medians per engine, a markdown report, per-day and scale charts, docs/benchmarks.md.

Everything here reads recorded results (the dicts `run_benchmark` returns, as stored in
`bench/results/<date>-<preset>-<workload>.json`); nothing is measured or estimated here.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from labformat.bench.engines import COW_BESIDE, COW_SKIPPING_ON, ENGINES, MOR, MOR_AFTER, MOR_BEFORE, REFERENCE, WORKLOADS
from labformat.model.enums import SortMode

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "bench" / "results"
DOCS_PATH = ROOT / "docs" / "benchmarks.md"
SCALE_PRESETS = ("tiny", "small", "medium", "large")
DOCS_PRESETS = ("small", "medium", "large")
# Issue 17's goals for labformat-bloom's daily upsert, per (workload, preset): (compared with, which
# day, highest ratio allowed). The late workload has none: it is the honest counter-example that
# merge-on-read is for.
TARGETS = {
    ("seed", "small"): (("spark-rewrite", "last day", 0.2),),
    ("seed", "medium"): (("spark-rewrite", "last day", 0.1), ("delta-rs", "total", 1.0), ("io-floor", "total", 5.0)),
}
# Issue 35's goals on labformat-bloom's own numbers, per (workload, preset): (what, highest value allowed).
ABSOLUTE_TARGETS = {
    ("seed", "small"): (("median day, seconds", 0.6),),
    ("seed", "medium"): (("peak RSS, GiB", 3.0),),
}
# Issue 35's goal for labformat-bloom's GLOBAL_SORT bulk load: its load time divided by an engine's
# (highest ratio allowed), per (workload, preset).
LOAD_TARGETS = {
    ("seed", "medium"): (("spark-sorted-write", 1.2),),
}
# Issue 18's goals for labformat-mor on the late workload, per (workload, preset): its total upsert time
# divided by an engine's (highest ratio allowed), and each standard query's median after the compaction
# divided by labformat-bloom's with skipping on (highest ratio allowed).
MOR_TARGETS = {
    ("late", "small"): {"upsert": (("delta-rs", "total", 1.0),), "query_after_compaction": 1.2},
    ("late", "medium"): {"upsert": (("delta-rs", "total", 1.0),), "query_after_compaction": 1.2},
}


def workload_of(result: dict[str, Any]) -> str:
    """The run's workload; runs recorded before workloads were named had late corrections or not in their spec."""
    return result.get("workload") or ("late" if result["dataset"]["spec"].get("late_fraction", 0) > 0 else "seed")


# ---- numbers ----------------------------------------------------------------------------------------

def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def incoming_bytes(result: dict[str, Any]) -> int:
    """The batches' bytes as cached parquet: the same denominator of write amplification for every engine."""
    return sum(result["dataset"]["batch_bytes"])


def summarize(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per engine: per-day and total upsert seconds, load seconds, bytes written, write amplification, peak RSS."""
    out: dict[str, dict[str, Any]] = {}
    incoming = incoming_bytes(result)
    for engine in result["engines"]:
        runs = [r for r in result["runs"] if r["engine"] == engine]
        days = sorted({d["day"] for r in runs for d in r["days"]})
        per_day = {day: spread([d["seconds"] for r in runs for d in r["days"] if d["day"] == day]) for day in days}
        written = [sum(d["bytes_written"] for d in r["days"]) for r in runs]
        loads = [r["load_seconds"] for r in runs if r["load_seconds"] is not None]
        out[engine] = {
            "days": per_day,
            "total": spread([sum(d["seconds"] for d in r["days"]) for r in runs]),
            "load": spread(loads) if loads else None,
            "bytes_written": statistics.median(written),
            "write_amplification": statistics.median(written) / incoming if incoming else None,
            "peak_rss_bytes": spread([r["peak_rss_bytes"] for r in runs]),
            "daily_median": statistics.median([d["seconds"] for r in runs for d in r["days"]]),
            # Without day 1, which pays the JVM's and the Python workers' warm-up: the scale's measure.
            "steady_median": statistics.median([d["seconds"] for r in runs for d in r["days"] if d["day"] > 1]
                                               or [d["seconds"] for r in runs for d in r["days"]]),
        }
    return out


def step_split(result: dict[str, Any]) -> tuple[list[str], dict[str, dict[str, float]]]:
    """Per labformat engine, the median seconds of each upsert step over every day but the first
    (day 1 pays the JVM's and the Python workers' warm-up) and every repetition."""
    names: list[str] = []
    out: dict[str, dict[str, float]] = {}
    for engine in result["engines"]:
        days = [d for r in result["runs"] if r["engine"] == engine for d in r["days"] if d.get("steps")]
        later = [d for d in days if d["day"] > 1] or days
        if not later:
            continue
        for d in later:
            names += [n for n in d["steps"] if n not in names]
        out[engine] = {n: statistics.median(d["steps"].get(n, 0.0) for d in later) for n in names}
        out[engine]["(whole upsert)"] = statistics.median(d["seconds"] for d in later)
    return names + ["(whole upsert)"], out


def step_table(result: dict[str, Any]) -> str:
    names, split = step_split(result)
    if not split:
        return "No per-step split was recorded in this run."
    engines = list(split)
    rows = [[n] + [f"{split[e].get(n, 0.0):.2f}" for e in engines] for n in names
            if any(split[e].get(n, 0.0) >= 0.005 for e in engines)]
    later = any(d["day"] > 1 for r in result["runs"] for d in r["days"])  # step_split's fallback to day 1
    return _table([f"median seconds, {'days 2+' if later else 'day 1'}"] + engines, rows)


def ratios(summary: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """labformat-bloom's median time divided by each other engine's: total, and on the last day."""
    if REFERENCE not in summary:
        return []
    ours = summary[REFERENCE]
    last = max(ours["days"])
    rows = []
    for engine, s in summary.items():
        if engine == REFERENCE:
            continue
        load = (ours["load"]["median"] / s["load"]["median"]) if ours.get("load") and s.get("load") else None
        rows.append({"engine": engine, "total": ours["total"]["median"] / s["total"]["median"],
                     "last_day": ours["days"][last]["median"] / s["days"][last]["median"], "load": load})
    return rows


# ---- formatting ---------------------------------------------------------------------------------------------

def _s(x: dict[str, float] | None) -> str:
    if x is None:
        return "–"
    return f"{x['median']:.2f} ({x['min']:.2f}–{x['max']:.2f})"


def _mb(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def upsert_table(result: dict[str, Any], summary: dict[str, dict[str, Any]]) -> str:
    """Rows: each day, the total, the load; columns: engines; cells: median (min–max) seconds."""
    engines = result["engines"]
    days = sorted({day for s in summary.values() for day in s["days"]})
    rows = [[f"day {day}"] + [_s(summary[e]["days"].get(day)) for e in engines] for day in days]
    rows.append(["**total**"] + [f"**{_s(summary[e]['total'])}**" for e in engines])
    rows.append(["bulk load"] + [_s(summary[e]["load"]) for e in engines])
    return _table(["seconds"] + engines, rows)


def ratio_table(result: dict[str, Any], summary: dict[str, dict[str, Any]]) -> str:
    targets = {engine: (day, limit) for engine, day, limit in TARGETS.get((workload_of(result), result["preset"]), ())}
    load_targets = dict(LOAD_TARGETS.get((workload_of(result), result["preset"]), ()))
    rows = []
    for r in ratios(summary):
        goals = []
        if r["engine"] in targets:
            day, limit = targets[r["engine"]]
            value = r["last_day"] if day == "last day" else r["total"]
            goals.append(f"≤ {limit:g} ({day}): {'met' if value <= limit else 'not met'}")
        if r["engine"] in load_targets and r["load"] is not None:
            limit = load_targets[r["engine"]]
            goals.append(f"≤ {limit:g} (bulk load): {'met' if r['load'] <= limit else 'not met'}")
        load = f"{r['load']:.2f}" if r["load"] is not None else "–"
        rows.append([r["engine"], f"{r['total']:.2f}", f"{r['last_day']:.2f}", load, "; ".join(goals)])
    return _table([f"{REFERENCE} ÷", "total", "last day", "bulk load", "goal (issues 17, 35)"], rows)


def absolute_goal_lines(result: dict[str, Any], summary: dict[str, dict[str, Any]]) -> str:
    """Issue 35's goals on labformat-bloom's own median day or peak memory, where the run has them."""
    ours = summary.get(REFERENCE)
    if ours is None:
        return ""
    measured = {"median day, seconds": ours["daily_median"], "peak RSS, GiB": ours["peak_rss_bytes"]["median"] / 2**30}
    return "\n".join(f"- {REFERENCE}'s {what}: {measured[what]:.2f}, goal (issue 35) ≤ {limit:g}: "
                     f"{'met' if measured[what] <= limit else 'not met'}"
                     for what, limit in ABSOLUTE_TARGETS.get((workload_of(result), result["preset"]), ()))


def bounds_lines(result: dict[str, Any], summary: dict[str, dict[str, Any]]) -> str:
    """What the run itself says about how far each target can be reached, from its own numbers."""
    lines = []
    floor, rewrite, delta = (summary.get(e) for e in ("io-floor", "spark-rewrite", "delta-rs"))
    bloom = [r for r in result["runs"] if r["engine"] == REFERENCE]
    if floor and rewrite and bloom:
        last = max(floor["days"])
        share = floor["days"][last]["median"] / rewrite["days"][last]["median"]
        rewritten = statistics.median(d["files_rewritten"] for r in bloom for d in r["days"] if d["day"] == last)
        lines.append(
            f"- The I/O floor alone takes {share:.2f} of the rewrite's time on the last day ({1 / share:.1f}x faster). "
            f"{REFERENCE} rewrote {rewritten:g} base file{'' if rewritten == 1 else 's'} that day; any "
            "copy-on-write upsert that rewrites them "
            f"does at least the floor's work, so it can be at most {1 / share:.1f}x faster than the rewrite, "
            "whatever its index, unless fewer files are rewritten.")
    if floor and delta:
        lines.append(
            f"- delta-rs took {delta['total']['median'] / floor['total']['median']:.2f}x the I/O floor's time over "
            "all days, in one native process with no job scheduling.")
    return "\n".join(lines)


def cost_table(result: dict[str, Any], summary: dict[str, dict[str, Any]]) -> str:
    rows = []
    for engine in result["engines"]:
        s = summary[engine]
        rows.append([engine, _mb(s["bytes_written"]),
                     f"{s['write_amplification']:.1f}" if s["write_amplification"] is not None else "–",
                     _gib(s["peak_rss_bytes"]["median"]) + f" ({_gib(s['peak_rss_bytes']['max'])} max)"])
    return _table(["engine", "bytes written, all days", "write amplification", "peak RSS, process tree"], rows)


def rewritten_table(result: dict[str, Any]) -> str:
    """Per day, the existing data files each engine replaced and their bytes (medians over repetitions), for
    the engines that report them: what range pruning and the index saved, or did not."""
    engines = [e for e in result["engines"]
               if any("files_rewritten" in d for r in result["runs"] if r["engine"] == e for d in r["days"])]
    if not engines:
        return "No engine of this run reported the files it rewrote."
    days = sorted({d["day"] for r in result["runs"] for d in r["days"]})

    def cell(engine: str, day: int | None) -> str:
        runs = [r for r in result["runs"] if r["engine"] == engine]
        picked = [[d for d in r["days"] if day is None or d["day"] == day] for r in runs]
        files = statistics.median(sum(d.get("files_rewritten", 0) for d in ds) for ds in picked)
        size = statistics.median(sum(d.get("bytes_rewritten", 0) for d in ds) for ds in picked)
        return f"{files:g} ({_mb(size)})"

    rows = [[f"day {day}"] + [cell(e, day) for e in engines] for day in days]
    rows.append(["**all days**"] + [f"**{cell(e, None)}**" for e in engines])
    return _table(["files rewritten (bytes)"] + engines, rows)


def query_table(result: dict[str, Any]) -> str:
    if not result["queries"] and result["options"].get("queries") is False:
        return "Not run (`--no-queries`): this run measured the load and the upserts only."
    rows = [[q["query"], q["engine"], _s(spread(q["seconds"])), f"{q['files_read']} of {q['files_total']}",
             f"{q['rows']:,}"] for q in result["queries"]]
    return _table(["query", "engine", "seconds", "files read", "rows"], rows)


def _query_median(result: dict[str, Any], query: str, label: str) -> float | None:
    found = [q for q in result["queries"] if q["query"] == query and q["engine"] == label]
    return statistics.median(found[0]["seconds"]) if found else None


def mor_table(result: dict[str, Any], summary: dict[str, dict[str, Any]]) -> str:
    """labformat-mor against its goals: total upsert time against each goal's engine, then per query the median
    seconds of copy-on-write (labformat-bloom, skipping on), merge-on-read with its logs and after compaction."""
    if MOR not in summary:
        return ""
    goals = MOR_TARGETS.get((workload_of(result), result["preset"]), {})
    upsert_goals = {engine: (day, limit) for engine, day, limit in goals.get("upsert", ())}
    mor = summary[MOR]
    rows = []
    for engine in [e for e in result["engines"] if e != MOR]:
        ratio = mor["total"]["median"] / summary[engine]["total"]["median"]
        goal = ""
        if engine in upsert_goals:
            _, limit = upsert_goals[engine]
            goal = f"≤ {limit:g} (total): {'met' if ratio <= limit else 'not met'}"
        rows.append([f"upserts, total: {MOR} ÷ {engine}", f"{ratio:.2f}", goal])
    cow = COW_SKIPPING_ON
    limit = goals.get("query_after_compaction")
    for query in dict.fromkeys(q["query"] for q in result["queries"]):
        before, after = (_query_median(result, query, label) for label in (MOR_BEFORE, MOR_AFTER))
        # Copy-on-write timed in the compacted table's own rounds when the run has it (side by side);
        # records made before that compare with its earlier rounds.
        base, against = _query_median(result, query, COW_BESIDE), f"{cow[:-1]}, same rounds)"
        if base is None:
            base, against = _query_median(result, query, cow), cow
        if base is None or after is None:
            continue
        ratio = after / base
        goal = f"≤ {limit:g}: {'met' if ratio <= limit else 'not met'}" if limit else ""
        shown = f"{before:.2f} s with logs, " if before is not None else ""
        rows.append([f"{query}: after compaction ÷ {against}",
                     f"{ratio:.2f} ({shown}{after:.2f} s after, {base:.2f} s copy-on-write)", goal])
    table = _table(["labformat-mor", "ratio", "issue 18 goal"], rows)
    c = result.get("compaction")
    if c:
        table += (f"\n\nThe compaction after the last day: {c['file_slices_compacted']} file slices, "
                  f"{c['log_files_compacted']} log files ({_mb(c['log_bytes_compacted'])}) merged into new base files "
                  f"({_mb(c['bytes_written'])}) in {c['seconds']:.2f} s, not counted in the upsert times.")
    return table


def run_facts(result: dict[str, Any]) -> str:
    m, d, o = result["machine"], result["dataset"], result["options"]
    v = m["versions"]
    spec = d["spec"]
    late = (f"late corrections ({spec['late_fraction']:.0%} of a day's readings) over the "
            f"{spec['late_window_days']} days before" if spec.get("late_fraction") else "no late corrections")
    files = (f"the history bulk inserted as {o['history_files']} base files; " if o.get("history_files") else "")
    return "\n".join([
        f"- preset `{result['preset']}`, workload `{workload_of(result)}` (each batch: the new day's readings, "
        f"corrections of the previous day, {late}), {result['date']}, {result['repeat']} repetition(s), "
        f"{o['days']} upsert days; the whole run took {result['wall_seconds'] / 60:.1f} minutes",
        f"- history {d['history_rows']:,} rows ({_mb(d['history_bytes'])} of parquet); batches "
        f"{min(d['batch_rows']):,}–{max(d['batch_rows']):,} rows ({_mb(sum(d['batch_bytes']))} in all)",
        f"- {files}labformat `max_file_size` {_mb(o['max_file_size'])}, `small_file_limit` "
        f"{_mb(o['small_file_limit'])}" + (f" ({o['sizes_from']})" if o.get("sizes_from") else "") + "; "
        "pyiceberg targets the same file size (`write.target-file-size-bytes`); " + (
            "so does delta-rs (`delta.targetFileSize` on its table, which its load and its MERGE honour)"
            if o.get("delta_merge_file_size") else
            "delta-rs loads with it (`target_file_size`), but its MERGE takes no file size and writes "
            "files by its own default") + (
            "; delta-rs' MERGE skips the files outside the batch's key range (`streamed_exec=False`)"
            if o.get("delta_merge_prunes") else
            "; delta-rs' MERGE scanned its whole table (`streamed_exec` at its default)"),
        f"- {m['cores']} cores, {_gib(m['memory_bytes'])} memory, Python {m['python']}, pyspark {v.get('pyspark')}, "
        f"pyarrow {v.get('pyarrow')}, deltalake {v.get('deltalake')}, pyiceberg {v.get('pyiceberg')}"
        + (f"; every Spark engine with `spark.driver.memory` {o['driver_memory']}" if o.get("driver_memory") else ""),
        "- each engine's workload in a process of its own" if result["isolated"]
        else "- all engines in one process on one SparkSession: peak RSS is that shared process tree's",
    ])


def check_line(result: dict[str, Any]) -> str:
    c = result["check"]
    return (f"All {len(c['tables'])} finished tables equal {c['reference']}'s: {c['rows']:,} rows, "
            f"hash {c['hash']} (row count and the sum of per-row xxhash64 over all data columns, in Spark).")


def run_sections(result: dict[str, Any], chart: str | None, level: str = "##") -> list[str]:
    """The sections of one run: time per day, ratios and goals, steps, files rewritten, costs, queries, check."""
    summary = summarize(result)
    parts = [f"{level} Daily upsert time, seconds: median (min–max)", "", upsert_table(result, summary), ""]
    if chart:
        parts += [f"![per-day upsert time per engine]({chart})", ""]
    parts += [f"{level} {REFERENCE}'s time divided by each engine's (below 1: {REFERENCE} is faster)", "",
              ratio_table(result, summary), "", absolute_goal_lines(result, summary), "",
              bounds_lines(result, summary), "",
              f"{level} Where labformat's upsert time goes: the report's steps", "",
              "Each upsert's report times its seven steps (`WriteReport.steps`); medians over the days after the "
              "first and every repetition. `(whole upsert)` is the engine's timed call, which also opens the "
              "table and reads the batch.", "", step_table(result), "",
              f"{level} Files rewritten per day: existing data files replaced, and their bytes", "",
              "labformat from its write report; delta-rs from its MERGE metrics; pyiceberg from the summaries of "
              "the snapshots its upsert committed; the rewrite replaces every file, every day.", "",
              rewritten_table(result), "",
              f"{level} Bytes written, write amplification, memory (medians over repetitions)", "",
              cost_table(result, summary), "",
              f"{level} Queries, seconds: median (min–max)", "", query_table(result), ""]
    if MOR in summary:
        parts += [f"{level} Merge-on-read: {MOR} against issue 18's goals", "",
                  f"{MOR} upserts each day as a delta commit (updates appended to log files, inline compaction "
                  "off), and is compacted once after the last day; its queries run before and after that "
                  "compaction.", "", mor_table(result, summary), ""]
    parts += [f"{level} Correctness", "", check_line(result), ""]
    return parts


def report_markdown(result: dict[str, Any], chart: str | None = None) -> str:
    """The markdown report of one run; `chart` is the per-day PNG's path relative to the report."""
    return "\n".join([f"# Benchmark: preset {result['preset']}, workload {workload_of(result)}, {result['date']}",
                       "", run_facts(result), ""] + run_sections(result, chart))


# ---- charts -----------------------------------------------------------------------------------------------------

def plot_days(result: dict[str, Any], path: str | Path) -> None:
    """Per-day upsert time per engine: medians joined by lines, min–max as error bars."""
    from matplotlib.figure import Figure

    summary = summarize(result)
    figure = Figure(figsize=(9, 4.5), layout="constrained")
    ax = figure.add_subplot()
    for engine in result["engines"]:
        days = sorted(summary[engine]["days"])
        med = [summary[engine]["days"][d]["median"] for d in days]
        low = [m - summary[engine]["days"][d]["min"] for d, m in zip(days, med)]
        high = [summary[engine]["days"][d]["max"] - m for d, m in zip(days, med)]
        ax.errorbar(days, med, yerr=[low, high], marker="o", capsize=3, label=engine)
    ax.set_yscale("log")
    ax.set_xticks(sorted({day for s in summary.values() for day in s["days"]}))
    ax.set_xlabel("upsert day")
    ax.set_ylabel("seconds (log scale)")
    ax.set_title(f"Daily upsert time, preset {result['preset']}: median and min–max of {result['repeat']} run(s)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.savefig(path, dpi=110)


def plot_scale(results: list[dict[str, Any]], path: str | Path, workload: str = "seed") -> None:
    """Median daily upsert time per engine against the table's rows, one point per preset (log-log)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), layout="constrained")
    ax = figure.add_subplot()
    for engine in ENGINES:
        points = sorted((r["check"]["rows"], summarize(r)[engine]["steady_median"])
                        for r in results if engine in r["engines"] and r["check"].get("rows"))
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=engine)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows in the table after the last upsert")
    ax.set_ylabel("median daily upsert (days 2+), seconds")
    ax.set_title(f"Daily upsert time vs table size, workload {workload}")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.savefig(path, dpi=110)


# ---- recorded results and the docs page ---------------------------------------------------------------------

def result_stem(result: dict[str, Any]) -> str:
    return f"{result['date']}-{result['preset']}-{workload_of(result)}"


def record(result: dict[str, Any], results_dir: str | Path = RESULTS_DIR) -> list[Path]:
    """Write `<date>-<preset>-<workload>.json`, its per-day chart (.png) and report (.md) under `results_dir`."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    stem = result_stem(result)
    paths = [results_dir / f"{stem}.json", results_dir / f"{stem}.png", results_dir / f"{stem}.md"]
    paths[0].write_text(json.dumps(result, indent=1) + "\n")
    plot_days(result, paths[1])
    paths[2].write_text(report_markdown(result, paths[1].name))
    return paths


def load_results(results_dir: str | Path = RESULTS_DIR) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(Path(results_dir).glob("*.json"))]


def latest_runs(results: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The latest recorded run of each (workload, preset)."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: r["started_at"]):
        latest[(workload_of(r), r["preset"])] = r
    return latest


def _presets(names) -> list[str]:
    return [p for p in SCALE_PRESETS if p in names] + sorted(set(names) - set(SCALE_PRESETS))


def scale_table(latest: dict[tuple[str, str], dict[str, Any]], workload: str) -> str:
    runs = {preset: r for (w, preset), r in latest.items() if w == workload}
    presets = _presets(runs)
    engines = [e for e in ENGINES if any(e in runs[p]["engines"] for p in presets)]
    rows = []
    for preset in presets:
        r = runs[preset]
        summary = summarize(r)
        d = r["dataset"]
        rows.append([f"{preset} ({r['date']}, {r['repeat']}×{r['options']['days']} days)",
                     f"{r['check']['rows']:,}", f"{round(statistics.mean(d['batch_rows'])):,}"]
                    + [f"{summary[e]['steady_median']:.2f}" if e in summary else "–" for e in engines])
    return _table(["preset (run)", "rows after the workload", "rows per batch"] + engines, rows)


def per_batch_row_table(latest: dict[tuple[str, str], dict[str, Any]], workload: str) -> str:
    """The scale table's day divided by the rows of its batch, in microseconds: flat across presets for an
    engine whose day follows its batch, growing for one whose day follows its table."""
    runs = {preset: r for (w, preset), r in latest.items() if w == workload}
    presets = _presets(runs)
    engines = [e for e in ENGINES if any(e in runs[p]["engines"] for p in presets)]
    rows = []
    for preset in presets:
        summary, batch = summarize(runs[preset]), statistics.mean(runs[preset]["dataset"]["batch_rows"])
        rows.append([preset] + [f"{summary[e]['steady_median'] / batch * 1e6:.1f}" if e in summary else "–"
                                for e in engines])
    return _table(["µs per batch row"] + engines, rows)


def growth_table(latest: dict[tuple[str, str], dict[str, Any]], workload: str) -> str:
    """Between consecutive presets, each engine's growth exponent: d log(seconds a day) / d log(table rows).
    1 is a day costing in proportion to the table; 0 is a day whose cost no longer grows with it."""
    runs = {preset: r for (w, preset), r in latest.items() if w == workload}
    presets = _presets(runs)
    engines = [e for e in ENGINES if any(e in runs[p]["engines"] for p in presets)]
    rows = []
    for a, b in zip(presets, presets[1:]):
        sa, sb = summarize(runs[a]), summarize(runs[b])
        growth = math.log(runs[b]["check"]["rows"] / runs[a]["check"]["rows"])

        def cell(e):
            if e not in sa or e not in sb or growth <= 0:
                return "–"
            return f"{math.log(sb[e]['steady_median'] / sa[e]['steady_median']) / growth:.2f}"

        rows.append([f"{a} → {b}"] + [cell(e) for e in engines])
    return _table(["growth exponent"] + engines, rows) if rows else ""


INTRO = """\
One command runs the same drone workload (bulk load of the history, then every daily batch) through
each engine, N times, engines alternating, records `bench/results/<date>-<preset>-<workload>.json` with
a chart and a report beside it, and rewrites this page. Engines:

- `labformat-bloom`, `labformat-simple`, `labformat-bucket`: labformat with that index (bulk insert
  with GLOBAL_SORT, then `Table.upsert` per batch); the BUCKET table has as many buckets as the
  history has base files, so its files start at the others' size;
- `labformat-mor`: labformat on a merge-on-read table, BLOOM index: each upsert a delta commit whose
  updates go to log files, inline compaction off; after the last day its queries run with the logs,
  then once more after one `Table.compact()` (timed apart, not in the upsert times);
- `spark-rewrite`: the no-index way in plain PySpark: read the whole table, union the batch, keep the
  newest row per key (window over `updated_at`), write everything as a new version folder;
- `spark-sorted-write`: the same with the rows in key order (`orderBy(key).write.parquet`, as many
  files as labformat-bloom's history): its bulk load is the fair baseline for a GLOBAL_SORT bulk insert;
- `delta-rs`: `write_deltalake` loads the history; each day `DeltaTable.merge` on the key (update all
  when matched, insert all when not) with the deduplicated batch, `streamed_exec=False` so that it skips
  the target files outside the batch's key range (records before 2026-11-27's second runs scanned the
  whole table: its default);
- `pyiceberg`: SQL catalog on sqlite, local warehouse; `append` loads, `Table.upsert` on the key;
- `io-floor`: not a table format: pyarrow reads exactly the base files labformat-bloom's upsert
  rewrote that day and writes them back (same codec, all cores), nothing else.

Two workloads (`--workload`), the dataset's scenarios:

- `seed` (the default): each batch holds the new day's readings, corrections of the previous day and
  stale duplicates, as in the seed articles. On time-ordered keys range pruning leaves the newest
  files only, so a copy-on-write upsert's cost should stop growing with the table.
- `late`: the same, plus late corrections (1% of a day's readings) reaching a month back. One stray
  old key keeps a whole old file in play, so copy-on-write rewrites old files every day: the honest
  counter-example, and the workload merge-on-read is for.

File sizes: labformat-bloom bulk inserts the history as a few dozen base files at `small` and a few
hundred at `medium` (one file per GLOBAL_SORT task); `max_file_size` is then Hudi's 120 MB scaled to
those files as the workshop scales it (15% above the smallest, `small_file_limit` at Hudi's 100/120 of
it), and every engine that takes a file size gets the same one.

What is measured: per upsert day the wall time of the engine's whole call (opening the table, reading
the cached batch, deduplicating, merging, committing); the existing data files it replaced and their
bytes; bytes written (the files new or changed in the engine's folder afterwards, metadata and logs
included); write amplification = bytes written / the batches' bytes as cached parquet (the same
denominator for every engine); peak RSS of the engine's process tree (its Python process, and for
Spark engines the JVM and the Python workers), sampled every 50 ms. Each engine's workload runs in a
fresh process, so every Spark engine pays its JVM's warm-up on day 1, as a daily job would. The peers
read the cached parquet with pyarrow and deduplicate the batch by labformat's rule (highest
`updated_at`; ties to the larger remaining columns). After the workload every finished table is
checked equal to labformat-bloom's; a disagreement fails the run. Timings on a 2-core machine shared
with other work are noisy: read the min–max.
"""


def docs_markdown(latest: dict[tuple[str, str], dict[str, Any]], results_link: str,
                  scale_charts: dict[str, str], presets: tuple[str, ...] = DOCS_PRESETS) -> str:
    """docs/benchmarks.md: each workload's latest run at each of `presets` in full, then the scale sections."""
    parts = [
        "# Benchmarks: labformat's daily upserts and queries against its peers and the I/O floor", "",
        f"<!-- Generated by `python -m labformat.bench` from {results_link}/*.json; edit labformat/bench/render.py, "
        "not this file. -->", "",
        "```bash",
        "python3 scripts/lab.py bench --preset small --repeat 3                  # the seed workload",
        "python3 scripts/lab.py bench --preset small --repeat 3 --workload late",
        "python3 scripts/lab.py bench --preset medium --days 3 --repeat 2 --driver-memory 4g \\",
        "    --engines labformat-bloom spark-rewrite spark-sorted-write delta-rs io-floor",
        "python3 scripts/lab.py bench --preset large --days 3 --repeat 1 --driver-memory 4g --no-queries \\",
        "    --engines labformat-bloom delta-rs io-floor",
        "```", "", INTRO]
    missing = []
    for workload in WORKLOADS:
        for preset in presets:
            run = latest.get((workload, preset))
            if run is None:
                missing.append((workload, preset))
                continue
            stem = result_stem(run)
            parts += [f"## Workload `{workload}`, preset `{preset}` ([JSON]({results_link}/{stem}.json), "
                      f"[report]({results_link}/{stem}.md))", "", run_facts(run), ""]
            parts += run_sections(run, f"{results_link}/{stem}.png", level="###")
    parts += ["## Scale: the daily upsert as the table grows", "",
              "Median upsert seconds per day of the latest recorded run of each preset, per workload, over every "
              "repetition and every day but the first (day 1 pays the JVM's and the Python workers' warm-up; a run "
              "of one day keeps it). Below each table, the growth exponent between consecutive presets: how the "
              "day's time grew with the table's rows on a log-log scale (1: in proportion to the table; 0: not at "
              "all). Presets differ in batch size too (rows per batch), so a day's cost that follows its batch "
              "rather than its table still grows between presets: the last table divides each day by its batch's "
              "rows, which stays flat for such an engine.", ""]
    for workload in WORKLOADS:
        if any(w == workload for w, _ in latest):
            parts += [f"### Workload `{workload}`", "", scale_table(latest, workload), "",
                      growth_table(latest, workload), "", per_batch_row_table(latest, workload), ""]
            if workload in scale_charts:
                parts += [f"![daily upsert time vs table size, workload {workload}]({scale_charts[workload]})", ""]
    if missing:
        parts += ["Not recorded on this machine: " + ", ".join(f"`{w}` at `{p}`" for w, p in missing) + ". Run "
                  + ", ".join(f"`python3 scripts/lab.py bench --preset {p} --workload {w} --repeat 1"
                              + (" --days 3 --no-queries --driver-memory 4g" if p == "large" else "") + "`"
                              for w, p in missing)
                  + " to add it.", ""]
    return "\n".join(parts)


def refresh_docs(results_dir: str | Path = RESULTS_DIR, docs_path: str | Path = DOCS_PATH,
                 presets: tuple[str, ...] = DOCS_PRESETS) -> Path | None:
    """Rewrite docs/benchmarks.md (and the scale charts) from the recorded results; None when there are none."""
    results_dir, docs_path = Path(results_dir), Path(docs_path)
    latest = latest_runs(load_results(results_dir))
    if not latest:
        return None
    link = _relative(results_dir, docs_path.parent)
    charts = {}
    for workload in WORKLOADS:
        runs = [r for (w, _), r in latest.items() if w == workload]
        if runs:
            png = results_dir / f"scale-{workload}.png"
            plot_scale(runs, png, workload)
            charts[workload] = f"{link}/{png.name}"
    docs_path.parent.mkdir(parents=True, exist_ok=True)
    docs_path.write_text(docs_markdown(latest, link, charts, presets)
                         + goals_markdown(latest, latest_bulk_loads(results_dir / BULK_LOAD_DIR), link)
                         + s3_markdown(results_dir / S3_DIR, link)
                         + bulk_load_markdown(results_dir / BULK_LOAD_DIR, link)
                         + fixed_cost_markdown(results_dir / FIXED_COST_DIR, link))
    return docs_path


FIXED_COST_DIR = "fixed-cost"
BULK_LOAD_DIR = "bulk-load"
# Issue 35's goal for each pair of `labformat.bench.bulk_load`, at medium: labformat's time ÷ Spark's, at most.
BULK_LOAD_TARGET = 1.2
# Runs with tables on a local S3 server (`--engines ... labformat-bloom-s3 delta-rs-s3`): recorded apart,
# so that a run of a few engines never stands in for a preset's full run.
S3_DIR = "s3"


def s3_markdown(folder: Path, results_link: str) -> str:
    """The latest run with S3 engines, as a section of docs/benchmarks.md ('' when none): each S3
    engine beside its local twin, measured in the same run, alternating."""
    runs = sorted(Path(folder).glob("*.json"))
    if not runs:
        return ""
    r = json.loads(runs[-1].read_text())
    summary = summarize(r)
    rows = []
    for local, remote in (("labformat-bloom", "labformat-bloom-s3"), ("delta-rs", "delta-rs-s3")):
        if local in summary and remote in summary:
            a, b = summary[local], summary[remote]
            rows.append([f"{remote} ÷ {local}", f"{b['daily_median'] / a['daily_median']:.2f}",
                         f"{b['load']['median'] / a['load']['median']:.2f}" if a["load"] and b["load"] else "–"])
    return "\n".join([
        "", "## On S3: the same workload against a local S3 server", "",
        f"`python3 scripts/lab.py bench --engines {' '.join(r['engines'])} --preset {r['preset']} "
        f"--repeat {r['repeat']} --days {r['options']['days']}` "
        f"([JSON]({results_link}/{S3_DIR}/{runs[-1].name})): the `-s3` engines keep "
        "their tables on a SeaweedFS server (`weed mini`) the run starts on 127.0.0.1, every byte over HTTP; "
        "labformat commits there with conditional PUTs, and Spark's tasks read base files through pyarrow's "
        "S3 file system. A local server measures the protocol's round trips, not a cloud's latency.", "",
        run_facts(r), "", upsert_table(r, summary), "", check_line(r), "",
        _table(["median day, S3 ÷ local disk", "daily upsert", "bulk load"], rows), ""])


def fixed_cost_markdown(folder: Path, results_link: str) -> str:
    """The latest `labformat.bench.fixed_cost` run, as a section of docs/benchmarks.md ('' when none)."""
    runs = sorted(Path(folder).glob("*.json"))
    if not runs:
        return ""
    r = json.loads(runs[-1].read_text())
    steps = sorted(r["median_step_seconds"].items(), key=lambda kv: -kv[1])
    jobs = r.get("step_jobs")  # recorded since issue 17's job count
    rows = [[name, f"{seconds:.2f}"] + ([str(jobs.get(name, 0))] if jobs is not None else [])
            for name, seconds in steps if seconds >= 0.005]
    header = ["step", "median seconds"] + (["Spark jobs"] if jobs is not None else [])
    return "\n".join([
        "", "## Fixed cost of a commit", "",
        f"`python -m labformat.bench.fixed_cost` ({r['date']}, [JSON]({results_link}/{FIXED_COST_DIR}/{runs[-1].name})): "
        f"a {r['index_type']} upsert of one existing key into the `tiny` table touches exactly one file group. "
        f"Median of {r['repeat']} runs after one warm-up: **{r['median_seconds']:.2f} s** "
        f"(min {r['min_seconds']:.2f}, max {r['max_seconds']:.2f}; the warm-up took {r['first_seconds']:.2f} s). "
        "Issue 17's goal is at most 0.6 s.", "",
        _table(header, rows), ""])


def latest_bulk_loads(folder: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The latest `labformat.bench.bulk_load` record of each preset: (its path, the record)."""
    latest: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path in sorted(Path(folder).glob("*.json")):
        r = json.loads(path.read_text())
        latest[r["preset"]] = (path, r)
    return latest


# Issue 35's goals, each with where docs/performance.md profiles what stands between labformat and it.
PERFORMANCE_DOC = "performance.md"


def goals_markdown(latest: dict[tuple[str, str], dict[str, Any]], bulk: dict[str, tuple[Path, dict[str, Any]]],
                   results_link: str) -> str:
    """Issue 35's goals in one table: each measured by the latest recorded run that has it, met or not, and
    the section of docs/performance.md that profiles the gap."""
    rows = []

    def run_cell(run: dict[str, Any] | None, extra: str = "") -> str:
        return f"[{result_stem(run)}]({results_link}/{result_stem(run)}.md){extra}" if run else "not recorded"

    def add(goal: str, value: float | None, limit: float, unit: str, source: str, profile: str) -> None:
        measured = "–" if value is None else f"{value:.2f}{unit}"
        status = "–" if value is None else ("met" if value <= limit else "not met")
        rows.append([goal, measured, status, source, f"[{profile}]({PERFORMANCE_DOC}#{profile.lower().replace(' ', '-')})"])

    medium, small = latest.get(("seed", "medium")), latest.get(("seed", "small"))
    ms, ss = (summarize(medium) if medium else {}), (summarize(small) if small else {})
    ours_m, ours_s = ms.get(REFERENCE), ss.get(REFERENCE)

    def ratio(summary, ours, engine, what):
        if ours is None or engine not in summary:
            return None
        if what == "load":
            return ours["load"]["median"] / summary[engine]["load"]["median"] if summary[engine]["load"] else None
        return ours["total"]["median"] / summary[engine]["total"]["median"]

    add("`medium` day ≤ delta-rs's (total, ratio ≤ 1)", ratio(ms, ours_m, "delta-rs", "total"), 1.0, "x",
        run_cell(medium), "A medium day")
    add("`medium` day ≤ 5x the I/O floor (total)", ratio(ms, ours_m, "io-floor", "total"), 5.0, "x",
        run_cell(medium), "A medium day")
    bulk_medium = bulk.get("medium")
    pairs = {p["labformat"]: p["median_ratio"] for p in bulk_medium[1]["pairs"]} if bulk_medium else {}
    bulk_cell = (f"[bulk-load {bulk_medium[1]['date']}]({results_link}/{BULK_LOAD_DIR}/{bulk_medium[0].name})"
                 if bulk_medium else "not recorded")
    if SortMode.GLOBAL_SORT in pairs:
        add("`medium` GLOBAL_SORT bulk insert ≤ 1.2x `orderBy(key).write.parquet`", pairs[SortMode.GLOBAL_SORT], 1.2, "x",
            bulk_cell, "The bulk load")
    else:
        add("`medium` GLOBAL_SORT bulk insert ≤ 1.2x `spark-sorted-write`", ratio(ms, ours_m, "spark-sorted-write", "load"),
            1.2, "x", run_cell(medium), "The bulk load")
    add("`medium` NONE bulk insert ≤ 1.2x `df.write.parquet`", pairs.get(SortMode.NONE), 1.2, "x", bulk_cell, "The bulk load")
    add("`small` median day ≤ 0.6 s", ours_s["daily_median"] if ours_s else None, 0.6, " s", run_cell(small),
        "A small day")
    last = None
    if ours_s and "spark-rewrite" in ss:
        day = max(ours_s["days"])
        last = ours_s["days"][day]["median"] / ss["spark-rewrite"]["days"][day]["median"]
    add("`small` last day ≥ 5x faster than the rewrite (ratio ≤ 0.2)", last, 0.2, "x", run_cell(small), "A small day")
    add("`medium` peak RSS ≤ 3 GiB", ours_m["peak_rss_bytes"]["median"] / 2**30 if ours_m else None, 3.0, " GiB",
        run_cell(medium), "Memory")
    return "\n".join(["", "## Issue 35's goals", "",
                      "Each goal as the latest recorded run measures it; where one is not met, "
                      f"[docs/{PERFORMANCE_DOC}]({PERFORMANCE_DOC}) profiles what stands between labformat and it, "
                      "and the next step.", "",
                      _table(["goal", "measured", "status", "run", "profile"], rows), ""])


def bulk_load_markdown(folder: Path, results_link: str) -> str:
    """The latest `labformat.bench.bulk_load` run of each preset, as a section of docs/benchmarks.md ('' when none)."""
    latest = latest_bulk_loads(folder)
    if not latest:
        return ""
    parts = ["", "## Bulk load: labformat's bulk insert beside Spark writing the same rows", "",
             "`python -m labformat.bench.bulk_load --preset medium --repeat 3 --driver-memory 4g`: each of "
             "labformat's sort modes beside Spark's own write of the same cached history, alternating in one "
             "session after an untimed warm-up on `tiny`: `NONE` beside `df.write.parquet` (one task per input "
             "partition on both sides; labformat's task rolls to a new file at `max_file_size`, Hudi's 120 MB), "
             "`GLOBAL_SORT` beside `df.orderBy(key).write.parquet` into as many files. "
             "The ratio is the median of the per-repetition ratios.", ""]
    for preset in _presets(latest):
        path, r = latest[preset]
        rows = []
        for pair in r["pairs"]:
            ours, theirs = pair["labformat"], pair["spark"]
            goal = ""
            if preset == "medium":
                goal = f"≤ {BULK_LOAD_TARGET:g}: {'met' if pair['median_ratio'] <= BULK_LOAD_TARGET else 'not met'}"
            rows.append([f"{ours} ÷ {theirs}", _s(spread(r["seconds"][ours])), _s(spread(r["seconds"][theirs])),
                         f"{r['files'][ours]} / {r['files'][theirs]}", f"{pair['median_ratio']:.2f} "
                         f"({min(pair['ratios']):.2f}–{max(pair['ratios']):.2f})", goal])
        parts += [f"Preset `{preset}` ({r['date']}, {r['repeat']} repetitions, {r['history_rows']:,} rows, "
                  f"driver memory {r['driver_memory']}, [JSON]({results_link}/{BULK_LOAD_DIR}/{path.name})):", "",
                  _table(["labformat ÷ Spark", "labformat seconds", "Spark seconds", "files written", "ratio",
                          "goal (issue 35)"], rows), ""]
    return "\n".join(parts)


def _relative(target: Path, start: Path) -> str:
    import os

    return os.path.relpath(target.resolve(), start.resolve())
