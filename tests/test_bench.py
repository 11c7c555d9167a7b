"""The benchmark harness: a smoke run at `tiny` where every engine must agree, and its pure helpers.

Correctness only: no assertion here looks at a timing.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from labformat.bench import ENGINES, BenchmarkError, deduplicate_arrow, run_benchmark
from labformat.bench.queries import arrow_filter, iceberg_filter, parse_condition, sql_condition
from labformat.bench.render import record, refresh_docs, step_split, summarize
from labformat.bench.runner import bytes_written

UTC = dt.timezone.utc


def test_deduplicate_arrow_keeps_the_newest_row_per_key_and_breaks_ties_on_the_remaining_columns():
    """Key a: the newest updated_at wins. Key b: a tie on updated_at goes to the larger next column."""
    t0, t1 = dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 2, tzinfo=UTC)
    batch = pa.table({
        "record_key": ["a", "b", "a", "b", "c"],
        "drone_id": ["x", "p", "y", "q", "z"],
        "updated_at": pa.array([t1, t1, t0, t1, None], pa.timestamp("us", tz="UTC")),
    })
    out = deduplicate_arrow(batch).sort_by("record_key")
    assert out.column("record_key").to_pylist() == ["a", "b", "c"]
    assert out.column("drone_id").to_pylist() == ["x", "q", "z"]


def test_standard_query_conditions_translate_for_the_peers():
    schema = pa.schema([("record_key", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])
    terms = parse_condition("ts >= '2024-01-28 10:00:00' AND ts < '2024-01-28 11:00:00'")
    assert [(t.column, t.op) for t in terms] == [("ts", ">="), ("ts", "<")]
    assert sql_condition(terms, schema) == "ts >= '2024-01-28T10:00:00+00:00' AND ts < '2024-01-28T11:00:00+00:00'"
    rows = pa.table({"record_key": ["k1", "k2"], "ts": pa.array(
        [dt.datetime(2024, 1, 28, 10, 30, tzinfo=UTC), dt.datetime(2024, 1, 28, 11, 0, tzinfo=UTC)],
        pa.timestamp("us", tz="UTC"))})
    import pyarrow.dataset as ds

    assert ds.dataset(rows).to_table(filter=arrow_filter(terms, schema)).column("record_key").to_pylist() == ["k1"]
    assert "2024-01-28T10:00:00+00:00" in str(iceberg_filter(terms, schema))
    with pytest.raises(ValueError, match="cannot translate"):
        parse_condition("record_key = 'a' OR record_key = 'b'")


def test_bytes_written_counts_new_and_changed_files_only():
    before = {"a": (10, 1), "b": (20, 1), "gone": (5, 1)}
    after = {"a": (10, 1), "b": (25, 2), "c": (7, 3)}
    assert bytes_written(before, after) == 25 + 7


@pytest.mark.spark
def test_smoke_run_at_tiny_every_engine_agrees(spark, tmp_path):
    """Every engine, one repetition of two days, in this process (the S3 ones on a local S3 server the run
    starts): all tables equal labformat-bloom's; records and docs render."""
    from labformat import datasets

    spec = datasets.spec("tiny")
    days = 2  # of tiny's 3: a day after the first still finds yesterday's files to rewrite or log to
    result = run_benchmark("tiny", repeat=1, engines=ENGINES, work_dir=tmp_path / "work", spark=spark,
                           isolate=False, log=lambda line: None, days=days)

    check = result["check"]
    assert check["agree"] and check["reference"] == "labformat-bloom"
    tables = {c["engine"]: (c["rows"], c["hash"]) for c in check["tables"]}
    assert set(tables) == set(ENGINES) - {"io-floor"}  # the floor writes no table
    assert len(set(tables.values())) == 1
    assert check["rows"] > spec.history_rows  # the batches inserted rows

    # The history went in as tiny's 4 base files; every engine got the file size scaled to them.
    from labformat.bench.engines import HISTORY_FILES

    assert result["workload"] == "seed" and result["options"]["history_files"] == HISTORY_FILES["tiny"] == 4
    assert result["options"]["sizes_from"] == "scaled to labformat-bloom's bulk-inserted history"
    bloom_run = next(r for r in result["runs"] if r["engine"] == "labformat-bloom")
    assert bloom_run["sizes"]["max_file_size"] == result["options"]["max_file_size"]
    # Files rewritten per day, from each engine's own account; the rewrite replaces every file every day.
    for run in result["runs"]:
        if run["engine"] == "io-floor":
            continue
        assert all(("files_rewritten" in d) and (d["bytes_rewritten"] > 0) == (d["files_rewritten"] > 0)
                   for d in run["days"]), run["engine"]
    rewrite = next(r for r in result["runs"] if r["engine"] == "spark-rewrite")
    assert all(d["files_rewritten"] >= 1 for d in rewrite["days"])
    # delta-rs's MERGE skips the files outside the batch's key range (it scans them all by default).
    delta = next(r for r in result["runs"] if r["engine"] == "delta-rs")
    assert all(d["files_rewritten"] <= d["files_scanned"] < d["files_before"] for d in delta["days"]), delta["days"]
    assert result["options"]["delta_merge_prunes"]
    # Each batch corrects yesterday's readings, which some existing file holds: every copy-on-write engine
    # rewrote one; merge-on-read appended a log file to it instead.
    for run in result["runs"]:
        if run["engine"] == "labformat-mor":
            assert all(d["log_files_written"] >= 1 for d in run["days"])
        elif run["engine"] != "io-floor":
            assert sum(d["files_rewritten"] for d in run["days"]) >= days, run["engine"]

    for run in result["runs"]:
        assert [d["day"] for d in run["days"]] == list(range(1, days + 1)), run["engine"]
        assert all(d["bytes_written"] > 0 for d in run["days"]), run["engine"]
        assert run["peak_rss_bytes"] > 0
    # The floor rewrote, each day, one file for every base file labformat-bloom's upsert rewrote.
    bloom = next(r for r in result["runs"] if r["engine"] == "labformat-bloom")
    floor_dir = tmp_path / "work" / "tiny" / "seed" / "rep1" / "io-floor"
    for day in bloom["days"]:
        assert len(list((floor_dir / f"day_{day['day']:03d}").iterdir())) == day["files_rewritten"] > 0
    # ... encoded as labformat's writer encoded them: a floor that dictionary-encoded every column
    # would do more work than the writer it is the floor of.
    import pyarrow.parquet as pq

    def dictionary_columns(path):
        group = pq.ParquetFile(path).metadata.row_group(0)
        return {group.column(i).path_in_schema for i in range(group.num_columns)
                if "RLE_DICTIONARY" in group.column(i).encodings}

    table_files = list((tmp_path / "work" / "tiny" / "seed" / "rep1" / "labformat-bloom" / "table").glob("*.parquet"))
    floor_files = list(floor_dir.glob("day_*/*.parquet"))
    assert {"_hoodie_commit_time"} <= dictionary_columns(floor_files[0]) < set(pq.read_schema(floor_files[0]).names)
    assert {frozenset(dictionary_columns(f)) for f in floor_files} <= {frozenset(dictionary_columns(f))
                                                                     for f in table_files}

    queries = {(q["query"], q["engine"]): q for q in result["queries"]}
    assert {query for query, _ in queries} == {"point lookup", "one-hour window", "drone_id filter"}
    for query in ("point lookup", "one-hour window", "drone_id filter"):
        assert len({q["rows"] for (name, _), q in queries.items() if name == query}) == 1
    assert queries[("point lookup", "labformat-bloom (skipping on)")]["rows"] == 1
    # labformat-mor: queried with its log files, compacted, queried again; the same rows every time.
    compaction = result["compaction"]
    assert compaction["engine"] == "labformat-mor" and compaction["file_slices_compacted"] >= 1
    assert compaction["log_files_compacted"] >= compaction["file_slices_compacted"] and compaction["seconds"] > 0
    for query in ("point lookup", "one-hour window", "drone_id filter"):
        before = queries[(query, "labformat-mor (log files, before compaction)")]
        after = queries[(query, "labformat-mor (after compaction)")]
        beside = queries[(query, "labformat-bloom (skipping on, beside labformat-mor after compaction)")]
        assert before["rows"] == after["rows"] == beside["rows"] == queries[(query, "labformat-bloom (skipping on)")]["rows"]
        assert len(after["seconds"]) == len(beside["seconds"]) == 1 and after["files_total"] == before["files_total"]

    summary = summarize(result)
    assert set(summary) == set(ENGINES)
    names, split = step_split(result)
    assert set(split) == {"labformat-bloom", "labformat-simple", "labformat-bucket", "labformat-mor", "labformat-bloom-s3"}
    assert {"deduplicate", "tag", "write", "commit"} <= set(names)
    # Each step's median is at most the whole upsert's, which holds them all.
    assert all(split[e][n] <= split[e]["(whole upsert)"] for e in split for n in names)
    paths = record(result, tmp_path / "results")
    assert [p.suffix for p in paths] == [".json", ".png", ".md"] and all(p.stat().st_size for p in paths)
    docs = refresh_docs(tmp_path / "results", tmp_path / "docs" / "benchmarks.md", presets=("tiny",))
    text = docs.read_text()
    assert all(engine in text for engine in ENGINES)
    assert "All 10 finished tables equal labformat-bloom's" in text  # the S3 engines' tables too
    assert "labformat-mor against issue 18's goals" in text and "after compaction ÷" in text
    assert "The I/O floor alone takes" in text and "can be at most" in text
    assert "## Workload `seed`, preset `tiny`" in text and "Files rewritten per day" in text
    assert "delta-rs' MERGE skips the files outside the batch's key range" in text
    assert "`late` at `tiny`" in text  # not recorded: the page says how to add it
    # A run with S3 engines recorded under s3/ (as the command line does) renders beside its local twins.
    record(result, tmp_path / "results" / "s3")
    text = refresh_docs(tmp_path / "results", tmp_path / "docs" / "benchmarks.md", presets=("tiny",)).read_text()
    assert "## On S3" in text and "labformat-bloom-s3 ÷ labformat-bloom" in text and "delta-rs-s3 ÷ delta-rs" in text
    # In process, the record names the heap of the session the engines really ran on.
    heap = spark.sparkContext.getConf().get("spark.driver.memory", "1g")
    assert result["options"]["driver_memory"] == heap and f"`spark.driver.memory` {heap}" in text


