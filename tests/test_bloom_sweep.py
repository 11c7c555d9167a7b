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

# Late corrections off: a day's updates touch only the previous day's files. Small files off:
# each day's inserts open new file groups, spread over them by a hash of the key.
OPTIONS = {"max_file_size": "32KB", "small_file_limit": 0}
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
    rows = []
    for n, p, fp in ((60_000, 1e-9, 0), (72, 1e-9, 1200), (720, 0.01, 6)):
        for day in (1, 2):
            rows.append({"num_entries": n, "fpp": p, "day": day, "keys_after_range_pruning": 1900,
                         "keys_after_bloom": 340 + fp, "keys_matched": 340, "keys_false_positives": fp,
                         "keys_read_by_exact_check": 2900, "files_after_range_pruning": 6, "files_after_bloom": 5})
    axes = viz.plot_bloom_sweep(pd.DataFrame(rows))
    assert len(axes) == 3
    labels = [t.get_text() for t in axes[0].get_xticklabels()]
    assert labels == ["60,000 @ 1e-9", "72 @ 1e-9", "720 @ 0.01"]
    assert axes[1].get_shared_y_axes().joined(axes[0], axes[1])  # pairs on one scale
    fp_heights = [bar.get_height() for bar in axes[1].patches]
    assert fp_heights == [0, 2400, 12]  # summed over the two days
    _, given = plt.subplots(1, 3)
    assert list(viz.plot_bloom_sweep(pd.DataFrame(rows), axes=given)) == list(given)


@pytest.mark.spark
def test_a_small_filter_lets_false_positives_through_and_the_funnel_adds_up(spark, tmp_path):
    spec = datasets.spec("tiny", late_fraction=0.0, batch_days=3)
    frame = sweeps.bloom_filter_sweep(spark, spec, [DEFAULT, TINY], days=2, options=OPTIONS, workdir=tmp_path)
    assert len(frame) == 4 and list(frame["day"]) == [1, 2, 1, 2]
    for _, row in frame.iterrows():
        assert 0 <= row.keys_matched <= row.keys_after_bloom <= row.keys_after_range_pruning
        assert row.keys_false_positives == row.keys_after_bloom - row.keys_matched
        assert row.files_matched <= row.files_after_bloom <= row.files_after_range_pruning
        # The exact check opens every file a candidate passed the bloom filter for, and reads all its keys.
        assert row.keys_read_by_exact_check >= row.keys_matched
        assert (row.keys_read_by_exact_check > 0) == (row.files_after_bloom > 0)
    default = frame[frame["num_entries"] == DEFAULT[0]]
    tiny = frame[frame["num_entries"] == TINY[0]]
    assert (default["keys_false_positives"] == 0).all()
    # Day 2 corrects day 1, whose inserts went to several new files each spanning the whole day:
    # range pruning keeps them all, the nearly full filters let most absent keys through.
    assert tiny["keys_false_positives"].sum() > 0
    assert tiny["keys_after_bloom"].sum() > default["keys_after_bloom"].sum()
    assert list(tiny["keys_matched"]) == list(default["keys_matched"])  # the same updates found
    assert (frame["keys_per_file"] > 5 * TINY[0]).all()  # the small filter is far too small for a file
    assert (frame["tag_s"] > 0).all()

    # A daily run's frame carries the key-level funnel too.
    table = lf.Table.open(spark, tmp_path / f"bloom-{TINY[0]}-{TINY[1]:g}")
    days = sweeps.upsert_days(table, spec, [3], {**OPTIONS, "bloom_num_entries": TINY[0]})
    assert set(viz.KEY_FUNNEL_COLUMNS) <= set(days.columns)
    assert days["keys_false_positives"].iloc[0] == days["keys_after_bloom"].iloc[0] - days["keys_matched"].iloc[0]
