"""Table services: cleaning (`clean`), checked against labformat's own read and hudi-rs's.

Each table is tiny and its history is in the test's docstring: W1 is the bulk insert, W2... the
writes after it; X and Y are the two file groups of a one-file-per-day table.
"""

from __future__ import annotations

import json

import pytest

import labformat as lf
from labformat.errors import CleanedInstantError, ConfigError, InstantNotFoundError
from tests.helpers import snapshot, telemetry, tree
from tests.test_merge_on_read import MOR, assert_agrees_with_hudi, corrections, hudi_read, values

pytestmark = pytest.mark.spark



def base_files(path) -> list:
    """The table's base files (the metadata table's parquet files under .hoodie are not)."""
    return [p for p in path.rglob("*.parquet") if ".hoodie" not in p.relative_to(path).parts]


def key_of_day(t: lf.Table, day: str, n: int = 0) -> str:
    pdf = snapshot(t.read())
    return sorted(pdf[pdf["day"] == day]["record_key"])[n]


def four_writes(spark, t: lf.Table) -> tuple[list[str], str, str]:
    """W1 bulk insert (X: day 15, Y: day 16), W2 and W3 update a key of X, W4 one of Y."""
    instants = [t.bulk_insert(telemetry(spark, 40, partitions=1)).instant]
    x_key, y_key = key_of_day(t, "2024-01-15"), key_of_day(t, "2024-01-16")
    for n, key in enumerate([x_key, x_key, y_key]):
        instants.append(t.upsert(corrections(spark, [key], 10.0 + n, seconds=10_000 + n)).instant)
    return instants, x_key, y_key


# ---- cleaning -----------------------------------------------------------------------------------

def test_clean_keeps_the_slices_of_the_retained_commits_and_deletes_older_ones(spark, tmp_path):
    """COW W1-W4, clean retaining 2 commits: X's slices of W1 and W2 go, Y's of W1 stays (W3 reads it);
    a second clean finds nothing, bad options change nothing; retaining 1 then deletes Y's W1 slice too."""
    path = tmp_path / "cow"
    t = lf.Table.create(spark, path, partition_field="day")
    (w1, w2, w3, w4), x_key, y_key = four_writes(spark, t)
    expected = values(snapshot(t.read()))
    as_of_w3 = values(snapshot(t.read(as_of=w3)))
    all_files = {p.relative_to(path).as_posix(): p.stat().st_size for p in base_files(path)}
    assert len(all_files) == 5
    report = t.clean({"cleaner_commits_retained": 2})
    gone = sorted(f for f in all_files if not (path / f).exists())
    assert len(gone) == 2 and all(w1 in f or w2 in f for f in gone)
    assert report.details["files_deleted"] == 2 and report.details["file_slices_deleted"] == 2
    assert report.details["bytes_freed"] == sum(all_files[f] for f in gone)
    assert report.details["earliest_commit_to_retain"] == w3 and report.seconds > 0
    # Hudi's three timeline files; the plan names the files, the completed clean the deleted ones.
    for suffix in ("clean.requested", "clean.inflight", "clean"):
        assert (path / f".hoodie/{report.instant}.{suffix}").exists()
    plan = json.loads((path / f".hoodie/{report.instant}.clean.requested").read_text())
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["earliestInstantToRetain"]["timestamp"] == w3
    planned = [e["filePath"] for entries in plan["filePathsToBeDeletedPerPartition"].values() for e in entries]
    assert sorted(p.rsplit("/", 1)[-1] for p in planned) == sorted(f.rsplit("/", 1)[-1] for f in gone)
    body = json.loads((path / f".hoodie/{report.instant}.clean").read_text())
    assert body["totalFilesDeleted"] == 2 and body["earliestCommitToRetain"] == w3
    assert [i.action.value for i in t.timeline()][-1] == "clean"
    # The latest snapshot and the retained one read as before, through both readers.
    assert_agrees_with_hudi(t, path, expected)
    assert_agrees_with_hudi(t, path, as_of_w3, as_of=w3)
    for older in (w1, w2):
        with pytest.raises(CleanedInstantError, match=f"{older}.*clean {report.instant}.*{w3}"):
            t.read(as_of=older)
        with pytest.raises(InstantNotFoundError):  # CleanedInstantError is one
            t.file_slices(as_of=older)
    assert t.clean({"cleaner_commits_retained": 2}).instant is None
    # Bad options: a clear ConfigError, the table exactly as it was.
    before = tree(path)
    with pytest.raises(ConfigError, match="cleaner.commits.retained"):
        t.clean({"hoodie.cleaner.commits.retained": 0})
    with pytest.raises(ConfigError, match="KEEP_LATEST_COMMITS"):
        t.clean({"cleaner_policy": "KEEP_NOTHING"})
    assert tree(path) == before
    last = t.clean({"hoodie.cleaner.commits.retained": "1"})
    assert last.details["files_deleted"] == 1 and len(list(base_files(path))) == 2
    with pytest.raises(CleanedInstantError):
        t.read(as_of=w3)
    assert_agrees_with_hudi(t, path, expected)
    assert_agrees_with_hudi(t, path, expected, as_of=w4)


def test_keep_latest_file_versions_keeps_the_newest_slices_of_each_file_group(spark, tmp_path):
    """COW W1-W4, KEEP_LATEST_FILE_VERSIONS with 1 version: 3 of the 5 base files go; only W4 stays readable."""
    path = tmp_path / "cow"
    t = lf.Table.create(spark, path, partition_field="day")
    (w1, w2, w3, w4), _, _ = four_writes(spark, t)
    expected = values(snapshot(t.read()))
    report = t.clean({"cleaner_policy": "KEEP_LATEST_FILE_VERSIONS", "cleaner_fileversions_retained": 1})
    assert report.details["files_deleted"] == 3 and len(list(base_files(path))) == 2
    assert report.details["earliest_readable_instant"] == w4
    with pytest.raises(CleanedInstantError):
        t.read(as_of=w3)
    assert_agrees_with_hudi(t, path, expected)


def test_clean_on_merge_on_read_deletes_a_compacted_slice_with_its_log_files(spark, tmp_path):
    """MOR W1 bulk insert, W2 update in X (a log), compaction, W3 update in X (a log of the new slice),
    clean retaining 1: X's first slice goes with its log; Y's only slice and the new one stay."""
    path = tmp_path / "mor"
    t = lf.Table.create(spark, path, partition_field="day", table_type=MOR)
    w1 = t.bulk_insert(telemetry(spark, 40, partitions=1)).instant
    key = key_of_day(t, "2024-01-15")
    t.upsert(corrections(spark, [key], 1.0))
    compaction = t.compact().instant
    t.upsert(corrections(spark, [key], 2.0, seconds=10_001))
    expected = values(snapshot(t.read()))
    first_log = [p for p in path.rglob(f".*_{w1}.log.*")]
    assert len(first_log) == 1
    report = t.clean({"cleaner_commits_retained": 1})
    assert report.details["files_deleted"] == 2 and report.details["file_slices_deleted"] == 1
    assert not first_log[0].exists() and len(list(base_files(path))) == 2
    assert_agrees_with_hudi(t, path, expected)
    ro = values(snapshot(t.read(options={"query_type": "READ_OPTIMIZED"})))
    assert values(hudi_read(path, read_optimized=True)) == ro
    with pytest.raises(CleanedInstantError):
        t.read(as_of=compaction)