@pytest.mark.spark
def test_late_workload_is_recorded_apart_and_both_render(spark, tmp_path):
    """The late workload's run has its own record; the docs page shows each workload's latest run (the
    late one without its queries, as `--no-queries` runs it)."""
    seed = run_benchmark("tiny", repeat=1, engines=("labformat-bloom", "delta-rs"), days=1, work_dir=tmp_path / "w",
                         spark=spark, isolate=False, log=lambda line: None)
    late = run_benchmark("tiny", repeat=1, engines=("labformat-bloom", "delta-rs"), days=1, work_dir=tmp_path / "w",
                         spark=spark, isolate=False, log=lambda line: None, scenario="late", queries=False)
    assert (seed["workload"], late["workload"]) == ("seed", "late")
    assert seed["queries"] and late["queries"] == [] and late["options"]["queries"] is False
    assert seed["dataset"]["spec"]["late_fraction"] == 0 < late["dataset"]["spec"]["late_fraction"]
    names = {p.name for r in (seed, late) for p in record(r, tmp_path / "results")}
    assert {f"{seed['date']}-tiny-seed.json", f"{late['date']}-tiny-late.json"} <= names
    text = refresh_docs(tmp_path / "results", tmp_path / "benchmarks.md", presets=("tiny",)).read_text()
    assert "## Workload `seed`, preset `tiny`" in text and "## Workload `late`, preset `tiny`" in text
    assert "Not recorded" not in text
    assert text.count("Not run (`--no-queries`)") == 1
    with pytest.raises(BenchmarkError, match="unknown workload"):
        run_benchmark("tiny", scenario="early", spark=spark)


