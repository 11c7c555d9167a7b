"""Workshop exercises and notebook helpers: every check says right, wrong (with a hint) or not answered,
computed from the run it is given; the helpers behind the notebooks' numbers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from labformat.lab import exercises as ex
from labformat.lab import frames as fr
from labformat.lab import workshop as ws

FILES = pd.DataFrame({"file_id": ["a", "b", "c"],
                      "min_key": ["202401150000_drone0000", "202401151200_drone0000", "202401160000_drone0000"],
                      "max_key": ["202401151159_drone0001", "202401152359_drone0001", "202401162359_drone0001"]})


def test_check_right_wrong_and_unanswered():
    right = ex.check("9.1", 12, 12, "twelve.", "count them.")
    wrong = ex.check("9.1", 13, 12, "twelve.", "count them.")
    blank = ex.check("9.1", None, 12, "twelve.", "count them.")
    assert right.right and bool(right) and "right!" in repr(right)
    assert wrong.right is False and not wrong and "wrong, you said 13" in repr(wrong) and "count them." in repr(wrong)
    assert blank.right is None and "not answered yet" in repr(blank)
    assert ex.check("9.2", "twelve", 12, "", "h").right is False  # a non-number for a number
    assert ex.check("9.2", float("nan"), 12, "", "h").right is False
    assert ex.check("9.4", "k1", "k1", "", "h").right and not ex.check("9.4", "k2", "k1", "", "h").right


def test_bools_and_wrong_types_never_pass_and_say_why():
    """True == 1 in Python: a yes/no must not pass for a count, nor a number for a key."""
    for answer in (True, np.bool_(True)):
        verdict = ex.count("9.5", answer, 1, "", "count them.")
        assert verdict.right is False and "yes/no" in repr(verdict)
    assert ex.share("9.6", True, 21, 21, "", "h").right is False
    typed = ex.check("9.7", 202401150000, "202401150000_drone0000", "", "h")
    assert typed.right is False and "answer with a string" in repr(typed)
    assert ex.count("9.8", "6", 6, "", "h").right is False
    assert ex.count("9.8", [6], 6, "", "h").right is False


def test_counts_are_exact_and_shares_tight():
    assert ex.count("9.9", 6, 6, "", "h").right and ex.count("9.9", 6.0, 6, "", "h").right
    assert ex.count("9.9", np.int64(6), 6, "", "h").right
    assert ex.count("9.9", 7, 6, "", "h").right is False
    half = ex.count("9.9", 6.5, 6, "", "h")
    assert half.right is False and "whole number" in repr(half)
    # 21 of 21 files: 20/21 = 0.952 must fail (one whole file off), 0.98 passes (under half a file).
    assert ex.share("9.10", 1.0, 21, 21, "", "h").right
    assert ex.share("9.10", 0.98, 21, 21, "", "h").right
    assert ex.share("9.10", 20 / 21, 21, 21, "", "h").right is False
    assert ex.share("9.10", 0.95, 21, 21, "", "h").right is False
    outside = ex.share("9.10", 95, 21, 21, "", "h")
    assert outside.right is False and "between 0 and 1" in repr(outside)
    # One file of 3: the tolerance is a sixth, so 0.5 is wrong for a third.
    assert ex.share("9.11", 0.33, 1, 3, "", "h").right and ex.share("9.11", 0.5, 1, 3, "", "h").right is False


def test_key_range_checks_come_from_the_files_given():
    assert ex.candidate_files("1.1", 1, FILES, "202401151300_drone0000").right
    assert ex.candidate_files("1.1", 3, FILES, "202401151300_drone0000").right is False
    projection = pd.DataFrame({"lane": [0, 1, 2, 3, 4, 5, 0]})
    assert ex.busy_cores("1.2", 6, projection, 16).right
    too_many = ex.busy_cores("1.2", 16, projection, 16)
    assert too_many.right is False and "16 cores busy would need 16 tasks" in too_many.hint


def test_write_waves_are_the_tasks_over_the_cores_rounded_up_and_say_why_a_wrong_count_is_wrong():
    assert ex.write_waves("1.2", 4, tasks=8, cores=2).right
    assert ex.write_waves("1.2", 3, tasks=8, cores=3).right and ex.write_waves("1.2", 1, tasks=2, cores=2).right
    one_at_a_time = ex.write_waves("1.2", 8, tasks=8, cores=2)
    assert one_at_a_time.right is False and "side by side" in one_at_a_time.hint
    assert "would need 8 cores" in ex.write_waves("1.2", 1, tasks=8, cores=2).hint
    assert ex.write_waves("1.2", None, tasks=8, cores=2).right is None
    assert ex.write_waves("1.2", 4.5, tasks=8, cores=2).right is False


def test_helpers_count_overlaps_and_coverage():
    assert fr.max_overlap(FILES) == 1
    nested = pd.DataFrame({"min_key": ["a", "b", "c"], "max_key": ["z", "y", "d"]})
    assert fr.max_overlap(nested) == 3
    assert fr.max_overlap(pd.DataFrame({"min_key": ["a", "c"], "max_key": ["c", "d"]})) == 2  # touching at c
    assert fr.files_covering(FILES, "202401151200_drone0000") == 1
    assert fr.files_overlapping(FILES, "202401151100", "202401151200_drone0000") == 2
    assert fr.files_overlapping(FILES, "2024011700", "2024011800") == 0


def test_explain_key_and_scratch_names_reject_bad_input():
    import labformat as lf

    assert ws.explain_key("202401150930_drone0042") == {"key": "202401150930_drone0042",
                                                         "minute": "2024-01-15 09:30", "drone": "drone0042"}
    with pytest.raises(lf.InvalidInputError, match="not a monotonic drone key"):
        ws.explain_key("3f2a_drone0042")
    with pytest.raises(lf.ConfigError, match="scratch table names"):
        ws.scratch("../escape")


def test_preset_and_out_dir_follow_the_environment(monkeypatch, tmp_path):
    import labformat as lf

    monkeypatch.setenv(ws.PRESET_ENV, "small")
    assert ws.progress()  # long cells at small show their progress
    monkeypatch.setenv(ws.PRESET_ENV, "tiny")
    monkeypatch.setenv(ws.OUT_ENV, str(tmp_path))
    assert ws.preset() == "tiny" and not ws.progress()  # saved outputs stay the same run to run
    assert ws.scratch("t1") == tmp_path / "work" / "tiny" / "t1"
    ws.record_summary("00-x", {"rows": 5})
    assert json.loads((tmp_path / "summary" / "00-x.json").read_text()) == {
        "lab": "00-x", "preset": "tiny", "values": {"rows": 5}}
    monkeypatch.setenv(ws.PRESET_ENV, "huge")
    with pytest.raises(lf.ConfigError, match="huge"):
        ws.preset()


# ---------------------------------------------------------------- checks on a real tiny run

@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    from labformat import datasets
    from labformat.lab import sweeps
    from labformat.lab.queries import compare_skipping

    spec = datasets.spec("tiny")
    workdir = tmp_path_factory.mktemp("exercises")
    load = sweeps.bulk_insert_sort_modes(spark, spec, ["GLOBAL_SORT"], {"max_file_size": "64KB"},
                                         workdir=workdir)["GLOBAL_SORT"]
    bulk, files, table = load.report, load.files, load.table
    cached = datasets.generate(spark, spec)
    upsert = table.upsert(datasets.load_batch(spark, cached, 1).coalesce(1), {"max_file_size": "64KB"})
    timings = compare_skipping(table, {"by drone": "drone_id = 'drone0001'"}, repeats=1)
    return {"bulk": bulk, "files": files, "table": table, "upsert": upsert, "timings": timings,
            "history": datasets.load_history(spark, cached), "spec": spec}


@pytest.mark.spark
def test_each_real_check_is_right_for_the_runs_number_and_wrong_otherwise(run):
    upsert, timings = run["upsert"], run["timings"]
    scan = timings[timings.skipping == "on"].iloc[0]
    cases = [
        (lambda a: ex.shuffle_parallelism("2.2", a, upsert), upsert.details.shuffle_parallelism),
        (lambda a: ex.range_pruning_candidates("2.1", a, upsert), upsert.funnel.after_range_pruning),
        (lambda a: ex.files_read("3.1", a, timings, "by drone"), int(scan.files_read)),
        (lambda a: ex.readings_per_hour(a, run["history"], f"{run['spec'].start_date:%Y%m%d}09"),
         run["spec"].drones * 60),
    ]
    for checker, truth in cases:
        assert checker(truth).right, checker(truth)
        wrong = checker(truth + 1)
        assert wrong.right is False and "Hint:" in repr(wrong)
        assert checker(None).right is None
        assert checker(True).right is False
    files = int(scan.files_in_snapshot)
    skipped = 1 - scan.files_read / files
    assert ex.skipped_share("3.2", skipped, timings, "by drone").right
    assert ex.skipped_share("3.2", skipped + 0.5 / files + 0.01, timings, "by drone").right is False
    share = upsert.funnel.after_range_pruning / upsert.funnel.files_in_snapshot
    assert ex.range_pruning_share("2.3", share, upsert).right
    assert ex.range_pruning_share("2.3", share + 0.6 / upsert.funnel.files_in_snapshot, upsert).right is False
    key = ex.record_key_of(f"{run['spec'].start_date:%Y%m%d}0930_drone0001", run["history"], "drone0001",
                           f"{run['spec'].start_date} 09:30")
    assert key.right, key
    assert ex.record_key_of("202401150930_drone1", run["history"], "drone0001",
                            f"{run['spec'].start_date} 09:30").right is False


def test_spread_shuffle_waves_and_insert_plan_come_from_the_frames_given():
    import labformat as lf
    from labformat.model.report import FileReport

    runs = pd.DataFrame({"p": [1, 1, 1, 8], "seconds": [2.0, 1.0, 3.0, 0.5]})
    table = fr.spread(runs, "p", ["seconds"])
    assert table.loc[1, "seconds"] == "2.00 (1.00-3.00)" and table.loc[8, "runs"] == 1

    stage = lambda n: pd.DataFrame({"stage_id": [1] * n + [2] * n,  # noqa: E731
                                    "stage_label": ["deduplicate: read input"] * n
                                    + ["deduplicate: keep newest per key"] * n})
    waves = fr.shuffle_waves({20: stage(20), 48: stage(48)}, 16)
    assert waves.loc[20].tolist() == [20, 2, 12] and waves.loc[48].tolist() == [48, 3, 0]

    files = (FileReport("", "small-1", "a", 90, 9000, "k1", "k5", created=False, inserts=40, updates=2,
                           prev_size_bytes=5000),
             FileReport("", "full-2", "b", 90, 9800, "k6", "k9", created=False, updates=3, prev_size_bytes=9700),
             FileReport("", "new-3", "c", 60, 6000, "k1", "k9", created=True, inserts=60))
    report = lf.WriteReport("upsert", "20240101000000000", 105, 240, 100, 5, files=files)
    plan = fr.insert_plan(report, {"small_file_limit": 8000})
    # Old file groups in key order, then the new ones (file ids are random, so not shown).
    assert plan.created.tolist() == [False, False, True] and plan.min_key.tolist() == ["k1", "k6", "k1"]
    assert plan.small_file.tolist() == [True, False, False] and plan.inserts.tolist() == [40, 0, 60]


def test_small_file_inserts_are_the_room_the_estimate_leaves_and_a_count_of_the_run():
    import labformat as lf
    from labformat.model.enums import IndexType
    from labformat.model.report import FileReport, UpsertDetails

    files = (FileReport("", "small-1", "a", 90, 9000, "k1", "k5", created=False, inserts=43, updates=2,
                        prev_size_bytes=5000),
             FileReport("", "full-2", "b", 90, 9800, "k6", "k9", created=False, updates=3, prev_size_bytes=9700),
             FileReport("", "new-3", "c", 60, 6000, "k1", "k9", created=True, inserts=60))
    report = lf.WriteReport("upsert", "20240101000000000", 105, 240, 100, 5, files=files,
                            details=UpsertDetails(IndexType.BLOOM, 1, record_size=100, small_file_inserts_planned=40))
    options = {"small_file_limit": 8000, "max_file_size": 9000}
    found = fr.small_files_found(report, options)
    assert found.bytes_before.tolist() == [5000] and found.max_file_size.tolist() == [9000]
    check = ex.small_file_inserts("2.3", 40, report, options)
    assert check.right and "(9,000 - 5,000) // 100 = 40" in check.message and "really took 43" in check.message
    assert ex.small_file_inserts("2.3", 43, report, options).right is False  # the plan is asked, not the hash's draw
    assert ex.small_file_inserts("2.3", 100, report, options).right is False  # all the day's inserts
    assert ex.small_file_inserts("2.3", None, report, options).right is None
    with pytest.raises(lf.LabformatError, match="no small file"):
        ex.small_file_inserts("2.3", 40, report, {"small_file_limit": 0, "max_file_size": 9000})


def test_bloom_files_opened_accepts_a_tenth_of_the_files_either_side_and_names_the_cost():
    import labformat as lf

    sweep = pd.DataFrame([{"num_entries": 1512, "files_after_bloom": 32, "files_matched": 7, "files_in_snapshot": 32,
                           "corrections": 8, "keys_read_by_exact_check": 483_840}])
    right = ex.bloom_files_opened("2.2", 32, sweep, 1512)
    assert right.right and "25 opened in vain" in right.message and "483,840 keys read" in right.message
    assert ex.bloom_files_opened("2.2", 29, sweep, 1512).right  # chance: within 3.2 files
    assert ex.bloom_files_opened("2.2", 8, sweep, 1512).right is False  # only the files holding a key
    assert ex.bloom_files_opened("2.2", 28, sweep, 1512).right is False
    assert ex.bloom_files_opened("2.2", True, sweep, 1512).right is False
    with pytest.raises(lf.LabformatError, match="60,000"):
        ex.bloom_files_opened("2.2", 32, sweep, 60_000)


@pytest.mark.spark
def test_retention_cleans_with_fewer_commits_each_time_and_the_exercise_counts_back(spark, tmp_path):
    import labformat as lf
    from labformat import datasets
    from labformat.lab import clustering

    cached = datasets.generate(spark, datasets.spec("tiny"))
    table = clustering.small_file_table(spark, cached, tmp_path / "small", files_per_day=8)
    window = clustering.window_of(cached)
    clustering.cluster_and_compare(table, window, target_bytes=10 * 1024**2)
    clustering.correct_hour(table, cached, 3)
    first = table.timeline()[0].time  # the bulk insert; the clustering and the correction follow it
    run = clustering.retention(table, first, window, retained=(1, 2))  # run most retained first, whatever the order
    assert [c.retained for c in run.cleans] == [2, 1] and run.writes_after == 2
    keep, drop = run.cleans
    # 2 retained: earliestCommitToRetain is the clustering, whose replaced file groups stay: nothing to clean.
    assert keep.readable and keep.files_read >= 1 and keep.report.instant is None
    assert not drop.readable and drop.files_read is None and drop.report.details.files_deleted == 8
    frame = run.frame()
    assert frame.loc[1, "files deleted"] == 8 and "CleanedInstantError" in frame.loc[1, f"as of {first}"]
    assert run.smallest_readable == 2  # what the cleans showed: 2 retained still readable, 1 not
    assert ex.smallest_retention("3.5", 2, run).right and ex.smallest_retention("3.5", 2.0, run).right
    for wrong in (1, 3, 2.5, True, "2"):
        assert ex.smallest_retention("3.5", wrong, run).right is False, wrong
    assert "a clean may delete file slices the report is still reading" in ex.smallest_retention("3.5", 1, run).message
    assert "is safe, but keeps files of more commits" in ex.smallest_retention("3.5", 3, run).message
    assert "2 retained: still readable, 1 retained: cleaned" in ex.smallest_retention("3.5", 2, run).message
    with pytest.raises(lf.LabformatError, match="no completed write"):
        clustering.retention(table, "20000101000000000", window)


def test_base_file_names_split_as_hudi_names_them():
    import labformat as lf
    from labformat.model.report import FileReport

    files = tuple(FileReport("", f"{u}-0", f"{u}-0_{task}-8-0_20240101000000000.parquet", 10, 100, "a", "b", created=True)
                  for u, task in (("bbb", 1), ("aaa", 0)))
    names = fr.base_file_names(lf.WriteReport("bulk_insert", "20240101000000000", 20, 20, 20, files=files))
    assert names.file_id.tolist() == ["aaa-0", "bbb-0"] and names.task_partition.tolist() == [0, 1]
    assert set(names.stage) == {8} and set(names.attempt) == {0} and set(names.instant) == {"20240101000000000"}


def test_fewest_rows_rewritten_accepts_every_size_within_the_tie_and_says_why_a_bigger_one_is_wrong():
    # small's numbers from issue 49: 6 h and 24 h files both rewrite about yesterday, 48 h two days
    tradeoff = pd.DataFrame({"hours_per_file": [6.0, 24.0, 48.0], "rows_rewritten": [34_560, 34_552, 69_120]})
    assert ex.fewest_rows_rewritten("3.3", 6, tradeoff).right and ex.fewest_rows_rewritten("3.3", 24, tradeoff).right
    assert ex.fewest_rows_rewritten("3.3", 24.0, tradeoff).right
    wrong = ex.fewest_rows_rewritten("3.3", 48, tradeoff)
    assert wrong.right is False and "hold more than the day the corrections touch" in wrong.message
    assert "69,120" not in wrong.message  # the hint gives the rule, not the run's answer
    assert ex.fewest_rows_rewritten("3.3", 12, tradeoff).right is False  # no such size
    assert "one of 6, 24, 48" in ex.fewest_rows_rewritten("3.3", 12, tradeoff).message
    assert ex.fewest_rows_rewritten("3.3", True, tradeoff).right is False
    assert ex.fewest_rows_rewritten("3.3", None, tradeoff).right is None
    assert "6 h a file: 34,560 rows" in ex.fewest_rows_rewritten("3.3", 6, tradeoff).message
    # beyond the tie, the smaller size alone is right
    apart = pd.DataFrame({"hours_per_file": [6.0, 24.0], "rows_rewritten": [8_640, 34_552]})
    assert ex.fewest_rows_rewritten("3.3", 6, apart).right and ex.fewest_rows_rewritten("3.3", 24, apart).right is False


def test_file_size_choice_is_the_cheapest_size_for_the_stated_costs_with_the_runs_counts():
    # small's counts from a run of 2026-11-28: 6 h and 24 h files rewrite about yesterday, 48 h two days;
    # the query that cannot skip opens every file
    tradeoff = pd.DataFrame({"hours_per_file": [6.0, 24.0, 48.0], "rows_rewritten": [34_560, 34_665, 68_964],
                             "files_opened": [63, 15, 8]})
    dashboards = ex.FileSizeWorkload(queries=96, file_s=0.020, upserts=1, row_s=0.0001)
    # read-heavy: 48 h costs 96 x 8 x 20 ms + 68,964 x 0.1 ms = 22.3 s a day, 24 h 32.3 s, 6 h 124.4 s
    right = ex.file_size_choice("3.4", 48, tradeoff, dashboards, reason="the dashboards open every file")
    assert right.right and "Your reason: the dashboards open every file" in right.message
    assert "48 h a file: 96 x 8 files x 20 ms = 15.4 s for the queries" in right.message
    assert "22.3 s a day" in right.message and "turns at about 24 queries a day" in right.message
    fewest_rows = ex.file_size_choice("3.4", 24, tradeoff, dashboards)
    assert fewest_rows.right is False and "Files of 24 h: 96 x 15 files x 20 ms = 28.8 s" in fewest_rows.message
    assert "32.3 s a day" in fewest_rows.message and "48 h" not in fewest_rows.message  # the rule, not the answer
    assert ex.file_size_choice("3.4", 6, tradeoff, dashboards).right is False
    # a report twice a day: the rows a 48 h file drags along cost more than the files it spares
    reports = ex.FileSizeWorkload(queries=2, file_s=0.020, upserts=1, row_s=0.0001)
    assert ex.file_size_choice("3.4", 24, tradeoff, reports).right
    assert ex.file_size_choice("3.4", 48, tradeoff, reports).right is False
    assert "24 h" not in ex.file_size_choice("3.4", 48, tradeoff, reports).message
    # a size within 10% of the cheapest is right too: at 24 queries a day 24 h and 48 h cost about the same
    balanced = ex.FileSizeWorkload(queries=24, file_s=0.020, upserts=1, row_s=0.0001)
    assert ex.file_size_choice("3.4", 24, tradeoff, balanced).right and ex.file_size_choice("3.4", 48, tradeoff,
                                                                                              balanced).right
    assert ex.file_size_choice("3.4", None, tradeoff, dashboards).right is None
    assert "Price each size for a day" in ex.file_size_choice("3.4", None, tradeoff, dashboards).message
    assert ex.file_size_choice("3.4", "48", tradeoff, dashboards).right is False
    assert "one of 6, 24, 48" in ex.file_size_choice("3.4", 12, tradeoff, dashboards).message
    assert ex.file_size_choice("3.4", True, tradeoff, dashboards).right is False
    # priced with the run's counts, not the plan's: another run's counts, another answer
    tiny = pd.DataFrame({"hours_per_file": [6.0, 24.0, 48.0], "rows_rewritten": [2_880, 2_880, 5_760],
                         "files_opened": [12, 3, 2]})
    assert ex.file_size_choice("3.4", 48, tiny, dashboards).right and not ex.file_size_choice("3.4", 24, tiny,
                                                                                              dashboards).right


# ---------------------------------------------------------------- 06: choosing an index

def _index_runs() -> pd.DataFrame:
    """A tiny-shaped `indexes.compare` frame: two weeks of 20,160 rows, two files a day."""
    rows = []
    for workload, index, keys, entries, rewritten, twice in (
            ("time-ordered", "SIMPLE", 20160, None, 2880, None), ("time-ordered", "BLOOM", 2880, None, 2880, None),
            ("time-ordered", "BUCKET", 0, None, 20160, None), ("time-ordered", "GLOBAL_SIMPLE", 40320, None, 2880, None),
            ("time-ordered", "GLOBAL_BLOOM", 2880, None, 2880, None), ("time-ordered", "RECORD_INDEX", 0, 40320, 2880, None),
            ("random keys", "SIMPLE", 20160, None, 20160, None), ("random keys", "BLOOM", 20160, None, 20160, None),
            ("random keys", "BUCKET", 0, None, 20160, None), ("random keys", "GLOBAL_SIMPLE", 40320, None, 20160, None),
            ("random keys", "GLOBAL_BLOOM", 20160, None, 20160, None), ("random keys", "RECORD_INDEX", 0, 40320, 20160, None),
            ("moves", "SIMPLE", 20160, None, 2880, 144), ("moves", "BLOOM", 2880, None, 2880, 144),
            ("moves", "BUCKET", 0, None, 20160, 144), ("moves", "GLOBAL_SIMPLE", 40320, None, 2736, 0),
            ("moves", "GLOBAL_BLOOM", 2880, None, 2736, 0), ("moves", "RECORD_INDEX", 0, 40320, 2736, 0)):
        rows.append({"workload": workload, "index": index, "keys_read": keys, "index_entries_read": entries,
                     "read": keys if entries is None else entries, "rows_rewritten": rewritten, "duplicates": twice})
    return pd.DataFrame(rows)


def test_index_exercises_count_what_the_runs_read_and_left_twice():
    runs = _index_runs()
    assert ex.simple_keys_read("6.1", 20160, runs).right and ex.simple_keys_read("6.1", 40320, runs).right is False
    assert ex.simple_keys_read("6.1", None, runs).right is None
    assert ex.indexes_leaving_duplicates("6.2", 3, runs).right
    wrong = ex.indexes_leaving_duplicates("6.2", 6, runs)
    assert wrong.right is False and "global" in wrong.hint and "SIMPLE, BLOOM, BUCKET" in wrong.explanation


def test_the_cheapest_index_accepts_every_tie_and_says_why_another_costs_more():
    runs = _index_runs()
    assert ex.cheapest_index("6.3", "BUCKET", runs, "random keys").right
    assert ex.cheapest_index("6.3", " bucket ", runs, "random keys").right  # names are not case-sensitive
    record_index = ex.cheapest_index("6.3", "RECORD_INDEX", runs, "random keys")
    assert record_index.right is False and "reads 40,320 and rewrites 20,160" in record_index.message
    # Time-ordered keys: BLOOM and GLOBAL_BLOOM tie (the same two files); BUCKET rewrites the whole week.
    assert ex.cheapest_index("6.3", "BLOOM", runs, "time-ordered").right
    assert ex.cheapest_index("6.3", "GLOBAL_BLOOM", runs, "time-ordered").right
    assert ex.cheapest_index("6.3", "BUCKET", runs, "time-ordered").right is False
    # Records that change partition: only the global indexes qualify, whatever they cost.
    moving = ex.cheapest_index("6.3", "BLOOM", runs, "moves", moves=True)
    assert moving.right is False and "left keys stored twice" in moving.message
    assert ex.cheapest_index("6.3", "GLOBAL_BLOOM", runs, "moves", moves=True).right
    assert ex.cheapest_index("6.3", "HBASE", runs, "random keys").right is False
    assert ex.cheapest_index("6.3", 3, runs, "random keys").right is False
    assert ex.cheapest_index("6.3", None, runs, "random keys").right is None


def test_bucket_count_accepts_the_whole_range_the_target_allows():
    # 500 drones x 1440 x 30 days at 40 bytes a row: 823.97 MB, so 7 to 12 buckets of 64-128 MB.
    check = lambda a: ex.bucket_count("6.6", a, 40.0, 500 * 1440, 30, 128)  # noqa: E731
    assert all(check(n).right for n in (7, 9, 12, 12.0))
    small, big = check(13), check(6)
    assert small.right is False and "small files" in small.message
    assert big.right is False and "above the target" in big.message
    assert check(7.5).right is False and check(True).right is False and check(None).right is None


def test_bucket_pruning_and_resize_exercises_read_the_run_they_are_given():
    from types import SimpleNamespace

    funnel = SimpleNamespace(after_bucket_pruning=2, after_partition_pruning=8)
    assert ex.bucket_pruning_slices("6.4", 2, funnel, 2).right
    assert ex.bucket_pruning_slices("6.4", 1, funnel, 2).right is False
    split = SimpleNamespace(rows_rewritten=5760, table_rows=46080, buckets_split=2)
    assert ex.rows_the_resize_rewrote("6.5", 5760, split).right
    wrong = ex.rows_the_resize_rewrote("6.5", 46080, split)
    assert wrong.right is False and "past the split threshold" in wrong.hint


def test_most_planner_files_accepts_every_format_tied_for_the_most_and_says_why_another_is_wrong():
    from labformat.lab import formats

    commits = pd.DataFrame({"format": list(formats.FORMATS), "commit": [4, 4, 4], "metadata files": [1, 1, 1],
                            "metadata KB": [1.0] * 3, "planner files": [3, 9, 9]})
    run = formats.ThreeFormats(commits, pd.DataFrame(), {}, {})
    assert ex.most_planner_files("8.1", "delta-rs", run).right and ex.most_planner_files("8.1", "pyiceberg", run).right
    wrong = ex.most_planner_files("8.1", "labformat", run)
    assert wrong.right is False and "labformat's planner reads 3 files, fewer than 9" in wrong.hint
    assert ex.most_planner_files("8.1", "iceberg", run).right is False
