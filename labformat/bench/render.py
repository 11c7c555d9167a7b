"""Benchmark results rendered: medians per engine, a markdown report, per-day and scale charts, docs/benchmarks.md.

Everything here reads recorded results (the dicts `run_benchmark` returns, as stored in
`bench/results/<date>-<preset>.json`); nothing is measured or estimated here.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from labformat.bench.engines import ENGINES, REFERENCE

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "bench" / "results"
DOCS_PATH = ROOT / "docs" / "benchmarks.md"
SCALE_PRESETS = ("tiny", "small", "medium", "large")
# The targets for labformat-bloom's daily upsert: (compared with, which day, highest ratio allowed).
TARGETS = (("spark-rewrite", "last day", 0.1), ("io-floor", "total", 2.0), ("delta-rs", "total", 1.0))


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
        rows.append({"engine": engine, "total": ours["total"]["median"] / s["total"]["median"],
                     "last_day": ours["days"][last]["median"] / s["days"][last]["median"]})
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


def ratio_table(summary: dict[str, dict[str, Any]]) -> str:
    targets = {engine: (day, limit) for engine, day, limit in TARGETS}
    rows = []
    for r in ratios(summary):
        target = ""
        if r["engine"] in targets:
            day, limit = targets[r["engine"]]
            value = r["last_day"] if day == "last day" else r["total"]
            target = f"≤ {limit:g} ({day}): {'met' if value <= limit else 'not met'}"
        rows.append([r["engine"], f"{r['total']:.2f}", f"{r['last_day']:.2f}", target])
    return _table([f"{REFERENCE} ÷", "total", "last day", "issue 5 target"], rows)


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


def query_table(result: dict[str, Any]) -> str:
    rows = [[q["query"], q["engine"], _s(spread(q["seconds"])), f"{q['files_read']} of {q['files_total']}",
             f"{q['rows']:,}"] for q in result["queries"]]
    return _table(["query", "engine", "seconds", "files read", "rows"], rows)


def run_facts(result: dict[str, Any]) -> str:
    m, d, o = result["machine"], result["dataset"], result["options"]
    v = m["versions"]
    return "\n".join([
        f"- preset `{result['preset']}`, {result['date']}, {result['repeat']} repetition(s), "
        f"{o['days']} upsert days; the whole run took {result['wall_seconds'] / 60:.1f} minutes",
        f"- history {d['history_rows']:,} rows ({_mb(d['history_bytes'])} of parquet); batches "
        f"{min(d['batch_rows']):,}–{max(d['batch_rows']):,} rows ({_mb(sum(d['batch_bytes']))} in all)",
        f"- labformat `max_file_size` {_mb(o['max_file_size'])}, `small_file_limit` {_mb(o['small_file_limit'])}; "
        "pyiceberg targets the same file size (`write.target-file-size-bytes`); " + (
            "so does delta-rs (`delta.targetFileSize` on its table, which its load and its MERGE honour)"
            if o.get("delta_merge_file_size") else
            "delta-rs loads with it (`target_file_size`), but its MERGE takes no file size and writes "
            "files by its own default"),
        f"- {m['cores']} cores, {_gib(m['memory_bytes'])} memory, Python {m['python']}, pyspark {v.get('pyspark')}, "
        f"pyarrow {v.get('pyarrow')}, deltalake {v.get('deltalake')}, pyiceberg {v.get('pyiceberg')}",
        "- each engine's workload in a process of its own" if result["isolated"]
        else "- all engines in one process on one SparkSession: peak RSS is that shared process tree's",
    ])


def check_line(result: dict[str, Any]) -> str:
    c = result["check"]
    return (f"All {len(c['tables'])} finished tables equal {c['reference']}'s: {c['rows']:,} rows, "
            f"hash {c['hash']} (row count and the sum of per-row xxhash64 over all data columns, in Spark).")


def report_markdown(result: dict[str, Any], chart: str | None = None) -> str:
    """The markdown report of one run; `chart` is the per-day PNG's path relative to the report."""
    summary = summarize(result)
    parts = [f"# Benchmark: preset {result['preset']}, {result['date']}", "", run_facts(result), "",
             "## Daily upsert time, seconds: median (min–max)", "", upsert_table(result, summary), ""]
    if chart:
        parts += [f"![per-day upsert time per engine]({chart})", ""]
    parts += [f"## {REFERENCE}'s time divided by each engine's (below 1: {REFERENCE} is faster)", "",
              ratio_table(summary), "", bounds_lines(result, summary), "",
              "## Where labformat's upsert time goes: the report's steps", "", step_table(result), "",
              "## Bytes written, write amplification, memory", "", cost_table(result, summary), "",
              "## Queries, seconds: median (min–max)", "", query_table(result), "",
              "## Correctness", "", check_line(result), ""]
    return "\n".join(parts)


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