def test_goals_are_per_workload_and_preset():
    """Issue 17's goals: the rewrite and delta-rs at seed/medium, the rewrite at seed/small, none for late;
    issue 35's: the GLOBAL_SORT bulk load against the sorted Spark write at seed/medium."""
    from labformat.bench.render import ratio_table, workload_of

    def result(preset, workload):
        return {"preset": preset, "workload": workload, "dataset": {"spec": {}}}

    def s(total, last, load=None):
        return {"total": {"median": total}, "days": {1: {"median": 1.0}, 2: {"median": last}},
                "load": {"median": load} if load else None}

    summary = {"labformat-bloom": s(10.0, 1.0, 30.0), "spark-rewrite": s(40.0, 12.0, 10.0), "delta-rs": s(8.0, 1.0),
               "spark-sorted-write": s(40.0, 12.0, 24.0)}
    medium = ratio_table(result("medium", "seed"), summary)
    assert "| spark-rewrite | 0.25 | 0.08 | 3.00 | ≤ 0.1 (last day): met |" in medium
    assert "| delta-rs | 1.25 | 1.00 | – | ≤ 1 (total): not met |" in medium
    assert "| spark-sorted-write | 0.25 | 0.08 | 1.25 | ≤ 1.2 (bulk load): not met |" in medium
    small = ratio_table(result("small", "seed"), summary)
    assert "≤ 0.2 (last day): met" in small and "(total)" not in small and "(bulk load)" not in small
    assert "met" not in ratio_table(result("medium", "late"), summary)
    # Runs recorded before workloads had names: the spec's late corrections say which one it was.
    assert workload_of({"dataset": {"spec": {"late_fraction": 0.01}}}) == "late"
    assert workload_of({"dataset": {"spec": {"late_fraction": 0.0}}}) == "seed"


