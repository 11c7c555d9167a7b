"""Unit tests of the pure model: instant and base-file names round-trip; commit JSON keeps Hudi's shape."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labformat.model.base_file import BaseFile, new_file_id, write_token
from labformat.model.commit import CommitMetadata, WriteStat
from labformat.model.file_group import FileGroup, FileSlice
from labformat.model.instant import Action, Instant, State, next_instant_time, parse_instant_time

times = st.datetimes(min_value=__import__("datetime").datetime(2000, 1, 1),
                     max_value=__import__("datetime").datetime(2099, 1, 1)).map(
    lambda d: d.strftime("%Y%m%d%H%M%S%f")[:17])


@given(times, st.sampled_from(list(Action)), st.sampled_from(list(State)))
def test_instant_file_name_round_trips(time, action, state):
    instant = Instant(time, action, state)
    if action is Action.COMPACTION and state is State.COMPLETED:
        # A compaction completes as a commit (Hudi's layout): its completed file is `<time>.commit`.
        assert Instant.parse(instant.file_name) == Instant(time, Action.COMMIT, state)
    else:
        assert Instant.parse(instant.file_name) == instant


def test_instant_file_names_follow_hudi_layout():
    t = "20240115093000123"
    assert Instant(t, Action.COMMIT, State.REQUESTED).file_name == f"{t}.commit.requested"
    assert Instant(t, Action.COMMIT, State.INFLIGHT).file_name == f"{t}.inflight"
    assert Instant(t, Action.COMMIT, State.COMPLETED).file_name == f"{t}.commit"
    assert Instant(t, Action.REPLACE_COMMIT, State.INFLIGHT).file_name == f"{t}.replacecommit.inflight"
    assert Instant(t, Action.ROLLBACK, State.COMPLETED).file_name == f"{t}.rollback"
    assert Instant(t, Action.DELTA_COMMIT, State.INFLIGHT).file_name == f"{t}.deltacommit.inflight"
    assert Instant(t, Action.DELTA_COMMIT, State.COMPLETED).file_name == f"{t}.deltacommit"
    assert Instant(t, Action.COMPACTION, State.REQUESTED).file_name == f"{t}.compaction.requested"
    assert Instant(t, Action.COMPACTION, State.COMPLETED).file_name == f"{t}.commit"


@pytest.mark.parametrize("name", ["hoodie.properties", "2024.commit", "20240115093000123.clean.bogus",
                                  "20240115093000123.unknownaction", "metadata"])
def test_non_instant_files_are_ignored(name):
    assert Instant.parse(name) is None


def test_instant_time_must_be_17_digits():
    with pytest.raises(ValueError, match="17 digits"):
        Instant("2024", Action.COMMIT, State.COMPLETED)


def test_next_instant_time_is_always_later():
    previous = "29991231235959999"  # in the future: the clock alone would go backwards
    assert next_instant_time(previous) > previous
    t1 = next_instant_time(None)
    t2 = next_instant_time(t1)
    assert t2 > t1 and len(t2) == 17
    parse_instant_time(t2)


token_part = st.from_regex(r"[A-Za-z0-9-]{1,40}", fullmatch=True)


@given(token_part, token_part, times)
def test_base_file_name_round_trips(file_id, token, time):
    base = BaseFile(file_id, token, time)
    assert BaseFile.parse(base.name) == base
    assert BaseFile.parse(f"part=1/{base.name}") == base


@pytest.mark.parametrize("file_id,token", [("a_b", "0-1-0"), ("abc", "0_1_0"), ("", "0-1-0")])
def test_base_file_parts_may_not_hold_underscores(file_id, token):
    with pytest.raises(ValueError):
        BaseFile(file_id, token, "20240115093000123")


def test_base_file_parse_rejects_other_files():
    for name in ["x.parquet", "a_b_c_d.parquet", "f_0-1-0_20240115093000123.orc"]:
        assert BaseFile.try_parse(name) is None


def test_new_file_ids_are_unique_and_valid():
    ids = {new_file_id() for _ in range(100)}
    assert len(ids) == 100
    for fid in ids:
        BaseFile(fid, write_token(3, 7, 0), "20240115093000123")
    assert new_file_id("00000007").startswith("00000007-")


def test_commit_metadata_round_trips_in_hudi_shape():
    stats = (
        WriteStat("2024-01-15", "f1-0", "2024-01-15/f1-0_0-1-0_20240115093000123.parquet", num_writes=10,
                  num_inserts=10, file_size_bytes=1234, total_write_bytes=1234),
        WriteStat("2024-01-16", "f2-0", "2024-01-16/f2-0_1-1-0_20240115093000123.parquet", prev_commit="20240101000000000",
                  num_writes=5, num_update_writes=2),
    )
    meta = CommitMetadata("UPSERT", stats, {"schema": "{}"}, {"2024-01-15": ("old-0",)})
    body = json.loads(meta.to_json())
    assert set(body["partitionToWriteStats"]) == {"2024-01-15", "2024-01-16"}
    first = body["partitionToWriteStats"]["2024-01-15"][0]
    for key in ("fileId", "path", "prevCommit", "numWrites", "numInserts", "numUpdateWrites", "numDeletes",
                "fileSizeInBytes", "partitionPath"):
        assert key in first
    assert first["prevCommit"] == "null"
    assert body["operationType"] == "UPSERT" and body["extraMetadata"]["schema"] == "{}"
    assert CommitMetadata.from_json(meta.to_json()) == meta


@pytest.mark.parametrize("text", ["", "{not json", "[]", '{"operationType": "UPSERT"}'])
def test_commit_metadata_rejects_garbage(text):
    with pytest.raises(ValueError):
        CommitMetadata.from_json(text)


def test_file_group_latest_slice_as_of():
    group = FileGroup("", "f-0")
    for t in ("20240101000000000", "20240102000000000", "20240103000000000"):
        group.add(FileSlice("", "f-0", t, f"f-0_0-1-0_{t}.parquet"))
    assert group.latest_slice().base_instant_time == "20240103000000000"
    assert group.latest_slice("20240102120000000").base_instant_time == "20240102000000000"
    assert group.latest_slice("20231231000000000") is None


@given(st.permutations(range(1, 13)))
def test_a_slices_log_files_are_kept_in_version_order_whatever_order_they_are_added_in(versions):
    """Versions 1-12 added in any order (10 sorts after 9, not after 1), one of them twice: each log
    once, by version; the slice is keyed by its base file only if every log said so."""
    group = FileGroup("p", "f-0")
    group.add(FileSlice("p", "f-0", "20240115090000000", "p/f-0_0-1-0_20240115090000000.parquet"))
    name = "p/.f-0_20240115090000000.log.{}_0-1-0"
    for v in versions:
        group.add_log(name.format(v), 10, keys_in_base=v != 7)
    group.add_log(name.format(versions[0]), 10, keys_in_base=True)
    latest = group.latest_slice()
    assert latest.log_paths == tuple(name.format(v) for v in range(1, 13))
    assert latest.has_logs and not latest.keyed_by_base_file
