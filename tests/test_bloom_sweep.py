"""Bloom filter sizing on the drone data: a filter sized for fewer keys than a file holds lets
false (key, file) pairs through; the key-level funnel counts them consistently."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # tests only: no display

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import labformat as lf  # noqa: E402
from labformat import datasets  # noqa: E402
from labformat.lab import sweeps, viz  # noqa: E402

DEFAULT = (60_000, 1e-9)  # Hudi's hoodie.index.bloom.num_entries / .fpp
TINY = (60, 1e-9)  # ~1/10 of the ~700 keys a tiny file holds: the filter is nearly full


def test_the_key_funnel_columns_are_the_ones_the_index_reports():
    from dataclasses import fields

    from labformat.model.report import TagFunnel

    assert set(viz.KEY_FUNNEL_COLUMNS) == {f.name for f in fields(TagFunnel) if f.name.startswith("keys_")}
    assert set(viz.FUNNEL_COLUMNS) <= {f.name for f in fields(TagFunnel)}


def test_bloom_filter_sizes_are_relative_to_the_keys_per_file():
    assert sweeps.bloom_filter_sizes(720) == [(60_000, 1e-9), (720, 1e-9), (240, 1e-9), (72, 1e-9)]
    assert sweeps.bloom_filter_sizes(60_000, 0.01, (1, 0.5)) == [(60_000, 0.01), (30_000, 0.01)]


def test_plot_bloom_sweep_draws_one_group_per_filter_with_readable_labels():
    rows = [{"num_entries": n, "fpp": p, "keys_after_range_pruning": 256, "keys_after_bloom": 8 + fp,
             "keys_matched": 8, "keys_false_positives": fp, "keys_read_by_exact_check": read,
             "files_after_range_pruning": 32, "files_after_bloom": opened, "files_matched": 7}
            for n, p, fp, opened, read in ((60_000, 1e-9, 0, 7, 1261), (72, 1e-9, 240, 32, 5760), (720, 0.01, 6, 9, 1600))]
    axes = viz.plot_bloom_sweep(pd.DataFrame(rows))
    assert len(axes) == 3
    labels = [t.get_text() for t in axes[0].get_xticklabels()]
    assert labels == ["60,000 @ 1e-9", "72 @ 1e-9", "720 @ 0.01"]
    assert axes[1].get_shared_y_axes().joined(axes[0], axes[1])  # pairs on one scale
    assert [bar.get_height() for bar in axes[1].patches] == [0, 240, 6]
    opened, holding = axes[2].containers
    assert [b.get_height() for b in opened] == [7, 32, 9] and [b.get_height() for b in holding] == [7, 7, 7]
    assert [t.get_text() for t in axes[2].texts if "keys read" in t.get_text()] == [
        "1,261 keys read", "5,760 keys read", "1,600 keys read"]
    assert axes[2].get_ylim()[1] > 32  # the labels fit above the tallest bar
    _, given = plt.subplots(1, 3)
    assert list(viz.plot_bloom_sweep(pd.DataFrame(rows), axes=given)) == list(given)


@pytest.mark.spark
def test_a_small_filter_opens_files_in_vain_and_the_funnel_adds_up(spark, tmp_path):
    spec = datasets.spec("tiny")
    frame = sweeps.bloom_filter_sweep(spark, spec, [DEFAULT, TINY], corrections=6, files=16, workdir=tmp_path)
    assert list(frame["num_entries"]) == [DEFAULT[0], TINY[0]]
    for _, row in frame.iterrows():
        assert row.corrections == 6 and row.keys_matched == 6
        # NONE from round-robin input: every file spans the whole key range, range pruning keeps all.
        assert row.files_in_snapshot == row.files_after_range_pruning == 16
        assert row.keys_after_range_pruning == 6 * 16
        assert 0 <= row.keys_matched <= row.keys_after_bloom <= row.keys_after_range_pruning
        assert row.keys_false_positives == row.keys_after_bloom - row.keys_matched
        assert 1 <= row.files_matched <= 6 and row.files_matched <= row.files_after_bloom
        assert row.files_false_positives == row.files_after_bloom - row.files_matched
        assert row.keys_read_by_exact_check >= row.files_after_bloom  # every key of every file opened
        assert row.tag_s > 0
    default, tiny = frame.iloc[0], frame.iloc[1]
    assert default.keys_false_positives == 0 and default.files_after_bloom == default.files_matched
    assert tiny.keys_per_file > 5 * TINY[0]  # the small filter is far too small for a file
    assert tiny.predicted_fpp > 0.5
    # Nearly full filters pass most absent keys: files without a key are opened, their keys read.
    assert tiny.files_after_bloom > tiny.files_matched
    assert tiny.keys_read_by_exact_check > default.keys_read_by_exact_check
    assert tiny.files_matched == default.files_matched  # the same corrections found

    # A daily run's frame carries the key-level funnel too.
    table = lf.Table.open(spark, tmp_path / f"bloom-{TINY[0]}-{TINY[1]:g}")
    days = sweeps.upsert_days(table, spec, [1], {"bloom_num_entries": TINY[0]})
    assert set(viz.KEY_FUNNEL_COLUMNS) <= set(days.columns)
    assert days["keys_false_positives"].iloc[0] == days["keys_after_bloom"].iloc[0] - days["keys_matched"].iloc[0]


def test_plot_insert_plan_stacks_what_each_file_took_on_what_it_held():
    plan = pd.DataFrame({"created": [False, False, True], "small_file": [False, True, False],
                         "kb_before": [17.0, 8.4, 0.0], "inserts": [0, 81, 181], "updates": [23, 1, 0],
                         "kb_after": [17.2, 12.8, 16.7], "min_key": ["a", "b", "c"], "max_key": ["b", "c", "d"]})
    ax = viz.plot_insert_plan(plan, {"max_file_size": 15_000, "small_file_limit": 12_500})
    labels = ax.get_legend_handles_labels()[1]
    assert set(labels) == {"KB before", "KB added: small file, packed", "KB added: new file group",
                           "KB added: updates only (rewritten, about its old size)", "max_file_size", "small_file_limit"}
    assert [t.get_text() for t in ax.texts] == ["81", "181"]  # inserts above the files that took them
    assert [round(line.get_ydata()[0], 2) for line in ax.get_lines()] == [14.65, 12.21]
    assert ax.get_ylim()[1] > 17.2
