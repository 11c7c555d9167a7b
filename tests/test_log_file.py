"""Hudi log files: names, block layout, data/delete/rollback blocks, and a hand-built merge-on-read table read by hudi-rs.

No Spark: blocks are built with pyarrow and read back by labformat's reader and by Apache
Hudi's own reader (hudi-rs, the `hudi` package), which is the reference for the layout.
"""

from __future__ import annotations

import datetime as dt
import json
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labformat.fileformat import log_file as L
from labformat.model.enums import MergeMode as L_MODES
from labformat.model.log_file import LogFile
from labformat.read.merge_on_read import latest_records, merge_file_slice
from labformat.schema import META_COLUMNS
from labformat.storage import Storage

UTC = dt.timezone.utc
SCHEMA = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS]
                   + [("k", pa.string()), ("p", pa.string()), ("u", pa.timestamp("us", tz="UTC")), ("v", pa.float64())])
AVRO_FIELDS = ([{"name": c, "type": ["null", "string"], "default": None} for c in META_COLUMNS + ("k", "p")]
               + [{"name": "u", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
                  {"name": "v", "type": ["null", "double"], "default": None}])
WRITER_SCHEMA = json.dumps({"type": "record", "name": "t_record", "namespace": "hoodie.t", "fields": AVRO_FIELDS})
I1, I2, I3, I4 = "20240101000000001", "20240101000000002", "20240101000000003", "20240101000000004"


def test_log_file_names_round_trip_in_hudis_layout():
    name = ".54e9a5e9-ee5d-4ed2-acee-720b5810d380-0_20250109233025121.log.1_0-51-115"
    log = LogFile.parse(name)
    assert (log.file_id, log.base_instant_time, log.version, log.write_token) == (
        "54e9a5e9-ee5d-4ed2-acee-720b5810d380-0", "20250109233025121", 1, "0-51-115")
    assert log.name == name and LogFile.parse(f"day=1/{name}") == log
    assert LogFile(log.file_id, log.base_instant_time, 2, "0-1-0") > log  # versions order a slice's logs
    for bad in ("54e9_20250109233025121.log.1_0-1-0", ".a_20250109233025121.log.x_0-1-0",
                ".a_20250109233025121.parquet.1_0-1-0", ".a_2025.log.1_0-1-0", "a_0-1-0_20250109233025121.parquet"):
        assert LogFile.try_parse(bad) is None, bad
    with pytest.raises(ValueError):
        LogFile("a_b", I1, 1, "0-1-0")  # readers split the name on '_'


def rows(*records):
    """Log or base rows: (key, instant, seq, u seconds, v)."""
    return pa.Table.from_pylist([
        dict(zip(META_COLUMNS, [t, f"{t}_0_{n}", k, "p1", "f"]), k=k, p="p1",
             u=dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=u), v=v)
        for n, (k, t, u, v) in enumerate(records)], schema=SCHEMA)


def test_a_block_is_laid_out_as_hudis_log_format_version_1():
    block = L.delete_block(["k1"], "p1", [0], pa.int64(), I2)
    raw = block.to_bytes()
    assert raw[:6] == b"#HUDI#"
    (length,) = struct.unpack(">q", raw[6:14])
    assert length == len(raw) - 14  # everything after the length field, the reverse pointer included
    assert struct.unpack(">ii", raw[14:22]) == (1, 1)  # log format version 1, block type 1 (delete)
    (reverse,) = struct.unpack(">q", raw[-8:])
    assert reverse == len(raw) - 8  # from the magic up to the reverse pointer
    # header: one entry, key 0 (INSTANT_TIME), 17 bytes
    assert struct.unpack(">iii", raw[22:34]) == (1, 0, 17) and raw[34:51] == I2.encode()


def test_data_delete_and_rollback_blocks_read_back():
    data = rows(("k1", I2, 5, 1.5), ("k2", I2, 6, 2.5))
    blocks = L.read_blocks(L.avro_data_block(data, WRITER_SCHEMA, I2).to_bytes()
                           + L.delete_block(["k3", "k4"], "p1", [0, 0], pa.int64(), I3).to_bytes()
                           + L.rollback_block(I4, I3).to_bytes())
    assert [b.block_type for b in blocks] == [L.BlockType.AVRO_DATA, L.BlockType.DELETE, L.BlockType.COMMAND]
    assert L.data_block_records(blocks[0], SCHEMA).equals(data)
    assert L.deleted_records(blocks[1]) == [("k3", "p1", 0), ("k4", "p1", 0)]
    assert blocks[2].is_rollback and blocks[2].header[L.HeaderKey.TARGET_INSTANT_TIME] == I3
    # The rollback block cancels the delete block of I3: only the data block is live.
    assert [b.instant_time for b in L.live_blocks(blocks)] == [I2]
    assert L.block_keys(L.live_blocks(blocks)) == {"k1", "k2"}
    with pytest.raises(L.LogFormatError):
        L.read_blocks(blocks[0].to_bytes()[:-20])  # cut short
    with pytest.raises(L.LogFormatError):
        L.read_blocks(b"#HUDX#" + b"\0" * 30)


