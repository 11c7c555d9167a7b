"""Workshop exercises and notebook helpers: every check says right, wrong (with a hint) or not answered,
computed from the run it is given; the helpers behind the notebooks' numbers."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from labformat.lab import exercises as ex
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
    assert ex.check("9.3", 0.97, 1.0, "", "h", tolerance=0.05).right
    assert ex.check("9.4", "k1", "k1", "", "h").right and not ex.check("9.4", "k2", "k1", "", "h").right


def test_key_range_checks_come_from_the_files_given():
    assert ex.candidate_files("1.1", 1, FILES, "202401151300_drone0000").right
    assert ex.candidate_files("1.1", 3, FILES, "202401151300_drone0000").right is False
    assert ex.smallest_key("202401150000_drone0000", FILES).right
    assert not ex.smallest_key("202401150000_drone0001", FILES).right


def test_helpers_count_overlaps_and_coverage():
    assert ws.max_overlap(FILES) == 1
    nested = pd.DataFrame({"min_key": ["a", "b", "c"], "max_key": ["z", "y", "d"]})
    assert ws.max_overlap(nested) == 3
    assert ws.max_overlap(pd.DataFrame({"min_key": ["a", "c"], "max_key": ["c", "d"]})) == 2  # touching at c
    assert ws.files_covering(FILES, "202401151200_drone0000") == 1
    assert ws.files_overlapping(FILES, "202401151100", "202401151200_drone0000") == 2
    assert ws.files_overlapping(FILES, "2024011700", "2024011800") == 0


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

    monkeypatch.setenv(ws.PRESET_ENV, "tiny")
    monkeypatch.setenv(ws.OUT_ENV, str(tmp_path))
    assert ws.preset() == "tiny"
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
    import labformat as lf
    from labformat import datasets
    from labformat.lab import sweeps

    spec = datasets.spec("tiny")
    workdir = tmp_path_factory.mktemp("exercises")
    bulk, files = sweeps.bulk_insert_sort_modes(spark, spec, ["GLOBAL_SORT"], {"max_file_size": "64KB"},
                                                workdir=workdir)["GLOBAL_SORT"]
    table = lf.Table.open(spark, workdir / "sort-global_sort")
    cached = datasets.generate(spark, spec)
    upsert = table.upsert(datasets.load_batch(spark, cached, 1).coalesce(1), {"max_file_size": "64KB"})
    _, scan = table.query("drone_id = 'drone0001'")
    return {"bulk": bulk, "files": files, "table": table, "upsert": upsert, "scan": scan}


@pytest.mark.spark
def test_each_real_check_is_right_for_the_runs_number_and_wrong_otherwise(run):
    bulk, upsert, table, scan = run["bulk"], run["upsert"], run["table"], run["scan"]
    cases = [
        (lambda a: ex.history_rows(a, bulk), bulk.rows_written),
        (lambda a: ex.base_files("1.2", a, bulk), len(bulk.files)),
        (lambda a: ex.shuffle_parallelism("2.2", a, upsert), upsert.details["shuffle_parallelism"]),
        (lambda a: ex.file_groups("2.1", a, table), len(table.file_slices())),
        (lambda a: ex.files_read("3.2", a, scan), scan.funnel["files_read"]),
    ]
    for checker, truth in cases:
        assert checker(truth).right, checker(truth)
        wrong = checker(truth + 1)
        assert wrong.right is False and "Hint:" in repr(wrong)
        assert checker(None).right is None
    skipped = 1 - scan.funnel["files_read"] / scan.funnel["files_in_snapshot"]
    assert ex.skipped_share("3.2", skipped, scan).right
    assert ex.skipped_share("3.2", skipped + 0.5, scan).right is False
    share = upsert.funnel["after_range_pruning"] / upsert.funnel["files_in_table"]
    assert ex.range_pruning_share("2.3", share, upsert).right
    assert ex.range_pruning_share("2.3", share + 0.2, upsert).right is False
