"""Unit tests of upsert steps 4-6: small files, the average record size, bin packing of inserts."""

from hypothesis import given, settings
from hypothesis import strategies as st

from labformat.model.commit import CommitMetadata, WriteStat
from labformat.model.file_group import FileSlice
from labformat.write.sizing import assign_inserts, average_record_size, small_files

MB = 1024 * 1024


def slice_of(file_id: str, size: int, partition: str = "") -> FileSlice:
    return FileSlice(partition, file_id, "20240101000000000", f"{file_id}_0-1-0_20240101000000000.parquet", size, 1)


def commit(bytes_written: int, records: int) -> CommitMetadata:
    return CommitMetadata("UPSERT", (WriteStat("", "f", "f.parquet", num_writes=records,
                                               total_write_bytes=bytes_written),))


def test_small_files_are_those_below_the_limit_smallest_first():
    slices = [slice_of("a", 5 * MB), slice_of("b", 1 * MB), slice_of("c", 100 * MB)]
    assert [s.file_id for s in small_files(slices, 10 * MB)] == ["b", "a"]
    assert small_files(slices, 0) == []


def test_record_size_comes_from_the_newest_big_enough_commit():
    history = [commit(200 * MB, 2_000_000), commit(150 * MB, 1_000_000), commit(1 * MB, 100)]
    size, source = average_record_size(history, threshold=1.0, small_file_limit=100 * MB, default=1024)
    assert size == 158 and source == "commit history"  # 150 MB / 1M records; the 1 MB commit is too small
    size, source = average_record_size([commit(1 * MB, 10)], 1.0, 100 * MB, 1024)
    assert (size, source) == (1024, "hoodie.copyonwrite.record.size.estimate")


def test_inserts_fill_small_files_then_open_new_file_groups():
    small = {"p": [slice_of("s1", 90 * MB, "p"), slice_of("s2", 60 * MB, "p")]}
    buckets = assign_inserts({"p": 100_000}, small, record_size=1024, max_file_size=120 * MB)
    assert [(b.file_id, b.records) for b in buckets[:2]] == [("s1", 30720), ("s2", 61440)]
    new = buckets[2:]
    assert all(b.file_id is None for b in new) and sum(b.records for b in new) == 100_000 - 30720 - 61440
    assert abs(sum(b.weight for b in buckets) - 1.0) < 1e-9


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 10**6), max_size=3),
       st.integers(1, 4096), st.integers(64 * 1024, 256 * MB))
def test_every_insert_gets_exactly_one_place_and_no_new_group_overflows(inserts, record_size, max_size):
    buckets = assign_inserts(inserts, {}, record_size, max_size)
    for partition, count in inserts.items():
        mine = [b for b in buckets if b.partition_path == partition]
        assert sum(b.records for b in mine) == count
        assert all(b.records <= max(1, max_size // record_size) for b in mine)


def test_write_tasks_start_costliest_first_counting_incoming_rows_above_carried_over_ones():
    from labformat.config import Scope, resolve
    from labformat.write.write_plan import INCOMING_ROW_COST, Profile, ProfileRow
    from labformat.write.write_plan import assign_inserts as plan_write

    big, mid, small = slice_of("big", 16 * MB), slice_of("mid", 12 * MB), slice_of("small", 2 * MB)
    # 300k inserts at 40 bytes each outweigh the biggest base file once weighted as incoming rows.
    profile = Profile([ProfileRow("", "big", None, 100), ProfileRow("", "mid", None, 50),
                       ProfileRow("", None, None, 300_000)], rows_in=300_150, records=300_150)
    cfg = resolve({"max_file_size": "64MB", "small_file_limit": "8MB"}, [Scope.WRITE])
    plan = plan_write(profile, [big, mid, small], {"": [small]}, 40, cfg, "BLOOM", "upsert")
    assert 300_000 * 40 * INCOMING_ROW_COST > big.size_bytes
    assert [t.file_id for t in plan.targets] == ["small", "big", "mid"]
    # Routes follow the targets' new order.
    assert sorted(plan.update_routes) == [("", "big", 1), ("", "mid", 2)]
    assert plan.insert_routes == [("", 0.0, 2.0, 0)]
    # Without inserts the order is by base file size, as before.
    updates_only = Profile(profile.rows[:2], rows_in=150, records=150)
    plan = plan_write(updates_only, [big, mid, small], {"": [small]}, 40, cfg, "BLOOM", "upsert")
    assert [t.file_id for t in plan.targets] == ["big", "mid"]


def test_write_tasks_of_equal_cost_keep_the_insert_buckets_order():
    """Ties never follow the new file groups' random ids: the task index goes into every row's seqno."""
    from labformat.config import Scope, resolve
    from labformat.write.write_plan import Profile, ProfileRow
    from labformat.write.write_plan import assign_inserts as plan_write

    cfg = resolve({"max_file_size": "1MB", "small_file_limit": "0"}, [Scope.WRITE])
    profile = Profile([ProfileRow("", None, None, 4000)], rows_in=4000, records=4000)
    orders = set()
    for _ in range(10):  # four new file groups of 1,000 records each, with fresh random ids every time
        plan = plan_write(profile, [], {}, 1024, cfg, "BLOOM", "upsert")
        assert [t for *_, t in plan.insert_routes] == [0, 1, 2, 3]
        orders.add(tuple(lo for _, lo, _, _ in plan.insert_routes))
    assert len(orders) == 1


def test_record_size_leaves_out_the_bloom_filters_in_the_footers():
    """A filter is sized by bloom_num_entries whatever the file holds: per-file overhead, not per-record."""
    from labformat.model.commit import BLOOM_FILTER_BYTES_KEY

    with_blooms = CommitMetadata("UPSERT", (WriteStat("", "f", "f.parquet", num_writes=1_000,
                                                      total_write_bytes=50_000 + 430_000),),
                                 extra_metadata={BLOOM_FILTER_BYTES_KEY: "430000"})
    assert average_record_size([with_blooms], 1.0, 0, 1024) == (50, "commit history")
    assert average_record_size([commit(480_000, 1_000)], 1.0, 0, 1024) == (480, "commit history")  # not recorded