def test_merge_on_read_goals_are_rendered_for_the_late_workload():
    """Issue 18's goals: labformat-mor's total upsert time against delta-rs's, and each query after the
    compaction within 1.2x labformat-bloom's (skipping on), at late/small and late/medium."""
    from labformat.bench.render import MOR_TARGETS, mor_table

    def s(total):
        return {"total": {"median": total}, "days": {1: {"median": total}}}

    summary = {"labformat-bloom": s(30.0), "labformat-mor": s(8.0), "delta-rs": s(10.0)}
    queries = [{"query": "point lookup", "engine": "labformat-bloom (skipping on)", "seconds": [0.1, 0.12, 0.1]},
               {"query": "point lookup", "engine": "labformat-mor (log files, before compaction)", "seconds": [0.9]},
               {"query": "point lookup", "engine": "labformat-mor (after compaction)", "seconds": [0.22]},
               # Copy-on-write timed in the compacted table's rounds: the ratio's base when present.
               {"query": "point lookup", "engine": "labformat-bloom (skipping on, beside labformat-mor after compaction)",
                "seconds": [0.2, 0.21, 0.19]},
               {"query": "drone_id filter", "engine": "labformat-bloom (skipping on)", "seconds": [0.4]},
               {"query": "drone_id filter", "engine": "labformat-mor (after compaction)", "seconds": [0.6]}]
    result = {"preset": "small", "workload": "late", "dataset": {"spec": {}},
              "engines": ["labformat-bloom", "labformat-mor", "delta-rs"], "queries": queries,
              "compaction": {"file_slices_compacted": 3, "log_files_compacted": 9, "log_bytes_compacted": 2**20,
                             "bytes_written": 3 * 2**20, "seconds": 1.5}}
    text = mor_table(result, summary)
    assert "| upserts, total: labformat-mor ÷ delta-rs | 0.80 | ≤ 1 (total): met |" in text
    assert "| upserts, total: labformat-mor ÷ labformat-bloom | 0.27 |  |" in text
    assert "point lookup: after compaction ÷ labformat-bloom (skipping on, same rounds) | 1.10 (0.90 s with logs" in text
    assert "drone_id filter: after compaction ÷ labformat-bloom (skipping on) | 1.50" in text
    assert "≤ 1.2: met" in text and "≤ 1.2: not met" in text  # drone_id filter: 1.5x
    assert "3 file slices, 9 log files (1.0 MiB)" in text
    assert set(MOR_TARGETS) == {("late", "small"), ("late", "medium")}
    assert "goal" not in mor_table({**result, "preset": "tiny"}, summary).split("\n", 2)[2]
    assert mor_table(result, {k: v for k, v in summary.items() if k != "labformat-mor"}) == ""