def _merged(mode, base, logs, deletes):
    """latest_records over base rows (block 0) and log rows/deletes given as (instant, block) positions."""
    records = pa.concat_tables([base, *[t for _, t in logs]])
    position = pa.array([f"{I1}000000"] * base.num_rows
                        + [f"{at}{n:06d}" for n, (at, t) in enumerate(logs, start=1) for _ in range(t.num_rows)])
    keys = [k for k, _, _ in deletes]
    at = [f"{instant}{n:06d}" for _, instant, n in deletes]
    out = latest_records(records, position, pa.array(keys, pa.string()), pa.array(at, pa.string()), "u", mode,
                         base_rows=base.num_rows).to_pydict()
    return dict(zip(out["k"], out["v"]))


def test_commit_time_ordering_lets_the_later_instant_win_and_a_reinsert_after_a_delete_stay():
    """a: a later update wins; b: a later update with a lower precombine value wins too (as copy-on-write
    replaces); c: deleted last; d: re-inserted after its delete with a lower precombine value: it stays."""
    base = rows(("a", I1, 0, 0.0), ("b", I1, 10, 0.0), ("c", I1, 0, 0.0), ("d", I1, 9, 0.0))
    logs = [(I2, rows(("a", I2, 1, 1.0), ("b", I2, 5, 1.0), ("c", I2, 0, 1.0))), (I4, rows(("d", I4, 3, 4.0)))]
    got = _merged(L_MODES.COMMIT_TIME_ORDERING, base, logs, [("d", I3, 2), ("c", I3, 2)])
    assert got == {"a": 1.0, "b": 1.0, "d": 4.0}


def test_event_time_ordering_folds_the_logs_then_meets_the_base_record_as_hudi_rs_does():
    """b: the stored record's higher precombine value wins over a later update; d: deleted, then
    re-inserted with a lower precombine value than its base record, which comes back (hudi-rs 0.5)."""
    base = rows(("a", I1, 0, 0.0), ("b", I1, 10, 0.0), ("c", I1, 0, 0.0), ("d", I1, 9, 0.0))
    logs = [(I2, rows(("a", I2, 1, 1.0), ("b", I2, 5, 1.0), ("c", I2, 0, 1.0))), (I4, rows(("d", I4, 3, 4.0)))]
    got = _merged(L_MODES.EVENT_TIME_ORDERING, base, logs, [("d", I3, 2), ("c", I3, 2)])
    assert got == {"a": 1.0, "b": 0.0, "d": 0.0}


