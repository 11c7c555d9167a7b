"""Notebook 08's run: a short run written by labformat, delta-rs and pyiceberg, their metadata counted after every commit."""

from __future__ import annotations

import pandas as pd
import pytest

from labformat import datasets
from labformat.lab import clustering, exercises as ex, formats
from labformat.lab.lessons import three_formats as rules

pytestmark = pytest.mark.spark

DAYS, INTERVAL, COMPACT_EVERY = 3, 2, 2


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    cached = datasets.generate(spark, datasets.spec("tiny"))
    return formats.three_formats(spark, cached, "formats", DAYS, clustering.drone_and_window(cached), repeats=1,
                                 workdir=tmp_path_factory.mktemp("formats"), checkpoint_interval=INTERVAL,
                                 compact_every=COMPACT_EVERY, batch_drones=1)


def test_every_format_is_counted_after_its_load_and_every_day(run):
    commits = run.commits
    assert list(commits.groupby("format", sort=False).size().items()) == [(f, DAYS + 1) for f in formats.FORMATS]
    assert (commits["metadata files"] > 0).all() and (commits["metadata KB"] > 0).all()
    planner = run.planner()
    assert list(planner.columns) == list(formats.FORMATS) and list(planner.index) == list(range(DAYS + 1))
    # labformat: hoodie.properties and the metadata table's two latest snapshots, every commit.
    assert planner["labformat"].tolist() == [3] * (DAYS + 1)
    assert (run.kept()["labformat"].diff().dropna() >= 3).all()
    assert run.compactions() == [1, 3]  # the load is a delta commit too: every 2nd delta commit compacts
    # Iceberg: the metadata file, the manifest list and the manifests, which pile up.
    assert planner["pyiceberg"].iloc[0] == 3 and (planner["pyiceberg"].diff().dropna() > 0).all()
    # Delta: a checkpoint after versions 1 and 3 (every 2 commits, the load being version 0), a sawtooth.
    assert run.checkpoints() == [1, 3]
    assert planner["delta-rs"].tolist() == [1, 2, 3, 2]
    delta = run.last("delta-rs")
    assert delta["commit files"] == DAYS + 1 and delta["checkpoint files"] >= 3  # two checkpoints, the pointer


def test_the_run_holds_the_notebooks_claims(run):
    planner, kept, mor = run.planner(), run.kept(), run.merge_on_read()
    assert rules.delta_checkpoints_cut_planning(planner["delta-rs"].tolist(), run.checkpoints(),
                                                int(run.last("delta-rs")["commit files"]), INTERVAL)[0]
    assert rules.iceberg_manifests_pile_up(planner["pyiceberg"].tolist())[0]
    assert rules.labformat_planner_flat(planner["labformat"].tolist(), kept["labformat"].tolist())[0]
    assert rules.only_labformat_merges_on_read(mor["data files rewritten"].astype(int).tolist(),
                                               mor["log or delete files added"].astype(int).tolist())[0]


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
    # the history's files hold every drone; a day's new files only the one drone the batches were cut to
    assert (drone["files planned"] <= drone["data files"]).all() and (drone["files planned"] > 0).all()
    hour = q.xs("one-hour window", level="query")
    assert (hour["files planned"] < hour["data files"]).all() and (q["planning s (median)"] > 0).all()


def test_the_days_batches_are_cut_to_the_first_drones(spark, tmp_path):
    cached = datasets.generate(spark, datasets.spec("tiny"))
    cut = formats.small_batches(cached, 2, tmp_path, drones=1)
    import pyarrow.parquet as pq

    day1 = pq.read_table(cut.batch_path(1))
    full = pq.read_table(cached.batch_path(1))
    assert set(day1.column("drone_id").to_pylist()) == {"drone0000"}
    assert 0 < day1.num_rows < full.num_rows and cut.batch_path(3) == cached.batch_path(3)


def test_the_exercises_name_the_format_whose_planner_reads_most_and_count_deltas_files(run):
    assert ex.most_planner_files("8.1", "pyiceberg", run).right
    wrong = ex.most_planner_files("8.1", "delta-rs", run)
    assert wrong.right is False and "checkpoint" in wrong.hint
    assert ex.most_planner_files("8.1", None, run).right is None
    commits = pd.DataFrame({"format": list(formats.FORMATS), "commit": [0, 0, 0], "metadata files": [1, 1, 1],
                            "metadata KB": [1.0] * 3, "planner files": [9, 1, 3]})
    assert ex.most_planner_files("8.1", "labformat", formats.ThreeFormats(commits, pd.DataFrame(), {}, {})).right
    # delta-rs after commit 3: _last_checkpoint, the checkpoint of version 3 and no commit after it
    assert ex.delta_planner_files("8.2", 2, run).right
    every_commit = ex.delta_planner_files("8.2", DAYS + 1, run)
    assert every_commit.right is False and "every commit file" in every_commit.hint
    assert ex.delta_planner_files("8.2", 3, run).right is False
    assert ex.delta_planner_files("8.2", None, run).right is None