def test_fixed_cost_section_renders_the_latest_run(tmp_path):
    import json

    from labformat.bench.render import fixed_cost_markdown

    assert fixed_cost_markdown(tmp_path, "../bench/results") == ""
    for date, median in (("2026-11-20", 2.5), ("2026-11-21", 1.56)):
        (tmp_path / f"{date}.json").write_text(json.dumps({
            "date": date, "index_type": "BLOOM", "repeat": 5, "median_seconds": median, "min_seconds": 1.3,
            "max_seconds": 2.1, "first_seconds": 4.5, "median_step_seconds": {"tag": 0.7, "write": 0.4, "commit": 0.001}}))
    text = fixed_cost_markdown(tmp_path, "../bench/results")
    assert "**1.56 s**" in text and "2026-11-21.json" in text and "2.5" not in text
    assert "| tag | 0.70 |" in text and "| commit |" not in text  # steps under 5 ms are left out


def test_fixed_cost_section_shows_spark_jobs_per_step_when_recorded(tmp_path):
    import json

    from labformat.bench.render import fixed_cost_markdown

    (tmp_path / "2026-11-23.json").write_text(json.dumps({
        "date": "2026-11-23", "index_type": "BLOOM", "repeat": 5, "median_seconds": 0.8, "min_seconds": 0.7,
        "max_seconds": 0.9, "first_seconds": 3.0, "median_step_seconds": {"tag": 0.4, "write": 0.3, "deduplicate": 0.01},
        "step_jobs": {"tag": 1, "write": 1}}))
    text = fixed_cost_markdown(tmp_path, "../bench/results")
    assert "| tag | 0.40 | 1 |" in text and "| deduplicate | 0.01 | 0 |" in text and "Spark jobs" in text


def test_every_spark_engine_of_a_run_gets_the_same_driver_memory():
    from labformat.bench.runner import driver_memory_of, spark_conf
    from labformat.spark.session import DEFAULT_CONF

    assert spark_conf(None) == {} and driver_memory_of(None) == DEFAULT_CONF["spark.driver.memory"]
    assert spark_conf("4g") == {"spark.driver.memory": "4g"} and driver_memory_of("4g") == "4g"


@pytest.mark.spark
def test_the_bucket_engine_has_a_bucket_per_history_file(spark, tmp_path):
    """labformat-bucket's table gets as many buckets as the history's base files (not Hudi's default
    4), so its files start at the size the other engines' files have."""
    import labformat as lf
    from labformat import datasets
    from labformat.bench.engines import Labformat, Workload

    workload = Workload(datasets.generate(spark, datasets.spec("tiny")), 1, None, None, history_files=3)
    engine = Labformat(workload, tmp_path, spark, index_type="BUCKET")
    engine.load()
    table = lf.Table.open(spark, engine.table_path)
    assert table.config.bucket_num == 3
    assert len({s.file_id for s in table.file_slices()}) == 3  # the tiny history fills every bucket