def build_table(root) -> dict[str, str]:
    """A hand-built merge-on-read table: a base file of 4 records, a delta commit updating two
    (one with a lower precombine value), a delta commit deleting two, and a failed delta commit's
    log file rolled back by a rollback block. Returns {record key: value} expected."""
    storage = Storage(root)
    storage.makedirs(".hoodie")
    storage.makedirs("p1")
    props = {"hoodie.table.name": "t", "hoodie.table.type": "MERGE_ON_READ", "hoodie.table.version": "6",
             "hoodie.timeline.layout.version": "1", "hoodie.table.recordkey.fields": "k",
             "hoodie.table.precombine.field": "u", "hoodie.table.partition.fields": "p",
             "hoodie.table.base.file.format": "PARQUET", "hoodie.populate.meta.fields": "true",
             "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator"}
    storage.write_bytes(".hoodie/hoodie.properties", "\n".join(f"{k}={v}" for k, v in props.items()).encode())
    base = f"fg-0_0-1-0_{I1}.parquet"
    pq.write_table(rows(("k0", I1, 0, 0.0), ("k1", I1, 1, 1.0), ("k2", I1, 2, 2.0), ("k3", I1, 3, 3.0)),
                   storage.full_path(f"p1/{base}"))
    data_schema = json.dumps({"type": "record", "name": "t_record", "namespace": "hoodie.t", "fields": AVRO_FIELDS[5:]})

    def commit(instant, path, logs, op):
        stat = {"fileId": "fg-0", "path": path, "prevCommit": I1 if logs else "null", "partitionPath": "p1",
                "numWrites": 1, "fileSizeInBytes": 1}
        if logs:
            stat.update(baseFile=base, logFiles=logs, logVersion=1, logOffset=0)
        body = {"partitionToWriteStats": {"p1": [stat]}, "compacted": False,
                "extraMetadata": {"schema": data_schema}, "operationType": op}
        storage.write_bytes(f".hoodie/{instant}.deltacommit.requested", b"")
        storage.write_bytes(f".hoodie/{instant}.deltacommit.inflight", b"")
        storage.write_bytes(f".hoodie/{instant}.deltacommit", json.dumps(body).encode())

    commit(I1, f"p1/{base}", None, "UPSERT")
    log1, log2, log3, log4 = (LogFile("fg-0", I1, v, f"0-{v}-0") for v in (1, 2, 3, 4))
    storage.write_bytes(f"p1/{log1.name}", L.avro_data_block(
        rows(("k1", I2, 10, 10.0), ("k2", I2, 0, 20.0)), WRITER_SCHEMA, I2).to_bytes())
    commit(I2, f"p1/{log1.name}", [log1.name], "UPSERT")
    storage.write_bytes(f"p1/{log2.name}", L.delete_block(["k3", "k1"], "p1", [0, 0], pa.int64(), I3).to_bytes())
    commit(I3, f"p1/{log2.name}", [log2.name], "DELETE")
    # A writer that failed at I4 left a log file; the rollback (I5) appends a rollback block naming it.
    storage.write_bytes(f"p1/{log3.name}", L.avro_data_block(rows(("k0", I4, 50, 99.0)), WRITER_SCHEMA, I4).to_bytes())
    storage.write_bytes(f"p1/{log4.name}", L.rollback_block("20240101000000005", I4).to_bytes())
    storage.write_bytes(".hoodie/20240101000000005.rollback", b"{}")
    # k1 updated then deleted; k2's update had a lower precombine value; k3 deleted; k0's update rolled back.
    return {"k0": 0.0, "k2": 2.0}, storage, base, [log1.name, log2.name, log3.name, log4.name]


def test_hudi_rs_and_labformat_merge_a_hand_built_merge_on_read_table_alike(tmp_path):
    import hudi

    expected, storage, base, logs = build_table(tmp_path / "t")
    theirs = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(str(tmp_path / "t")).build()
                                   .read(hudi.HudiReadOptions()))
    assert dict(zip(theirs.column("k").to_pylist(), theirs.column("v").to_pylist())) == expected
    # The table names no payload class: event-time ordering, as hudi-rs infers it.
    ours = merge_file_slice(storage, f"p1/{base}", [f"p1/{n}" for n in logs], "u", L_MODES.EVENT_TIME_ORDERING)
    assert dict(zip(ours.column("k").to_pylist(), ours.column("v").to_pylist())) == expected


def test_bloom_exact_check_finds_keys_only_a_slices_log_files_hold(tmp_path):
    """The BLOOM index's per-file check on a merge-on-read slice: the base file's filter, and the keys its
    log files hold (k9 is in a log only; k7 nowhere); a key in a rolled-back block does not count."""
    from labformat.fileformat.bloom_filter import BloomSpec
    from labformat.helper_columns import FILE_ID, KEY, PART
    from labformat.index.bloom import check_file

    expected, storage, base, logs = build_table(tmp_path / "t")
    storage.write_bytes(f"p1/{LogFile('fg-0', I1, 5, '0-9-0').name}", L.avro_data_block(
        rows(("k9", "20240101000000006", 1, 9.0)), WRITER_SCHEMA, "20240101000000006").to_bytes())
    logs = [f"p1/{n}" for n in logs] + [f"p1/{LogFile('fg-0', I1, 5, '0-9-0').name}"]
    bloom = ("SIMPLE", BloomSpec("SIMPLE", 100, 1e-9).build(pa.array(["k0", "k1", "k2", "k3"])).to_base64())
    probe = ["k1", "k9", "k7", "k0"]
    candidates = pa.table({PART: ["p1"] * 4, KEY: probe, FILE_ID: ["fg-0"] * 4})
    out = check_file(candidates, str(tmp_path / "t"), f"p1/{base}", {f"p1/{base}": bloom}, {f"p1/{base}": logs})
    found = sorted(k for k in out.column(KEY).to_pylist() if k is not None)
    assert found == ["k0", "k1", "k9"]
    # Without its logs the slice's base file alone knows k0 and k1 only.
    out = check_file(candidates, str(tmp_path / "t"), f"p1/{base}", {f"p1/{base}": bloom})
    assert sorted(k for k in out.column(KEY).to_pylist() if k is not None) == ["k0", "k1"]