def plot_scale(results: list[dict[str, Any]], path: str | Path) -> None:
    """Median daily upsert time per engine against the table's rows, one point per preset (log-log)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), layout="constrained")
    ax = figure.add_subplot()
    for engine in ENGINES:
        points = sorted((r["check"]["rows"], summarize(r)[engine]["daily_median"])
                        for r in results if engine in r["engines"] and r["check"].get("rows"))
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=engine)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows in the table after the last upsert")
    ax.set_ylabel("median daily upsert, seconds")
    ax.set_title("Daily upsert time vs table size")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.savefig(path, dpi=110)


# ---- recorded results and the docs page ---------------------------------------------------------------------

def result_stem(result: dict[str, Any]) -> str:
    return f"{result['date']}-{result['preset']}"


def record(result: dict[str, Any], results_dir: str | Path = RESULTS_DIR) -> list[Path]:
    """Write `<date>-<preset>.json`, its per-day chart (.png) and report (.md) under `results_dir`."""
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


def latest_per_preset(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: r["started_at"]):
        latest[r["preset"]] = r
    return latest


def scale_table(latest: dict[str, dict[str, Any]]) -> str:
    presets = [p for p in SCALE_PRESETS if p in latest] + sorted(set(latest) - set(SCALE_PRESETS))
    engines = [e for e in ENGINES if any(e in latest[p]["engines"] for p in presets)]
    rows = []
    for preset in presets:
        r = latest[preset]
        summary = summarize(r)
        d = r["dataset"]
        rows.append([f"{preset} ({r['date']}, {r['repeat']}×{r['options']['days']} days)",
                     f"{r['check']['rows']:,}", f"{round(statistics.mean(d['batch_rows'])):,}"]
                    + [f"{summary[e]['daily_median']:.2f}" if e in summary else "–" for e in engines])
    return _table(["preset (run)", "rows after the workload", "rows per batch"] + engines, rows)


def docs_markdown(main: dict[str, Any], latest: dict[str, dict[str, Any]], results_link: str,
                  scale_chart: str | None) -> str:
    """docs/benchmarks.md: the main run in full, then the scale section from the latest run of each preset."""
    summary = summarize(main)
    stem = result_stem(main)
    missing = [p for p in ("tiny", "small", "medium") if p not in latest]
    parts = [
        "# Benchmarks: labformat's daily upserts and queries against its peers and the I/O floor",
        "",
        f"<!-- Generated by `python -m labformat.bench` from {results_link}/*.json; edit labformat/bench/render.py, "
        "not this file. -->",
        "",
        "```bash",
        "python3 scripts/lab.py bench --preset small --repeat 3",
        "```",
        "",
        "One command runs the same drone workload (bulk load of the history, then every daily batch) through",
        "each engine, N times, engines alternating, records `bench/results/<date>-<preset>.json` with a chart",
        "and a report beside it, and rewrites this page. Engines:",
        "",
        "- `labformat-bloom`, `labformat-simple`, `labformat-bucket`: labformat with that index (bulk insert",
        "  with GLOBAL_SORT, then `Table.upsert` per batch);",
        "- `spark-rewrite`: the no-index way in plain PySpark: read the whole table, union the batch, keep the",
        "  newest row per key (window over `updated_at`), write everything as a new version folder;",
        "- `delta-rs`: `write_deltalake` loads the history; each day `DeltaTable.merge` on the key (update all",
        "  when matched, insert all when not) with the deduplicated batch;",
        "- `pyiceberg`: SQL catalog on sqlite, local warehouse; `append` loads, `Table.upsert` on the key;",
        "- `io-floor`: not a table format: pyarrow reads exactly the base files labformat-bloom's upsert",
        "  rewrote that day and writes them back (same codec, all cores), nothing else.",
        "",
        "What is measured: per upsert day the wall time of the engine's whole call (opening the table, reading",
        "the cached batch, deduplicating, merging, committing); bytes written (the files new or changed in the",
        "engine's folder afterwards, metadata and logs included); write amplification = bytes written /",
        "the batches' bytes as cached parquet (the same denominator for every engine); peak RSS of the",
        "engine's process tree (its Python process, and for Spark engines the JVM and the Python workers),",
        "sampled every 50 ms. Each engine's workload runs in a fresh process, so every Spark engine pays its",
        "JVM's warm-up on day 1, as a daily job would. The peers read the cached parquet with pyarrow and",
        "deduplicate the batch by labformat's rule (highest `updated_at`; ties to the larger remaining columns).",
        "After the workload every finished table is checked equal to labformat-bloom's; a disagreement fails",
        "the run. Timings on a 2-core machine shared with other work are noisy: read the min–max.",
        "",
        f"## The run ([JSON]({results_link}/{stem}.json), [report]({results_link}/{stem}.md))",
        "",
        run_facts(main),
        "",
        "## Daily upsert time, seconds: median (min–max)",
        "",
        upsert_table(main, summary),
        "",
        f"![per-day upsert time per engine]({results_link}/{stem}.png)",
        "",
        f"## {REFERENCE}'s time divided by each engine's",
        "",
        f"Below 1, {REFERENCE} is faster. The targets are issue 5's (10x faster than the plain-PySpark rewrite",
        "by the last day, at most 2x the I/O floor, no slower than delta-rs).",
        "",
        ratio_table(summary),
        "",
        bounds_lines(main, summary),
        "",
        "## Where labformat's upsert time goes",
        "",
        "Each upsert's report times its seven steps (`WriteReport.steps`); medians over the days after the",
        "first and every repetition. `(whole upsert)` is the engine's timed call, which also opens the table",
        "and reads the batch.",
        "",
        step_table(main),
        "",
        "## Bytes written, write amplification, memory (medians over repetitions)",
        "",
        cost_table(main, summary),
        "",
        "## Queries",
        "",
        "The lab's standard queries (`labformat.lab.queries.standard_queries`) on the last repetition's tables,",
        "after one untimed warm-up round; each timed call opens the table, plans, and reads every column of",
        "every matching row. labformat runs with data skipping on and off; delta-rs through its own query",
        "engine (files read: those whose log statistics may match); pyiceberg's `scan(row_filter=...)` (files",
        "read: `plan_files()` after manifest and metrics pruning). The engines' row counts must agree.",
        "",
        query_table(main),
        "",
        "## Correctness",
        "",
        check_line(main),
        "",
        "## Scale: the daily upsert as the table grows",
        "",
        "Median upsert seconds per day (over days and repetitions) of the latest recorded run of each preset.",
        "",
        scale_table(latest),
        "",
    ]
    if scale_chart:
        parts += [f"![daily upsert time vs table size]({scale_chart})", ""]
    if missing:
        parts += [f"Not recorded on this machine: {', '.join(missing)}. Run "
                  + ", ".join(f"`python3 scripts/lab.py bench --preset {p} --repeat 1`" for p in missing)
                  + " (add `--days N` to shorten a large preset) to add it.", ""]
    return "\n".join(parts)


def refresh_docs(results_dir: str | Path = RESULTS_DIR, docs_path: str | Path = DOCS_PATH,
                 main_preset: str = "small") -> Path | None:
    """Rewrite docs/benchmarks.md (and the scale chart) from the recorded results; None when there are none."""
    results_dir, docs_path = Path(results_dir), Path(docs_path)
    latest = latest_per_preset(load_results(results_dir))
    if not latest:
        return None
    main = latest.get(main_preset) or max(latest.values(), key=lambda r: r["started_at"])
    scale_png = results_dir / "scale.png"
    plot_scale(list(latest.values()), scale_png)
    link = _relative(results_dir, docs_path.parent)
    docs_path.parent.mkdir(parents=True, exist_ok=True)
    docs_path.write_text(docs_markdown(main, latest, link, f"{link}/{scale_png.name}")
                         + fixed_cost_markdown(results_dir / FIXED_COST_DIR, link))
    return docs_path


FIXED_COST_DIR = "fixed-cost"


def fixed_cost_markdown(folder: Path, results_link: str) -> str:
    """The latest `labformat.bench.fixed_cost` run, as a section of docs/benchmarks.md ('' when none)."""
    runs = sorted(Path(folder).glob("*.json"))
    if not runs:
        return ""
    r = json.loads(runs[-1].read_text())
    steps = sorted(r["median_step_seconds"].items(), key=lambda kv: -kv[1])
    rows = [[name, f"{seconds:.2f}"] for name, seconds in steps if seconds >= 0.005]
    return "\n".join([
        "", "## Fixed cost of a commit", "",
        f"`python -m labformat.bench.fixed_cost` ({r['date']}, [JSON]({results_link}/{FIXED_COST_DIR}/{runs[-1].name})): "
        f"a {r['index_type']} upsert of one existing key into the `tiny` table touches exactly one file group. "
        f"Median of {r['repeat']} runs after one warm-up: **{r['median_seconds']:.2f} s** "
        f"(min {r['min_seconds']:.2f}, max {r['max_seconds']:.2f}; the warm-up took {r['first_seconds']:.2f} s). "
        "Issue 5's target is below 1.5 s.", "",
        _table(["step", "median seconds"], rows), ""])


def _relative(target: Path, start: Path) -> str:
    import os

    return os.path.relpath(target.resolve(), start.resolve())
