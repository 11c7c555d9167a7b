"""The lab's charts: what each draws (bars, labels, legend, limits) comes from its input."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # tests only: no display; viz itself never touches the backend

from datetime import datetime  # noqa: E402

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from labformat.lab import frames, viz  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def legend_texts(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


# ---------------------------------------------------------------- key ranges

MONOTONIC_FILES = pd.DataFrame([
    {"path": "aaaa1111-0_0-1-0_20240115000000000.parquet", "file_id": "aaaa1111-0",
     "min_key": "202401150000_drone0001", "max_key": "202401151159_drone0050", "instant": "20240115000000000"},
    {"path": "bbbb2222-0_1-1-0_20240115000000000.parquet", "file_id": "bbbb2222-0",
     "min_key": "202401151200_drone0001", "max_key": "202401152359_drone0050", "instant": "20240115000000000"},
    {"path": "cccc3333-0_0-9-0_20240116000000000.parquet", "file_id": "cccc3333-0",
     "min_key": "202401160930_drone0002", "max_key": "202401160930_drone0042", "instant": "20240116000000000"},
])


def test_key_ranges_on_a_time_axis_cover_each_files_minutes():
    ax = viz.plot_file_key_ranges(MONOTONIC_FILES)
    drawn = bars(ax)
    assert len(drawn) == 3
    day = 1 / (24 * 60)
    first = mdates.date2num(datetime(2024, 1, 15, 0, 0))
    last = mdates.date2num(datetime(2024, 1, 16, 9, 30)) + day
    assert ax.get_xlim() == pytest.approx((first, last))
    # A file whose keys all fall in one minute is one minute wide, not invisible.
    widths = sorted(p.get_width() for p in drawn)
    assert widths[0] == pytest.approx(day)
    assert sorted(p.get_x() for p in drawn)[0] == pytest.approx(first)
    # Same instant, same colour; the other instant, another colour.
    colors = [p.get_facecolor() for p in sorted(drawn, key=lambda p: p.get_y())]
    assert colors[0] == colors[1] != colors[2]
    assert legend_texts(ax) == ["20240115000000000 (2 files)", "20240116000000000 (1 file)"]
    assert "time prefix" in ax.get_xlabel()


def test_key_ranges_without_a_time_prefix_use_key_ranks_and_skip_empty_files():
    files = pd.DataFrame({
        "file_id": ["f1", "f2", "f3", "f4"],
        "min_key": ["0a17", "3c00", "1f22", None],
        "max_key": ["9e01", "f0ff", "3c00", None],
        "instant": ["001", "001", "002", "002"],
    })
    fig, ax = plt.subplots()
    assert viz.plot_file_key_ranges(files, ax=ax) is ax
    drawn = bars(ax)
    assert len(drawn) == 3
    keys = sorted({"0a17", "3c00", "1f22", "9e01", "f0ff"})
    assert ax.get_xlim() == (0, len(keys))
    by_start = sorted((p.get_x(), p.get_width()) for p in drawn)
    # 0a17..9e01 is ranks 0..3 (4 cells), 1f22..3c00 ranks 1..2, 3c00..f0ff ranks 2..4.
    assert by_start == [(0, 4), (1, 2), (2, 3)]
    assert [t.get_text() for t in ax.get_xticklabels()] == keys
    assert "1 without a key range" in ax.get_title()
    assert legend_texts(ax) == ["001 (2 files)", "002 (1 file)"]


# ---------------------------------------------------------------- task timeline

def test_assign_lanes_never_overlaps_within_a_lane():
    rng = np.random.default_rng(7)
    # Simulate 3 cores: each task starts when a core frees up, as Spark's scheduler does.
    free, rows = [0.0, 0.0, 0.0], []
    for task_id in range(40):
        core = int(np.argmin(free))
        duration = float(rng.uniform(0.1, 2.0))
        rows.append({"stage_id": task_id // 10, "task_id": task_id, "launch": free[core], "duration": duration})
        free[core] += duration
    tasks = pd.DataFrame(rows).sample(frac=1, random_state=1)  # input order must not matter
    lanes = viz.task_lanes(tasks, 3)
    assert lanes.index.equals(tasks.index) and set(lanes) <= {0, 1, 2}
    for lane in range(3):
        mine = tasks[lanes == lane].sort_values("launch")
        ends = (mine["launch"] + mine["duration"]).to_numpy()
        assert (mine["launch"].to_numpy()[1:] >= ends[:-1] - 1e-9).all()


def test_assign_lanes_leaves_lanes_idle_and_prefers_the_earliest_free():
    tasks = pd.DataFrame({"stage_id": [0, 0, 1], "task_id": [0, 1, 2],
                          "launch": [0.0, 0.0, 3.0], "duration": [1.0, 2.0, 1.0]})
    lanes = viz.task_lanes(tasks, 4)
    # Stage 0 has 2 tasks on 4 cores: lanes 0 and 1; stage 1's task takes a lane idle since 0.
    assert lanes.tolist() == [0, 1, 2]
    assert 3 not in set(lanes)


def test_assign_lanes_refuses_more_concurrent_tasks_than_cores():
    tasks = pd.DataFrame({"stage_id": [0, 0, 0], "task_id": [0, 1, 2],
                          "launch": [0.0, 0.0, 0.5], "duration": [1.0, 1.0, 1.0]})
    with pytest.raises(ValueError, match="more tasks ran at once"):
        viz.task_lanes(tasks, 2)


def test_task_timeline_draws_every_task_and_shades_idle_lanes():
    tasks = pd.DataFrame({"stage_id": [3, 3, 4], "task_id": [10, 11, 12],
                          "launch": [0.0, 0.0, 2.0], "duration": [2.0, 1.0, 3.0]})
    ax = viz.plot_task_timeline(tasks, cores=3)
    drawn = bars(ax)
    assert len(drawn) == 3
    assert sorted((p.get_x(), p.get_width()) for p in drawn) == [(0.0, 1.0), (0.0, 2.0), (2.0, 3.0)]
    assert ax.get_xlim() == (0.0, 5.0)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["core 0", "core 1", "core 2"]
    idle = [c for c in ax.collections if c.get_gid() == "idle"]
    # Lane 0: 2..5 idle after task 10; lane 1: 1..5 idle; lane 2: 0..2 idle before task 12.
    assert len(idle) == 3
    assert legend_texts(ax) == ["stage 3 (2 tasks)", "stage 4 (1 tasks)", "idle core"]
    assert "busy 40%" in ax.get_title()  # 6 task-seconds of 3 cores x 5 s


# A write step as measured on 2 cores: 2 routing tasks, then 4 write tasks of 1 s each.
MEASURED_WRITE = pd.DataFrame({
    "stage_id": [12, 12, 13, 13, 13, 13], "task_id": [0, 1, 2, 3, 4, 5], "index": [0, 1, 0, 1, 2, 3],
    "launch": [0.0, 0.0, 0.5, 0.5, 1.5, 1.5], "duration": [0.5, 0.5, 1.0, 1.0, 1.0, 1.0],
    "stage_label": ["write: route records to file groups"] * 2 + ["write: write base files"] * 4,
})


def test_task_timeline_names_stages_by_their_label():
    ax = viz.plot_task_timeline(MEASURED_WRITE, cores=2)
    assert legend_texts(ax) == ["write: route records to file groups (2 tasks)", "write: write base files (4 tasks)",
                                "idle core"]
    assert "Projection" not in ax.get_title()


def test_projection_is_drawn_hatched_and_titled_as_a_projection():
    from labformat.lab.projection import project

    ax = viz.plot_task_timeline(project(MEASURED_WRITE, 16), cores=16, projection=True)
    drawn = bars(ax)
    assert len(drawn) == 6 and all(p.get_hatch() == "//" for p in drawn)
    assert ax.get_title().startswith("Projection onto 16 cores from the task durations measured on this machine")
    assert ax.get_xlim() == (0.0, 1.5)  # 0.5 s of routing, then all 4 writes at once


def test_timeline_and_projection_share_the_seconds_axis():
    top, bottom = viz.plot_timeline_and_projection(MEASURED_WRITE, cores=2, project_to=16)
    assert top.get_shared_x_axes().joined(top, bottom)
    assert top.get_xlim() == bottom.get_xlim() == (0.0, 2.5)  # the measured run is the longer
    assert top.get_title().startswith("Measured on this machine: 6 tasks on 2 cores")
    assert bottom.get_title().startswith("Projection onto 16 cores")
    assert len(bars(top)) == len(bars(bottom)) == 6
    assert [t.get_text() for t in bottom.get_yticklabels()][-1] == "core 15"


# ---------------------------------------------------------------- funnel

def test_pruning_funnel_draws_one_bar_per_day_and_stage():
    days = pd.DataFrame({"day": [1, 2], "index": ["BLOOM", "BLOOM"], "files_in_snapshot": [12, 36],
                         "after_range_pruning": [12, 30], "after_bloom": [12, 29], "matched": [12, 29],
                         "false_positives": [0, 0]})
    ax = viz.plot_pruning_funnel(days)
    heights = [p.get_height() for p in sorted(bars(ax), key=lambda p: p.get_x())]
    assert heights == [12, 12, 12, 12, 0, 36, 30, 29, 29, 0]
    assert legend_texts(ax) == ["files in snapshot", "after range pruning", "after bloom", "matched",
                                "false positives"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["day 1", "day 2"]
    assert ax.get_ylim()[1] >= 36


def test_pruning_funnel_skips_what_simple_does_not_measure():
    days = pd.DataFrame({"day": [1, 2], "index": ["SIMPLE", "SIMPLE"], "files_in_snapshot": [12, 36],
                         "after_range_pruning": [None, None], "after_bloom": [np.nan, np.nan],
                         "matched": [12, 29], "false_positives": [None, None]})
    ax = viz.plot_pruning_funnel(days)
    assert sorted(p.get_height() for p in bars(ax)) == [12, 12, 29, 36]
    labels = legend_texts(ax)
    assert labels[1] == "after range pruning (n/a for SIMPLE)"
    assert labels[0] == "files in snapshot" and labels[3] == "matched"
    assert sum("n/a" in t for t in labels) == 3


# ---------------------------------------------------------------- file size sweep

def test_file_size_tradeoff_plots_each_metric_against_megabytes():
    sweep = pd.DataFrame({"max_file_size": ["1MB", "4MB", "16MB", 128 * 1024**2],
                          "rows_rewritten": [1500, 4000, 16000, 60000], "write_stage_tasks": [80, 24, 8, 2],
                          "files": [90, 25, 8, 2]})
    axes = viz.plot_file_size_tradeoff(sweep)
    assert len(axes) == len(viz.TRADEOFF_METRICS) == 6
    assert [a.get_title() for a in axes] == [label for _, label in viz.TRADEOFF_METRICS]
    x, y = axes[1].get_lines()[0].get_data()
    assert list(x) == [1, 4, 16, 128] and list(y) == [80, 24, 8, 2]
    assert "no 'query_runs_s' column" in [t.get_text() for t in axes[5].texts]
    assert all(a.get_ylabel() for a in axes) and "log scale" in axes[0].get_xlabel()
    plt.close("all")


def test_file_size_tradeoff_draws_every_timed_run_and_names_the_hours_a_file_holds():
    sweep = pd.DataFrame({"max_file_size": [1024**2, 4 * 1024**2], "hours_per_file": [6.0, 24.0],
                          "query_runs_s": [[0.5, 0.7, 0.6], [0.4, 0.9, 0.5]]})
    axes = viz.plot_file_size_tradeoff(sweep)
    x, y = axes[5].get_lines()[0].get_data()
    assert list(x) == [1, 4] and list(y) == [0.6, 0.5]
    assert len(axes[5].collections[0].get_offsets()) == 6
    assert [t.get_text() for t in axes[5].get_xticklabels()] == ["1\n6 h a file", "4\n24 h a file"]
    plt.close("all")


def test_file_size_tradeoff_shows_every_run_and_the_median():
    sweep = pd.DataFrame({"max_file_size": ["1MB", "1MB", "1MB", "8MB"], "rows_rewritten": [3.0, 9.0, 4.0, 2.0],
                          "write_stage_tasks": [4, 4, 4, 1], "files": [4, 4, 4, 1]})
    _, grid = plt.subplots(2, 3)
    axes = viz.plot_file_size_tradeoff(sweep, axes=grid)
    assert axes[0] is grid[0, 0]
    x, y = axes[0].get_lines()[0].get_data()
    assert list(x) == [1, 8] and list(y) == [4.0, 2.0]
    with pytest.raises(ValueError, match="expected 6 axes"):
        viz.plot_file_size_tradeoff(sweep, axes=grid[0])
    plt.close("all")


# ---------------------------------------------------------------- query skipping

SKIPPING = pd.DataFrame([
    {"query": "point lookup", "skipping": "on", "median_s": 0.3, "min_s": 0.25, "max_s": 0.4,
     "files_in_snapshot": 57, "files_read": 1},
    {"query": "point lookup", "skipping": "off", "median_s": 1.2, "min_s": 1.0, "max_s": 1.5,
     "files_in_snapshot": 57, "files_read": 57},
    {"query": "one-hour window", "skipping": "on", "median_s": 0.4, "min_s": 0.3, "max_s": 0.5,
     "files_in_snapshot": 57, "files_read": 3},
    {"query": "one-hour window", "skipping": "off", "median_s": 1.1, "min_s": 1.0, "max_s": 1.3,
     "files_in_snapshot": 57, "files_read": 57},
])


def test_query_skipping_splits_files_and_compares_times():
    ax_files, ax_time = viz.plot_query_skipping(SKIPPING)
    file_bars = bars(ax_files)
    assert sorted(p.get_width() for p in file_bars) == [1, 3, 54, 56]
    assert [t.get_text() for t in ax_files.get_yticklabels()] == ["point lookup", "one-hour window"]
    assert ax_files.get_xlim()[1] >= 57
    assert any(t.get_text() == "56 of 57 skipped" for t in ax_files.texts)
    assert sorted(p.get_width() for p in bars(ax_time)) == [0.3, 0.4, 1.1, 1.2]
    assert legend_texts(ax_time) == ["skipping on", "skipping off"]


# ---------------------------------------------------------------- step times

def test_step_times_stack_to_each_days_total_and_ignore_non_steps():
    days = pd.DataFrame({"day": [1, 2], "seconds": [6.0, 3.0], "planning_s": [9.9, 9.9],
                         "write_s": [3.0, 2.0], "write_tasks": [5, 5], "tag_s": [2.0, 0.5],
                         "tag_tasks": [9, 9], "deduplicate_s": [1.0, 0.5], "deduplicate_tasks": [3, 3]})
    assert viz.step_columns(days) == ["deduplicate_s", "tag_s", "write_s"]
    ax = viz.plot_step_times(days)
    drawn = bars(ax)
    assert len(drawn) == 6
    tops = {}
    for p in drawn:
        day = round(p.get_x() + p.get_width() / 2)
        tops[day] = max(tops.get(day, 0), p.get_y() + p.get_height())
    assert tops == {0: pytest.approx(6.0), 1: pytest.approx(3.0)}
    assert legend_texts(ax) == ["write", "tag", "deduplicate"]
    assert [t.get_text() for t in ax.texts] == ["6.0 s", "3.0 s"]
    assert ax.get_ylim()[1] >= 6.0


def test_step_times_group_the_steps_too_short_to_see_and_thin_the_day_labels():
    n = 28
    days = pd.DataFrame({"day": range(1, n + 1), "write_s": [1.0] * n, "write_tasks": [4] * n,
                         "tag_s": [0.5] * n, "tag_tasks": [4] * n,
                         "validate_s": [0.001] * n, "validate_tasks": [1] * n,
                         "small_files_s": [0.002] * n, "small_files_tasks": [1] * n})
    ax = viz.plot_step_times(days)
    assert legend_texts(ax) == ["2 shorter steps (each under 2% of the longest day)", "write", "tag"]
    tops = {}
    for p in bars(ax):
        day = round(p.get_x() + p.get_width() / 2)
        tops[day] = max(tops.get(day, 0), p.get_y() + p.get_height())
    assert all(t == pytest.approx(1.503) for t in tops.values()) and len(tops) == n
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "1" and labels[-1] == "28" and len(labels) <= 8
    assert len(ax.texts) == 0  # 28 totals would run together: the axis reads them


def test_viz_import_leaves_matplotlib_settings_alone():
    import importlib

    before = dict(matplotlib.rcParams)
    backend = matplotlib.get_backend()
    importlib.reload(viz)
    assert dict(matplotlib.rcParams) == before and matplotlib.get_backend() == backend


# ---------------------------------------------------------------- one real tiny run

@pytest.fixture(scope="module")
def tiny_run(spark, tmp_path_factory):
    from labformat import datasets
    from labformat.lab.daily import run_daily_upserts

    path = tmp_path_factory.mktemp("viz") / "t"
    run = run_daily_upserts(spark, datasets.spec("tiny", batch_days=1), path, "BLOOM",
                            {"max_file_size": "24KB", "small_file_limit": 0})
    return spark, run


@pytest.mark.spark
def test_real_run_key_ranges_from_metadata(tiny_run):
    import labformat as lf

    spark, run = tiny_run
    table = lf.Table.open(spark, run.table_path)
    files = frames.key_ranges_frame(table)
    assert len(files) == len(table.file_slices()) > 1
    assert (files["min_key"] <= files["max_key"]).all()
    assert set(files["instant"]) <= {i.time for i in table.timeline()}
    ax = viz.plot_file_key_ranges(files)
    assert len(bars(ax)) == len(files)
    assert "time prefix" in ax.get_xlabel()  # monotonic keys
    assert len(ax.get_legend().get_texts()) == files["instant"].nunique()


@pytest.mark.spark
def test_real_run_funnel_and_step_times(tiny_run):
    _, run = tiny_run
    days = run.to_pandas()
    ax = viz.plot_pruning_funnel(days)
    assert len(bars(ax)) == 5 * len(days)
    assert max(p.get_height() for p in bars(ax)) == days["files_in_snapshot"].max()
    ax = viz.plot_step_times(days)
    steps = viz.step_columns(days)
    assert {"deduplicate_s", "tag_s", "write_s", "commit_s"} <= set(steps)
    # Each visible step a segment, the steps too short to see one grey segment, per day.
    assert len(days) <= len(bars(ax)) <= len(steps) * len(days)
    assert sum(p.get_height() for p in bars(ax)) == pytest.approx(days[steps].fillna(0).to_numpy().sum())
    assert [float(t.get_text().split()[0]) for t in ax.texts] == pytest.approx(days["seconds"].round(1).tolist(),
                                                                               abs=0.051)


# ---------------------------------------------------------------- a month of upserts, timing spreads

MONTH = pd.DataFrame({"day": [1, 2, 3], "files_in_snapshot": [32, 35, 38], "after_range_pruning": [3, 3, 2],
                      "files_rewritten": [3, 2, 2], "files_created": [3, 3, 3], "mb_rewritten": [1.8, 1.4, 1.4],
                      "keys_after_range_pruning": [287, 5146, 4243], "keys_after_bloom": [287, 338, 285],
                      "keys_matched": [287, 338, 285]})


def test_plot_month_counts_files_in_whole_numbers_and_keeps_the_legend_off_the_bars():
    axes = viz.plot_month(MONTH)
    axes[0].figure.canvas.draw()
    for ax in (axes[0], axes[2]):
        assert all(float(t).is_integer() for t in ax.get_yticks())
    assert axes[2].get_ylim()[1] >= 1.5 * MONTH["files_rewritten"].max()
    plt.close("all")


def test_plot_month_shares_the_day_axis_and_draws_the_share_kept():
    axes = viz.plot_month(MONTH)
    assert len(axes) == 4 and axes[0].get_shared_x_axes().joined(axes[0], axes[3])
    x, y = axes[1].get_lines()[0].get_data()
    assert list(x) == [1, 2, 3] and list(np.round(y, 2)) == [9.38, 8.57, 5.26]
    assert [b.get_height() for b in axes[3].patches] == [1.8, 1.4, 1.4]
    plt.close("all")


def test_plot_key_funnel_is_linear_from_zero_and_titles_the_totals():
    ax = viz.plot_key_funnel(MONTH)
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0 and len(ax.patches) == 9
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["after range pruning", "after bloom",
                                                                   "matched (exact check)"]
    kept, passed = MONTH["keys_after_range_pruning"].sum(), MONTH["keys_after_bloom"].sum()
    assert f"{kept:,} pairs kept by range pruning, {passed:,} passed" in ax.get_title()
    assert "pairs" in ax.get_ylabel()
    plt.close("all")


def test_plot_spread_draws_every_run_median_and_range():
    runs = pd.DataFrame({"index": ["BLOOM"] * 3 + ["SIMPLE"] * 3, "tag_s": [0.4, 0.5, 0.9, 0.6, 0.6, 0.7]})
    ax = viz.plot_spread(runs, "index", "tag_s")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["BLOOM", "SIMPLE"]
    assert [round(b.get_height(), 2) for b in ax.patches] == [0.5, 0.6]  # the medians
    assert sum(len(c.get_offsets()) for c in ax.collections if hasattr(c, "get_offsets")) >= 6
    assert "3 runs each" in ax.get_title()
    plt.close("all")


def test_plot_index_comparison_shows_the_tag_spread_and_what_one_upsert_rewrote_with_the_bucket_count():
    runs = pd.DataFrame({"index": ["BLOOM", "BUCKET"] * 2, "repeat": [1, 1, 2, 2], "tag_s": [0.5, 0.1, 0.7, 0.2]})
    upserts = pd.DataFrame({"bucket_num": [None, 4], "files_rewritten": [16, 4], "rows_rewritten": [2_880, 5_760]},
                           index=pd.Index(["BLOOM", "BUCKET"], name="index"))
    tag, rows, files = viz.plot_index_comparison(runs, upserts)
    assert [round(b.get_height(), 2) for b in tag.patches] == [0.6, 0.15]
    assert [b.get_height() for b in rows.patches] == [2_880, 5_760] and [t.get_text() for t in rows.texts] == ["2,880", "5,760"]
    assert [b.get_height() for b in files.patches] == [16, 4]
    assert [t.get_text() for t in files.get_xticklabels()] == ["BLOOM", "BUCKET\n4 buckets"]
    assert "2 runs each" in tag.get_title() and files.get_ylabel() == "base files rewritten"
    plt.close("all")


def test_plot_bucket_split_compares_largest_files_and_draws_the_hot_ring_before_and_after():
    from types import SimpleNamespace

    from matplotlib.patches import Wedge

    buckets = pd.DataFrame(
        [{"table": "fixed", "moment": m, "partition": p, "file_id": f"f{p}{b}", "rows": r, "KB": kb}
         for m in ("before the resize", "after the resize")
         for p, r, kb in (("d1", 10, 80.0), ("d2", 20, 150.0)) for b in (0, 1)]
        + [{"table": "ring", "moment": "before the resize", "partition": p, "file_id": f"r{p}{b}", "rows": r, "KB": kb}
           for p, r, kb in (("d1", 10, 80.0), ("d2", 20, 160.0)) for b in (0, 1)]
        + [{"table": "ring", "moment": "after the resize", "partition": p, "file_id": f"a{p}{b}", "rows": r, "KB": kb}
           for p, n, r, kb in (("d1", 2, 10, 80.0), ("d2", 4, 10, 85.0)) for b in range(n)])
    rings = pd.DataFrame([{"moment": "before the resize", "node": v, "file_id": f"b{v}", "rows": 20}
                          for v in (1073741824, 2147483647)]
                         + [{"moment": "after the resize", "node": v, "file_id": f"c{v}", "rows": 10}
                            for v in (536870911, 1073741824, 1610612735, 2147483647)])
    split = SimpleNamespace(buckets=buckets, rings=rings, hot_partition="d2", max_file_size=60 * 1024,
                            split_threshold=2.0)
    sizes, ring = viz.plot_bucket_split(split)
    assert [round(b.get_height()) for b in sizes.patches] == [80, 150, 80, 160, 80, 85]
    assert [t.get_text() for t in sizes.get_xticklabels()] == ["d1", "d2\n(fleet doubled)"]
    assert [round(line.get_ydata()[0]) for line in sizes.get_lines()] == [60, 120]
    wedges = [p for p in ring.patches if isinstance(p, Wedge)]
    assert len(wedges) == 6  # two buckets before, four after
    # Each child is drawn in its parent's colour, and half its width.
    inner, outer = wedges[:2], wedges[2:]
    assert [w.get_facecolor()[:3] for w in outer] == [inner[0].get_facecolor()[:3]] * 2 + [inner[1].get_facecolor()[:3]] * 2
    assert [round(w.theta2 - w.theta1) for w in wedges] == [180, 180, 90, 90, 90, 90]
    plt.close("all")


def test_key_ranges_of_a_month_of_commits_get_a_colour_scale_not_a_legend():
    files = pd.DataFrame({"file_id": [f"f{i}" for i in range(29)],
                          "min_key": [f"202401{15 + i // 2:02d}0000_drone0001" for i in range(29)],
                          "max_key": [f"202401{15 + i // 2:02d}2359_drone0001" for i in range(29)],
                          "instant": [f"2024{i:011d}" for i in range(29)],
                          "commit": ["bulk insert"] + [f"upsert {i}" for i in range(1, 29)]})
    ax = viz.plot_file_key_ranges(files)
    assert ax.get_legend() is None
    scale = ax.figure.axes[-1]
    assert scale is not ax and "29 commits" in scale.get_ylabel()
    assert [t.get_text() for t in scale.get_yticklabels()] == ["bulk insert", "upsert 14", "upsert 28"]
    assert len(ax.get_xticks()) <= 7
    plt.close("all")


def test_index_chart_shows_keys_or_entries_read_and_rows_rewritten_per_workload():
    runs = pd.DataFrame([{"workload": w, "index": i, "keys_read": k, "index_entries_read": e, "rows_rewritten": r}
                         for w, i, k, e, r in (("time-ordered", "BLOOM", 10, None, 5), ("time-ordered", "RECORD_INDEX", 0, 40, 5),
                                               ("random keys", "BLOOM", 70, None, 70),
                                               ("random keys", "RECORD_INDEX", 0, 80, 70))])
    keys, rewritten = viz.plot_index_reads_and_rewrites(runs)
    assert [b.get_height() for b in keys.patches] == [10, 70, 40, 80]  # RECORD_INDEX: its index entries
    assert [b.get_hatch() for b in keys.patches] == [None, None, "//", "//"]
    assert [b.get_height() for b in rewritten.patches] == [5, 70, 5, 70]
    assert [t.get_text() for t in keys.get_xticklabels()] == ["time-ordered", "random keys"]
    assert "rows rewritten" in rewritten.get_ylabel() and "read" in keys.get_ylabel()
    plt.close("all")


def test_plot_layouts_groups_bars_by_query_and_leaves_the_unclustered_table_to_the_title():
    frame = pd.DataFrame({"files": [96, 16, 16], "drone_id filter": [96, 16, 4], "one-hour window": [4, 2, 4],
                          "drone and hour": [4, 2, 1]},
                         index=pd.Index(["before clustering", "linear: ts", "z-order: drone_id, ts"], name="layout"))
    ax = viz.plot_layouts(frame)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["drone_id filter", "one-hour window", "drone and hour"]
    assert [p.get_height() for p in ax.patches] == [16, 2, 2, 4, 4, 1]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["linear: ts", "z-order: drone_id, ts"]
    assert "96 small files" in ax.get_title() and ax.get_ylim()[1] > 16
    plt.close("all")


def test_plot_first_upserts_labels_the_estimate_and_stacks_where_inserts_went():
    first = pd.DataFrame({"day": [1, 2], "record_size_estimate": [1024, 63],
                          "estimate_from": ["hoodie.copyonwrite.record.size.estimate", "commit history"],
                          "records_per_new_file_planned": [692, 11255], "files_created": [55, 0],
                          "inserts": [37907, 34560], "small_files": [0, 55], "small_file_inserts": [0, 34560]})
    ax = viz.plot_first_upserts(first)
    texts = [t.get_text() for t in ax.texts]
    assert "692\n(1024 B a record, default)" in texts and "11,255\n(63 B a record, history)" in texts
    assert "55 new files" in texts and "55 small files" in texts and ax.get_yscale() == "log"
    assert [p.get_height() for p in ax.patches] == [692, 11255, 37907, 0, 0, 34560]
    plt.close("all")


# ---------------------------------------------------------------- 01: key slices; 08: metadata and planner per commit

def test_key_slices_draw_each_files_range_and_its_slices_in_lanes():
    files = pd.DataFrame({"file_id": ["b", "a"], "min_key": ["202401150000_drone0000", "202401150000_drone0001"],
                          "max_key": ["202401152359_drone0001", "202401152359_drone0000"]})
    # File a sorted inside (two slices, morning then afternoon); file b in no order (both slices span the day).
    slices = pd.DataFrame({"file_id": ["a", "a", "b", "b"], "slice": [0, 1, 0, 1],
                           "min_key": ["202401150000_drone0001", "202401151200_drone0000"] + ["202401150000_drone0000"] * 2,
                           "max_key": ["202401151159_drone0000", "202401152359_drone0000"] + ["202401152359_drone0001"] * 2})
    ax = viz.plot_key_slices(files, slices, title="PARTITION_SORT")
    drawn = bars(ax)
    assert len(drawn) == 2 + 4 and ax.get_title() == "PARTITION_SORT"
    day, half = 1.0, 0.5  # 00:00 to the end of 23:59, and half of it
    thin = sorted(drawn[2:], key=lambda p: (p.get_y(), p.get_x()))
    # b sorts first (its min key is smaller): lane 0 holds two whole-day slices, lane 1 a staircase.
    assert [round(p.get_width(), 3) for p in thin] == [round(day, 3)] * 2 + [round(half, 3), round(half, 3)]
    assert thin[2].get_y() < thin[3].get_y() and thin[2].get_x() < thin[3].get_x()  # the first slice on top, earlier
    assert [t.get_text() for t in ax.get_yticklabels()] == ["file 1", "file 2"]
    assert "time prefix" in ax.get_xlabel() and ax.get_ylabel() == "base file (sorted by min key)"


def test_metadata_kept_and_planner_files_draw_a_line_per_format_with_counts_on_the_axes():
    commits = pd.DataFrame({"format": ["labformat"] * 3 + ["delta-rs"] * 3, "commit": [0, 1, 2] * 2,
                            "metadata files": [7, 12, 17, 1, 2, 4], "planner files": [3, 3, 3, 1, 2, 2]})
    kept = viz.plot_metadata_kept(commits)
    assert [list(line.get_ydata()) for line in kept.get_lines()] == [[7, 12, 17], [1, 2, 4]]
    assert "(count)" in kept.get_ylabel() and legend_texts(kept)[0] == "labformat: .hoodie/ (no archival)"
    read = viz.plot_planner_files(commits, checkpoints=[1], compactions=[2])
    assert [list(line.get_ydata()) for line in read.get_lines()][:2] == [[3, 3, 3], [1, 2, 2]]
    assert legend_texts(read) == ["labformat", "delta-rs", "delta-rs checkpoint", "labformat compaction"]
    assert "(count)" in read.get_ylabel() and "commit" in read.get_xlabel()
