"""Daily upserts on the drone data: range pruning with monotonic keys, and what random keys do to it."""

from __future__ import annotations

import pytest

from labformat import datasets
from labformat.lab.daily import run_daily_upserts

pytestmark = pytest.mark.spark

# Late corrections off: then a day's updates touch only the previous day, so the funnel is exact.
# Small files off: inserts open new file groups instead of widening old files' key ranges.
OPTIONS = {"max_file_size": "24KB", "small_file_limit": 0}


@pytest.fixture(scope="module")
def monotonic(spark, tmp_path_factory):
    spec = datasets.spec("tiny", late_fraction=0.0, batch_days=3)
    return spec, run_daily_upserts(spark, spec, tmp_path_factory.mktemp("daily") / "mono", "BLOOM", OPTIONS)


def test_range_pruning_leaves_only_the_newest_files(monotonic):
    _, run = monotonic
    for report in run.days:
        funnel = report.funnel
        assert funnel.after_range_pruning < funnel.files_in_snapshot
        assert funnel.matched <= funnel.after_bloom <= funnel.after_range_pruning
        assert report.rows_updated > 0 and report.files_rewritten == funnel.matched
        # Every file the upsert rewrote ends on one day (keys start YYYYMMDD): the previous day,
        # the newest data in the table before this batch.
        rewritten = [f for f in report.files if not f.created]
        assert len({f.prev_max_key[:8] for f in rewritten}) == 1
        table_max_day = max(f.prev_max_key[:8] for f in rewritten)
        older_files = report.funnel.files_in_snapshot - report.funnel.after_range_pruning
        assert older_files > 0 and table_max_day > "20240101"


def test_range_pruning_gets_relatively_better_as_days_accumulate(monotonic):
    _, run = monotonic
    kept = [r.funnel.after_range_pruning / r.funnel.files_in_snapshot for r in run.days]
    assert all(later < earlier for earlier, later in zip(kept, kept[1:])), kept
    grows = [r.funnel.files_in_snapshot for r in run.days]
    assert grows == sorted(grows) and grows[-1] > grows[0]


def test_random_keys_defeat_range_pruning(spark, tmp_path):
    spec = datasets.spec("tiny", key_style="random", late_fraction=0.0, batch_days=1)
    run = run_daily_upserts(spark, spec, tmp_path / "random", "BLOOM", OPTIONS)
    funnel = run.days[0].funnel
    assert funnel.files_in_snapshot >= 5
    assert funnel.after_range_pruning >= 0.9 * funnel.files_in_snapshot, funnel
    # The bloom filters still do their job where the ranges could not: most candidate keys stop
    # there. (Counting files would not show it: a day's updates land in nearly every file.)
    assert funnel.keys_after_bloom * 5 < funnel.keys_after_range_pruning, funnel
    assert funnel.keys_matched <= funnel.keys_after_bloom


def test_day_again_repeats_a_day_on_fresh_copies_and_leaves_the_table_alone(spark, tmp_path):
    import labformat as lf
    from labformat.lab import sweeps

    spec = datasets.spec("tiny", late_fraction=0.0, batch_days=2)
    table = lf.Table.create(spark, tmp_path / "base")
    table.bulk_insert(datasets.load_history(spark, datasets.generate(spark, spec)),
                      {"bulk_insert_sort_mode": "GLOBAL_SORT", "bulk_insert_parallelism": 4})
    instants = [i.time for i in table.timeline()]
    again = sweeps.day_again(table, spec, day=1, options=OPTIONS, repeats=2)
    assert again["run"].tolist() == [1, 2] and (again["day"] == 1).all()
    # The same write on the same table state: the same counts every time.
    for column in ("updated", "inserted", "after_range_pruning", "files_rewritten", "small_files", "record_size"):
        assert again[column].nunique() == 1, column
    assert again["updated"].iloc[0] > 0 and (again["seconds"] > 0).all()
    assert [i.time for i in table.timeline()] == instants
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base"]  # the copies are gone


@pytest.mark.spark
def test_a_tables_first_upsert_sizes_by_the_default_then_the_next_fills_its_small_files(spark, tmp_path):
    """An empty table, days 1 and 2 of `tiny`: day 1 has no commit history, so step 5 takes 1 KB a record
    and step 6 plans max_file_size // 1024 records per new file; day 2 estimates from day 1's commit and
    packs its inserts into day 1's files, all small."""
    from labformat.lab import sweeps

    options = {"max_file_size": 16 * 1024, "small_file_limit": 12 * 1024, "bloom_num_entries": 200}
    first = sweeps.first_upserts(spark, datasets.spec("tiny"), "first", options, workdir=tmp_path).set_index("day")
    day1, day2 = first.loc[1], first.loc[2]
    assert day1.estimate_from == "hoodie.copyonwrite.record.size.estimate" and day1.record_size_estimate == 1024
    assert day1.records_per_new_file_planned == 16 and day1.mean_records_per_new_file <= 16
    assert day1.files_created == -(-day1.inserts // 16) and day1.small_file_inserts == 0
    assert day2.estimate_from == "commit history" and day2.record_size_estimate < 1024
    assert day2.small_files == day1.files_created and day2.small_file_inserts > 0


def test_stale_duplicates_kept_counts_exactly_the_older_versions_a_table_holds(monotonic, spark, tmp_path):
    """0 for the upserted table (the precombine field kept the newest); a bulk insert, which keeps a batch's
    in-batch duplicates, holds every older version of a key within its day, and exactly those count."""
    import labformat as lf
    from labformat.lab import frames as fr

    spec, run = monotonic
    days = run.day_numbers or range(1, len(run.days) + 1)
    assert fr.stale_duplicates_kept(lf.Table.open(spark, run.table_path), spec, days) == 0
    cached = datasets.generate(spark, spec)
    batch = datasets.load_batch(spark, cached, 1)
    rows = batch.select(datasets.RECORD_KEY, datasets.PRECOMBINE_FIELD).toPandas()
    newest = rows.groupby(datasets.RECORD_KEY)[datasets.PRECOMBINE_FIELD].transform("max")
    expected = int((rows[datasets.PRECOMBINE_FIELD] < newest).sum())
    assert expected > 0
    raw = lf.Table.create(spark, tmp_path / "raw", record_key=datasets.RECORD_KEY,
                          precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None)
    raw.bulk_insert(batch)
    assert fr.stale_duplicates_kept(raw, spec, [1]) == expected
    assert fr.stale_duplicates_kept(raw, spec, [1, 2]) == expected  # day 2's batch adds its own, not in this table
