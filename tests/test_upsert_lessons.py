"""02's experiments beyond the month: the deduplicate shuffle's rule and projection, steps 1-6 timed alone,
what the tag and write steps move, and the checks of exercises 2.5 (a tuning choice) and 2.6."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from labformat import datasets  # noqa: E402
from labformat.fileformat.bloom_filter import BloomSpec  # noqa: E402
from labformat.lab import exercises as ex, frames as fr, shuffle, viz  # noqa: E402

OPTIONS = {"max_file_size": "24KB", "small_file_limit": 0}


# ---------------------------------------------------------------- the shuffle rule

def test_waves_and_idle_cores_count_a_stage_of_equal_tasks():
    assert [shuffle.waves(n, 16) for n in (1, 16, 17, 20, 32, 48)] == [1, 1, 2, 2, 2, 3]
    assert shuffle.idle_in_last_wave(20, 16) == 12 and shuffle.idle_in_last_wave(48, 16) == 0


def test_the_rule_prices_waves_of_start_up_plus_a_share_of_the_work():
    assert shuffle.shuffle_seconds(20, 16, 0.1, 2.0) == pytest.approx(2 * (0.1 + 0.1))
    assert shuffle.shuffle_seconds(48, 16, 0.1, 2.0) == pytest.approx(3 * (0.1 + 2.0 / 48))
    # Little work: start-ups decide, 20 tasks beat 48; much work: full waves decide, 48 beat 20.
    assert shuffle.shuffle_seconds(20, 16, 0.02, 0.2) < shuffle.shuffle_seconds(48, 16, 0.02, 0.2)
    assert shuffle.shuffle_seconds(48, 16, 0.02, 200.0) * 1.5 < shuffle.shuffle_seconds(20, 16, 0.02, 200.0)


def test_best_task_counts_are_the_multiples_of_the_cores_when_work_dwarfs_start_up():
    best, allowed = shuffle.best_task_counts(16, 0.01, 50.0)
    assert best == pytest.approx(0.01 + 50.0 / 16)
    assert {16, 32, 48, 64} <= set(allowed) and not {15, 17, 20, 24, 40} & set(allowed)
    _, few = shuffle.best_task_counts(16, 1.0, 1.0)  # start-up dominates: one task a core, once
    assert 48 not in few and few[0] <= 16


# ---------------------------------------------------------------- exercise checks

def test_the_tuning_choice_accepts_every_count_the_rule_allows_and_says_why_a_wrong_one_is_slower():
    startup, work = 0.01, shuffle.SEED_WORK_S
    _, allowed = shuffle.best_task_counts(16, startup, work)
    for n in (16, 32, 48):
        assert n in allowed and ex.shuffle_partitions_choice("2.5", n, startup, work).right
    wrong = ex.shuffle_partitions_choice("2.5", 20, startup, work)
    assert wrong.right is False and "2 waves" in wrong.message and "x the fastest" in wrong.message
    assert ex.shuffle_partitions_choice("2.5", None, startup, work).right is None
    for bad in (True, 0, 201, 16.5, "48"):
        assert ex.shuffle_partitions_choice("2.5", bad, startup, work).right is False
    # A start-up as large as a tenth of a task's share: a third wave no longer comes free.
    assert not ex.shuffle_partitions_choice("2.5", 48, 0.75, work).right


def test_the_random_keys_share_accepts_the_run_and_the_rule_within_a_file_and_a_half():
    day = pd.Series({"files_in_snapshot": 55, "files_rewritten": 54, "updated": 287})
    assert ex.files_rewritten_share("2.6", 1.0, day).right
    assert ex.files_rewritten_share("2.6", 54 / 55, day).right
    wrong = ex.files_rewritten_share("2.6", 0.5, day)
    assert wrong.right is False and "get none" in wrong.hint and "0.5" in wrong.message
    assert ex.files_rewritten_share("2.6", 1.5, day).right is False
    assert ex.files_rewritten_share("2.6", None, day).right is None


def test_bloom_files_opened_reads_the_filter_type_asked_for():
    sweep = pd.DataFrame({"num_entries": [18, 18], "filter_type": ["SIMPLE", "DYNAMIC_V0"],
                          "files_after_bloom": [32, 6], "files_matched": [6, 6], "files_in_snapshot": [32, 32],
                          "corrections": [8, 8], "keys_read_by_exact_check": [5_760, 1_080]})
    assert ex.bloom_files_opened("2.2", 32, sweep, 18).right
    assert ex.bloom_files_opened("2.2", 6, sweep, 18, filter_type="DYNAMIC_V0").right


def test_ranges_are_listed_compactly():
    assert ex._ranges([48, 16, 31, 32, 33]) == "16, 31-33, 48"


# ---------------------------------------------------------------- frames and charts

def test_the_bloom_filter_bytes_of_a_footer_follow_its_size_not_its_keys():
    assert fr.bloom_filter_bytes({"bloom_num_entries": 15_120}) == 108_712  # a `small` history file's, measured
    assert fr.bloom_filter_bytes({"bloom_num_entries": 180}) < fr.bloom_filter_bytes({}) / 100
    frame = fr.bloom_filters_frame({"simple": BloomSpec(num_entries=18), "dynamic": BloomSpec(type_code="DYNAMIC_V0",
                                                                                               num_entries=18)}, 180)
    assert frame.loc["simple", "rows"] == 1 and frame.loc["dynamic", "rows"] == 10
    assert float(frame.loc["simple", "predicted_fpp"]) > 0.9 > 1e-6 > float(frame.loc["dynamic", "predicted_fpp"])


def test_the_insert_plan_draws_max_file_size_plus_one_filter_when_asked():
    plan = pd.DataFrame({"created": [False, True], "small_file": [True, False], "kb_before": [8.4, 0.0],
                         "inserts": [81, 181], "updates": [1, 0], "kb_after": [12.8, 16.7],
                         "min_key": ["a", "b"], "max_key": ["b", "c"]})
    ax = viz.plot_insert_plan(plan, {"max_file_size": 15_000, "small_file_limit": 12_500}, filter_bytes=1_312)
    assert [round(line.get_ydata()[0], 2) for line in ax.get_lines()] == [14.65, 12.21, 15.93]
    assert any("bloom filter (1 KB)" in label for label in ax.get_legend_handles_labels()[1])
    plt.close("all")


def _runs() -> shuffle.ShuffleRuns:
    def stage(n, seconds):
        return pd.DataFrame({"stage_id": 1, "task_id": range(n), "index": range(n), "launch": 0.0,
                             "duration": seconds, "busy_s": seconds, "duration_s": seconds})
    runs = pd.DataFrame({"tasks": [20, 48] * 5, "repeat": sorted([1, 2, 3, 4, 5] * 2), "measured_tasks": [20, 48] * 5,
                         "stage_s": 0.5, "busy_s": 1.0, "work_s": [0.6, 0.04] * 5, "projected_s": 0.1})
    return shuffle.ShuffleRuns(runs, {20: stage(20, 0.05), 48: stage(48, 0.03)}, startup_s=0.02, startup_tasks=48,
                               rows=3_200, cores_here=2)


def test_the_shuffle_projection_lays_the_measured_stage_and_the_rules_on_16_lanes():
    runs = _runs()
    axes = viz.plot_shuffle_projection(runs, 120.0)
    assert len(axes) == 4 and all("tasks" in ax.get_title() for ax in axes)
    assert "as measured here" in axes[0].get_title() and "by the rule, 120 s of work" in axes[1].get_title()
    assert axes[1].get_xlim()[1] > 10 * axes[0].get_xlim()[1]  # the stated workload on its own seconds axis
    equal = runs.projected(48, 120.0)
    assert len(equal) == 48 and equal["lane"].nunique() == 16 and equal["duration"].iloc[0] == pytest.approx(0.02 + 2.5)
    table = runs.by_rule([20, 48], work_s=120.0)
    assert table.loc[20, "waves"] == 2 and table.loc[48, "idle_cores_in_last_wave"] == 0
    assert table.loc[48, "stage_s"] < table.loc[20, "stage_s"]
    plt.close("all")


# ---------------------------------------------------------------- Spark: steps 1-6 alone, the shuffle timed

@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    import labformat as lf

    spec = datasets.spec("tiny", late_fraction=0.0, batch_days=2)
    table = lf.Table.create(spark, tmp_path_factory.mktemp("lessons") / "base")
    cached = datasets.generate(spark, spec)
    table.bulk_insert(datasets.load_history(spark, cached), {"bulk_insert_sort_mode": "GLOBAL_SORT",
                                                             "bulk_insert_parallelism": 8})
    return spec, table, datasets.load_batch(spark, cached, 1)


@pytest.mark.spark
def test_plan_only_times_steps_1_to_6_and_writes_nothing(history):
    from labformat.lab import upsert_timing

    _, table, batch = history
    before = [i.time for i in table.timeline()], sorted(s.path for s in table.file_slices())
    report = upsert_timing.plan_only(table, batch, {**OPTIONS, "index_type": "SIMPLE"})
    assert report.instant is None and report.files == () and report.step("tag").seconds > 0
    assert report.funnel.keys_read == sum(f["rows"] for f in fr.footers_frame(table).to_dict("records"))
    assert ([i.time for i in table.timeline()], sorted(s.path for s in table.file_slices())) == before


@pytest.mark.spark
def test_tag_and_write_bytes_count_footers_key_columns_and_the_rewrite(history):
    from labformat.lab import sweeps, upsert_timing

    from pathlib import Path

    _, table, batch = history
    copy = sweeps.copy_table(table, "bytes", workdir=Path(table.path).parent)
    report = copy.upsert(batch, OPTIONS)
    moved = upsert_timing.tag_and_write_bytes(copy, report)
    assert moved["footers_read"] == report.funnel.files_in_snapshot and moved["files_checked"] == report.files_rewritten
    assert 0 < moved["key_column_bytes"] < moved["write_read_bytes"] < moved["footer_bytes"] + moved["write_read_bytes"]
    assert moved["write_written_bytes"] == report.bytes_written


@pytest.mark.spark
def test_time_deduplicate_runs_the_shuffle_at_each_task_count_and_measures_a_start_up(history):
    _, table, batch = history
    runs = shuffle.time_deduplicate(table, batch, (4, 8), repeats=2)
    assert sorted(runs.runs["tasks"].tolist()) == [4, 4, 8, 8] and runs.runs["repeat"].tolist() == [1, 1, 2, 2]
    assert runs.runs["tasks"].tolist()[:2] == [4, 8] and runs.runs["tasks"].tolist()[2:] == [8, 4]  # interleaved
    assert (runs.runs["measured_tasks"] == runs.runs["tasks"]).all()
    assert {len(t) for t in runs.stages.values()} == {4, 8} and runs.startup_tasks == 8
    assert runs.startup_s > 0 and runs.work_s >= 0 and runs.rows == batch.count()