def test_the_history_streams_in_key_order_only_when_the_files_key_ranges_are_disjoint(tmp_path):
    import pyarrow.parquet as pq

    from labformat.bench.engines import KEY, files_in_key_order, sorted_history

    disjoint, overlapping = tmp_path / "disjoint", tmp_path / "overlapping"
    for folder, files in ((disjoint, [["k5", "k3", "k4"], ["k2", "k1"]]),
                          (overlapping, [["k1", "k4"], ["k2", "k3"]])):
        folder.mkdir()
        for i, keys in enumerate(files):
            pq.write_table(pa.table({KEY: keys, "n": list(range(len(keys)))}), folder / f"part-{i}.parquet")
    assert [p.rsplit("/", 1)[1] for p in files_in_key_order(str(disjoint))] == ["part-1.parquet", "part-0.parquet"]
    assert files_in_key_order(str(overlapping)) is None
    for folder, rows in ((disjoint, 5), (overlapping, 4)):
        history = sorted_history(str(folder))
        table = history.read_all() if isinstance(history, pa.RecordBatchReader) else history
        assert table.column(KEY).to_pylist() == [f"k{i}" for i in sorted(range(1, 6))][:rows]
    assert isinstance(sorted_history(str(disjoint)), pa.RecordBatchReader)


def test_scale_growth_exponents_and_absolute_goals_come_from_the_days_after_the_first():
    """Issue 35's cost curves: a day 10x slower on a 10x larger table grows with exponent 1, one as fast
    as before with exponent 0; day 1 (the JVM's warm-up) is left out. Its absolute goals read the same runs."""
    from labformat.bench.render import absolute_goal_lines, growth_table, per_batch_row_table, scale_table, summarize

    def run(preset, rows, seconds):
        return {"preset": preset, "workload": "seed", "date": "2026-11-27", "repeat": 1, "options": {"days": 3},
                "engines": list(seconds), "check": {"rows": rows},
                "dataset": {"batch_rows": [10, 10, 10], "batch_bytes": [1, 1, 1], "spec": {}},
                "runs": [{"engine": e, "load_seconds": 1.0, "peak_rss_bytes": 2 * 2**30,
                          "days": [{"day": d, "seconds": 99.0 if d == 1 else s, "bytes_written": 1} for d in (1, 2, 3)]}
                         for e, s in seconds.items()]}

    small = run("small", 1000, {"labformat-bloom": 0.5, "delta-rs": 2.0})
    medium = run("medium", 10_000, {"labformat-bloom": 5.0, "delta-rs": 2.0})
    latest = {("seed", "small"): small, ("seed", "medium"): medium}
    assert "| small → medium | 1.00 | 0.00 |" in growth_table(latest, "seed")
    assert "| 0.50 | 2.00 |" in scale_table(latest, "seed")  # days 2 and 3, not day 1's 99 s
    # Both batches hold 10 rows: microseconds per batch row are the day's seconds times 100,000.
    assert "| medium | 500000.0 | 200000.0 |" in per_batch_row_table(latest, "seed")
    assert absolute_goal_lines(small, summarize(small)) == \
        "- labformat-bloom's median day, seconds: 0.50, goal (issue 35) ≤ 0.6: met"
    assert absolute_goal_lines(medium, summarize(medium)) == \
        "- labformat-bloom's peak RSS, GiB: 2.00, goal (issue 35) ≤ 3: met"
    assert growth_table({("seed", "small"): small}, "seed") == ""


