"""The merge-on-read lesson's runs (labformat/lab/merge_on_read.py): copy-on-write beside merge-on-read, before and
after a compaction, and the max.delta.commits sweep, at `tiny` with late corrections; its exercises and charts."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest

from labformat import datasets
from labformat.lab import exercises as ex
from labformat.lab import merge_on_read as mor
from labformat.lab import viz


def test_compaction_counts_and_settings_follow_the_preset():
    assert mor.expected_compactions(28, 5) == 5 and mor.expected_compactions(3, 2) == 2
    assert mor.expected_compactions(3, 5) == 0 and mor.expected_compactions(10, None) == 0
    assert mor.compaction_every(datasets.spec("small")) == 5 and mor.compaction_every(datasets.spec("tiny")) == 2
    assert mor.sweep_settings(datasets.spec("small")) == (2, 5, None)
    # Ten days at small (2 compactions at 5), every day of tiny's 3.
    assert mor.side_by_side_days(datasets.spec("small")) == 10 and mor.side_by_side_days(datasets.spec("tiny")) == 3
    assert mor.sweep_settings(datasets.spec("tiny")) == (1, 2, None)
    assert mor.inline_options(None) == {"hoodie.compact.inline": False}
    assert mor.inline_options(3)["hoodie.compact.inline.max.delta.commits"] == 3


@pytest.fixture(scope="module")
def month(spark, tmp_path_factory):
    spec = datasets.spec("tiny", scenario="late")
    return spec, mor.side_by_side(spark, spec, every=2, workdir=tmp_path_factory.mktemp("mor-lesson"))


@pytest.mark.spark
def test_side_by_side_compacts_every_n_and_both_tables_hold_the_same_rows(month):
    spec, run = month
    cow, mor_days = run.of(mor.COW), run.of(mor.MOR)
    assert list(cow.index) == list(mor_days.index) == list(range(1, spec.batch_days + 1))
    # The bulk insert is delta commit 1: with N=2 days 1 and 3 compact (delta commits 2 and 4).
    assert run.compaction_days == [1, 3] == [d for d in mor_days.index if mor_days.loc[d, "compaction_instant"]]
    assert len(run.compaction_days) == mor.expected_compactions(spec.batch_days, 2)
    assert not cow["compacted"].any() and (cow["log_files_written"] == 0).all() and (cow["logs_read"] == 0).all()
    # Late corrections: copy-on-write rewrites base files every day, merge-on-read appends logs.
    assert (cow["files_rewritten"] > 0).all() and (mor_days["log_files_written"] > 0).all()
    assert (mor_days["upsert_bytes"] < cow["upsert_bytes"]).all()
    # The query right after a compaction reads no log file; the day after one, it does again.
    assert (mor_days.loc[run.compaction_days, "logs_read"] == 0).all()
    assert mor_days.loc[2, "logs_read"] == mor_days.loc[2, "log_files_written"] > 0
    assert (mor_days.loc[run.compaction_days, "slices_compacted"] > 0).all()
    # Logs hold updates of their base files' keys only: the index never opens one.
    assert (mor_days["index_logs_read"] == 0).all() and (mor_days["slices_after_range_pruning"] > 0).all()
    assert (cow["rows"] == mor_days["rows"]).all() and (cow["rows"] > 0).all()
    assert mor.differing_rows(run.tables[mor.COW], run.tables[mor.MOR]) == 0
    totals = run.totals()
    assert list(totals.index) == ["copy-on-write", "merge-on-read"]
    assert totals.loc["merge-on-read", "compactions"] == 2 and totals.loc["copy-on-write", "compactions"] == 0
    assert run.options["hoodie.compact.inline.max.delta.commits"] == 2


@pytest.mark.spark
def test_before_and_after_compaction_reads_the_same_rows_three_ways(month):
    _, run = month
    frame = mor.before_and_after_compaction(run, repeats=2).set_index("read")
    before, after, cow = (frame.loc[name] for name in frame.index)
    assert before["logs_read"] > 0 == after["logs_read"] == cow["logs_read"]
    assert before["rows"] == after["rows"] == cow["rows"] > 0
    assert (frame["runs"] == 2).all() and (frame["min_s"] <= frame["median_s"]).all()
    assert (frame["day"] == run.compaction_days[-1]).all()


@pytest.mark.spark
def test_sweep_compacts_more_often_writes_more_and_reads_fewer_logs(spark, tmp_path):
    spec = datasets.spec("tiny", scenario="late")
    sweep = mor.compaction_sweep(spark, spec, (1, None), days=2, workdir=tmp_path)
    assert sorted(sweep["day"].unique()) == [1, 2] and list(sweep["setting"].unique()) == ["every 1", "never"]
    totals = mor.sweep_totals(sweep)
    assert list(totals.index) == ["every 1", "never"]
    assert totals.loc["every 1", "compactions"] == 2 and totals.loc["never", "compactions"] == 0
    assert totals.loc["every 1", "logs_read"] == 0 < totals.loc["never", "logs_read"]
    assert totals.loc["every 1", "mb_written"] > totals.loc["never", "mb_written"]
    # Both see the same data: the same rows each day.
    assert (sweep.groupby("day")["rows"].nunique() == 1).all()
    assert ex.most_bytes_written("4.3", "every 1", totals).right
    assert ex.most_bytes_written("4.3", 1, totals).right
    assert ex.most_bytes_written("4.3", "never", totals).right is False


@pytest.mark.spark
def test_exercises_check_against_the_run(month):
    _, run = month
    assert ex.compactions("4.1", 2, run).right and not ex.compactions("4.1", 1, run).right
    assert ex.compactions("4.1", None, run).right is None
    assert ex.compactions("4.1", True, run).right is False  # a yes/no is no count
    assert ex.logs_after_compaction("4.2", 0, run).right and not ex.logs_after_compaction("4.2", 3, run).right


def _fake_days() -> pd.DataFrame:
    rows = []
    for day in (1, 2, 3):
        for table, logs, compacted in (("copy-on-write", 0, False), ("merge-on-read", 0 if day == 2 else day, day == 2)):
            rows.append({"table": table, "day": day, "write_s": 2.0, "compaction_s": 0.5 if compacted else 0.0,
                         "upsert_bytes": 2**20, "compaction_bytes": 2**21 if compacted else 0, "compacted": compacted,
                         "query_s": 0.3, "files_read": 4, "logs_read": logs})
    return pd.DataFrame(rows)


def test_charts_draw_write_and_read_cost_and_mark_compactions():
    import matplotlib.pyplot as plt

    axes = viz.plot_cow_vs_mor(_fake_days())
    assert len(axes) == 4
    labels = axes[0].get_legend_handles_labels()[1]
    assert "compaction" in labels and "merge-on-read: inline compaction (stacked on the upsert)" in labels
    assert "merge-on-read: log files (stacked on its base files)" in axes[3].get_legend_handles_labels()[1]
    assert any(line.get_xdata()[0] == 2 for line in axes[3].get_lines())  # day 2's compaction marked
    totals = pd.DataFrame({"compactions": [2, 0], "mb_written": [3.0, 1.0], "logs_read": [0, 5],
                           "write_s": [5.0, 4.0], "mean_query_s": [0.2, 0.4]}, index=["every 1", "never"])
    trade, written, logs = viz.plot_compaction_sweep(totals)
    assert "every 1 (2 compactions)" in [t.get_text() for t in trade.texts]
    # Each exact cost on an axis of its own (no twin axis): bars as tall as the totals.
    assert [p.get_height() for p in written.patches] == [3.0, 1.0] and [p.get_height() for p in logs.patches] == [0, 5]
    assert len(trade.figure.axes) == 3
    plt.close("all")


def test_when_to_compact_is_the_rarest_setting_within_the_read_budget():
    """A made-up sweep of three settings over 5 days: the budget is the middle setting's worst query."""
    logs = {"every 2": [0, 8, 0, 8, 0], "every 5": [8, 16, 24, 0, 8], "never": [8, 16, 24, 32, 40]}
    compacted = {"every 2": [1, 0, 1, 0, 1], "every 5": [0, 0, 0, 1, 0], "never": [0] * 5}
    sweep = pd.DataFrame([{"setting": s, "day": d + 1, "logs_read": logs[s][d], "compacted": compacted[s][d]}
                          for s in logs for d in range(5)])
    budget = mor.log_budget(sweep)
    assert budget == 24
    assert ex.rarest_compaction_within("4.4", "every 5", sweep, budget).right
    assert ex.rarest_compaction_within("4.4", 5, sweep, budget).right
    wrong = ex.rarest_compaction_within("4.4", "never", sweep, budget)
    assert wrong.right is False and "log file" in wrong.hint
    assert ex.rarest_compaction_within("4.4", "every 2", sweep, budget).right is False
    assert ex.rarest_compaction_within("4.4", None, sweep, budget).right is None
    assert ex.rarest_compaction_within("4.4", "never", sweep, 40).right  # a loose budget: never compact
