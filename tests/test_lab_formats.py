"""Notebook 08's run: one short month written by labformat, delta-rs and pyiceberg, their metadata counted after every commit."""

from __future__ import annotations

import pandas as pd
import pytest

from labformat import datasets
from labformat.lab import clustering, exercises as ex, formats

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    cached = datasets.generate(spark, datasets.spec("tiny"))
    return formats.three_formats(spark, cached, "formats", 3, clustering.drone_and_window(cached), repeats=1,
                                 workdir=tmp_path_factory.mktemp("formats"))


def test_every_format_is_counted_after_its_load_and_every_day(run):
    commits = run.commits
    assert list(commits.groupby("format", sort=False).size().items()) == [(f, 4) for f in formats.FORMATS]
    assert (commits["metadata files"] > 0).all() and (commits["metadata KB"] > 0).all()
    planner = run.planner()
    assert list(planner.columns) == list(formats.FORMATS) and list(planner.index) == [0, 1, 2, 3]
    # labformat: hoodie.properties and the metadata table's two latest snapshots, every commit.
    assert planner["labformat"].tolist() == [3, 3, 3, 3]
    assert (run.metadata()[("metadata files", "labformat")].diff().dropna() > 0).all()
    # Iceberg: the metadata file, the manifest list and the manifests, which pile up.
    assert planner["pyiceberg"].iloc[0] == 3 and (planner["pyiceberg"].diff().dropna() > 0).all()
    # Delta: every commit until the first checkpoint (every 3 commits here), then the checkpoint and what follows.
    delta = commits[commits["format"] == "delta-rs"].set_index("commit")
    assert delta.loc[0, "planner files"] == 1 and delta.loc[0, "checkpoint files"] == 0
    assert delta["checkpoint files"].iloc[-1] >= 2  # a checkpoint and _last_checkpoint
    assert delta["planner files"].iloc[-1] < delta["commit files"].iloc[-1]


def test_merge_on_read_as_each_library_reported_it(run):
    mor = run.merge_on_read()
    assert list(mor.index) == list(formats.FORMATS)
    assert mor.loc["labformat", "data files rewritten"] == 0 and mor.loc["labformat", "log or delete files added"] > 0
    for fmt in ("delta-rs", "pyiceberg"):
        assert mor.loc[fmt, "data files rewritten"] > 0 and mor.loc[fmt, "log or delete files added"] == 0
    assert run.deletion_vectors_day["rows copied"] > 0
    assert any("copy-on-write" in note for note in run.notes["pyiceberg"])


def test_the_same_queries_return_the_same_rows_in_every_format(run):
    q = run.queries.set_index(["format", "query"])
    assert run.same_rows() and q.xs("drone and hour", level="query")["rows"].eq(60).all()
    drone = q.xs("drone_id filter", level="query")
    assert (drone["files planned"] == drone["data files"]).all()  # every file holds every drone
    hour = q.xs("one-hour window", level="query")
    assert (hour["files planned"] < hour["data files"]).all() and (q["planning s (median)"] > 0).all()


def test_the_exercise_names_the_format_whose_planner_reads_most(run):
    assert ex.most_planner_files("8.1", "pyiceberg", run).right
    wrong = ex.most_planner_files("8.1", "delta-rs", run)
    assert wrong.right is False and "checkpoint" in wrong.hint
    assert ex.most_planner_files("8.1", None, run).right is None
    commits = pd.DataFrame({"format": list(formats.FORMATS), "commit": [0, 0, 0], "metadata files": [1, 1, 1],
                            "metadata KB": [1.0] * 3, "planner files": [9, 1, 3]})
    assert ex.most_planner_files("8.1", "labformat", formats.ThreeFormats(commits, pd.DataFrame(), {}, {})).right


def test_the_merge_on_read_exercise_counts_the_formats_that_rewrote_nothing(run):
    assert ex.formats_rewriting_nothing("8.2", 1, run).right
    wrong = ex.formats_rewriting_nothing("8.2", 3, run)
    assert wrong.right is False and "library" in wrong.hint
    assert ex.formats_rewriting_nothing("8.2", None, run).right is None