@pytest.mark.spark
def test_bulk_load_pairs_each_sort_mode_with_sparks_own_write_and_renders_the_goal(spark, tmp_path):
    import json

    from labformat.bench.bulk_load import measure
    from labformat.bench.render import BULK_LOAD_DIR, bulk_load_markdown

    result = measure(spark, "tiny", repeat=1, pairs=(("NONE", "plain"),))
    assert set(result["seconds"]) == {"NONE", "plain"} and all(len(v) == 1 for v in result["seconds"].values())
    # One task per input partition on both sides; at tiny each task's rows fit one file.
    assert result["files"]["NONE"] == result["files"]["plain"] >= 1
    (pair,) = result["pairs"]
    assert pair["median_ratio"] == pytest.approx(result["seconds"]["NONE"][0] / result["seconds"]["plain"][0], rel=1e-3)
    folder = tmp_path / BULK_LOAD_DIR
    folder.mkdir()
    (folder / "2026-11-27-tiny.json").write_text(json.dumps({**result, "date": "2026-11-27"}))
    medium = {**result, "preset": "medium", "date": "2026-11-27",
              "pairs": [{**pair, "ratios": [1.1, 1.3], "median_ratio": 1.19}]}
    (folder / "2026-11-27-medium.json").write_text(json.dumps(medium))
    text = bulk_load_markdown(folder, "results")
    assert text.index("Preset `tiny`") < text.index("Preset `medium`")
    assert "| NONE ÷ plain |" in text and "| 1.19 (1.10–1.30) | ≤ 1.2: met |" in text
    assert bulk_load_markdown(tmp_path / "none", "results") == ""


def test_issue_35_goals_table_reads_the_latest_runs_and_says_what_is_not_recorded():
    from pathlib import Path

    from labformat.bench.render import goals_markdown

    def run(preset, seconds, rss_gib):
        return {"preset": preset, "workload": "seed", "date": "2026-11-27", "engines": list(seconds),
                "dataset": {"batch_bytes": [1], "spec": {}},
                "runs": [{"engine": e, "load_seconds": 2.0, "peak_rss_bytes": rss_gib * 2**30,
                          "days": [{"day": 1, "seconds": s, "bytes_written": 1}]} for e, s in seconds.items()]}

    latest = {("seed", "medium"): run("medium", {"labformat-bloom": 5.0, "delta-rs": 4.0, "io-floor": 1.0}, 2.5)}
    bulk = {"medium": (Path("2026-11-27-medium.json"), {"date": "2026-11-27", "pairs": [
        {"labformat": "NONE", "median_ratio": 1.1}, {"labformat": "GLOBAL_SORT", "median_ratio": 1.3}]})}
    text = goals_markdown(latest, bulk, "results")
    assert "| `medium` day ≤ delta-rs's (total, ratio ≤ 1) | 1.25x | not met |" in text
    assert "| `medium` day ≤ 5x the I/O floor (total) | 5.00x | met |" in text
    assert "| `medium` NONE bulk insert ≤ 1.2x `df.write.parquet` | 1.10x | met | [bulk-load 2026-11-27]" in text
    assert "GLOBAL_SORT bulk insert ≤ 1.2x `orderBy(key).write.parquet` | 1.30x | not met" in text
    assert "| `medium` peak RSS ≤ 3 GiB | 2.50 GiB | met |" in text
    assert "| `small` median day ≤ 0.6 s | – | – | not recorded | [A small day](performance.md#a-small-day) |" in text


@pytest.mark.spark
@pytest.mark.classic_only
def test_profile_names_the_spark_stages_of_each_step(spark, tmp_path):
    from labformat.bench.profile import profile

    lines = []
    result = profile(spark, "tiny", 1, tmp_path, log=lines.append)
    (day,) = result["days"]
    steps = {s["name"]: s for s in day["steps"]}
    assert "write" in steps and "tag" in steps
    for name in ("tag", "write"):
        ran = [st for st in steps[name]["stages"] if st["status"] == "COMPLETE"]
        # The stages the UI lists under the step's job group are the tasks its report counted.
        assert ran and sum(st["tasks"] for st in ran) == steps[name]["tasks"]
        assert all(st["executor_run_seconds"] >= 0 and st["wall_seconds"] >= 0 for st in ran)
    assert any(line.startswith("      stage ") for line in lines) and lines[0].startswith("load ")
