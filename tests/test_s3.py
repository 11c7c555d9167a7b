"""Tables on S3 (a local SeaweedFS server): every operation, commits by conditional PUTs, hudi-rs reading the result."""

from __future__ import annotations

import uuid

import pytest
from pyspark.sql import functions as F

import labformat as lf
from labformat.errors import ConfigError, ConcurrentWriteError, LabformatError, StorageError
from labformat.lock import LOCK_PATH, LockOwner, TableLock
from labformat.storage import S3Storage, Storage, TableUri, s3_options
from tests.helpers import assert_same_rows, hudi_snapshot, snapshot, telemetry

COLUMNS = ["record_key", "drone_id", "day", "battery_pct", "signal_dbm"]


@pytest.fixture
def uri(s3_server):
    return s3_server.uri(f"t-{uuid.uuid4().hex[:8]}")


# ---- options ------------------------------------------------------------------------------------


def test_storage_options_take_delta_rs_keys_any_case_over_the_environment():
    env = {"AWS_ACCESS_KEY_ID": "env-key", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_DEFAULT_REGION": "eu-west-1"}
    got = s3_options({"AWS_ACCESS_KEY_ID": "given", "aws_endpoint": "http://127.0.0.1:1", "Aws_Allow_Http": True},
                     environ=env)
    assert got == {"aws_access_key_id": "given", "aws_endpoint_url": "http://127.0.0.1:1", "aws_allow_http": "True",
                   "aws_secret_access_key": "env-secret", "aws_region": "eu-west-1"}
    with pytest.raises(ConfigError, match="unknown storage option 'aws_bucket_typo'"):
        s3_options({"aws_bucket_typo": "x"}, environ={})
    with pytest.raises(ConfigError, match="storage_options apply to s3:// tables"):
        Storage("/tmp/somewhere", {"aws_region": "x"})
    with pytest.raises(ConfigError, match="aws_allow_http"):
        Storage("s3://b/t", {"aws_endpoint_url": "http://127.0.0.1:1"})
    with pytest.raises(ConfigError, match="aws_allow_http='maybe': expected true or false"):
        Storage("s3://b/t", {"aws_endpoint_url": "http://127.0.0.1:1", "aws_allow_http": "maybe"})


def test_s3a_is_a_spelling_of_s3_and_the_uri_carries_its_options_into_tasks(s3_server):
    storage = Storage("s3a://lab/x/", s3_server.storage_options)
    assert storage.base_uri == "s3://lab/x" and isinstance(storage.base_uri, TableUri)
    import pickle

    shipped = pickle.loads(pickle.dumps(storage.base_uri))  # what a Spark task receives
    assert Storage(shipped).storage_options() == storage.storage_options() != {}


# ---- the commit protocol's primitives ----------------------------------------------------------------


def test_conditional_puts_create_once_and_take_over_only_what_was_read(s3_server, uri):
    storage = Storage(uri, s3_server.storage_options)
    assert storage.honours_conditional_writes()
    assert storage.create_exclusive(".hoodie/x", b"one") and not storage.create_exclusive(".hoodie/x", b"two")
    assert storage.read_bytes(".hoodie/x") == b"one"
    storage.publish(".hoodie/1.commit", b"{}")
    with pytest.raises(LabformatError, match="refusing to overwrite"):
        storage.publish(".hoodie/1.commit", b"{}")
    assert not storage.take_over(".hoodie/x", b"not what is there", b"three")
    assert storage.take_over(".hoodie/x", b"one", b"three") and storage.read_bytes(".hoodie/x") == b"three"
    assert storage.touch(".hoodie/x") and storage.read_bytes(".hoodie/x") == b"three"
    assert storage.delete(".hoodie/x") and not storage.touch(".hoodie/x") and not storage.exists(".hoodie/x")
    assert [f.path for f in storage.list("", recursive=True)] == [".hoodie/1.commit"]  # the probe left nothing


def test_the_table_lock_on_s3_excludes_a_second_writer_and_breaks_an_expired_lock(s3_server, uri):
    storage = Storage(uri, s3_server.storage_options)
    with TableLock(storage, wait_s=0, expire_s=60):
        with pytest.raises(ConcurrentWriteError):
            TableLock(Storage(uri, s3_server.storage_options), wait_s=0.5, expire_s=60).acquire()
    dead = LockOwner("dead", 4242, "elsewhere", 0.0, 0.001)  # expired long ago
    assert storage.create_exclusive(LOCK_PATH, dead.to_bytes())
    with TableLock(storage, wait_s=5, expire_s=60) as lock:
        assert [b.owner_id for b in lock.broken] == ["dead"]
        lock.verify()
    assert not storage.exists(LOCK_PATH)


def test_optimistic_concurrency_is_refused_on_a_store_that_ignores_if_none_match(spark, s3_server, uri, monkeypatch):
    table = lf.Table.create(spark, uri, storage_options=s3_server.storage_options)
    real_put = S3Storage._put

    def ignores_conditions(self, rel, data, mode=None):  # what some S3 gateways do
        return real_put(self, rel, data, None)

    monkeypatch.setattr(S3Storage, "_put", ignores_conditions)
    before = [f.path for f in table.storage.list("", recursive=True)]
    with pytest.raises(ConfigError, match="ignores conditional writes.*OPTIMISTIC_CONCURRENCY_CONTROL"):
        table.upsert(telemetry(spark, 10), options={"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    monkeypatch.undo()
    assert [f.path for f in table.storage.list("", recursive=True)] == before  # the table as it was


# ---- the store refusing (issue 48, case 14) -------------------------------------------------------


def _dead_endpoint() -> str:
    import socket

    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_create_refused_by_the_store_is_a_storage_error_naming_the_table(spark, s3_server, uri):
    opts = s3_server.storage_options
    for bad, reason in (({"aws_secret_access_key": "wrong"}, "ACCESS_DENIED"),
                        ({"aws_access_key_id": "nobody"}, "ACCESS_DENIED"),
                        ({"aws_endpoint_url": _dead_endpoint()}, "connect")):
        with pytest.raises(StorageError) as raised:
            lf.Table.create(spark, uri, storage_options={**opts, **bad})
        message = str(raised.value)
        assert message.startswith(f"creating the table at {uri}: ") and reason in message, message
    assert Storage(uri, opts).list("", recursive=True) == []  # nothing was written


def test_a_write_whose_credentials_went_bad_is_a_storage_error_and_changes_nothing(spark, s3_server, uri):
    opts = s3_server.storage_options
    table = lf.Table.create(spark, uri, storage_options=opts)
    table.bulk_insert(telemetry(spark, 10))
    storage = Storage(uri, opts)
    before = {f.path: storage.read_bytes(f.path) for f in storage.list("", recursive=True)}
    # The same Table, its credentials no longer accepted (rotated keys, an expired session token).
    stale = lf.Table(spark, Storage(uri, {**opts, "aws_secret_access_key": "rotated"}), table.properties)
    for write in (lambda: stale.upsert(telemetry(spark, 5, start=100)), lambda: stale.bulk_insert(telemetry(spark, 5)),
                  lambda: stale.delete(telemetry(spark, 5).select("record_key"))):
        with pytest.raises(StorageError, match=f"^reading the timeline of {uri}: .*SIGNATURE_DOES_NOT_MATCH"):
            write()
    assert {f.path: storage.read_bytes(f.path) for f in storage.list("", recursive=True)} == before


# ---- every operation ----------------------------------------------------------------------------


def test_copy_on_write_on_s3_every_operation_and_hudi_rs_reads_it(spark, s3_server, uri):
    opts = s3_server.storage_options
    table = lf.Table.create(spark, uri, partition_field="day", storage_options=opts)
    table.bulk_insert(telemetry(spark, 300))
    first = table.timeline()[-1].time
    table.upsert(telemetry(spark, 100, start=250).withColumn("battery_pct", F.lit(1.0)),
                 options={"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    table.delete(telemetry(spark, 10).select("record_key", "day"))
    reopened = lf.Table.open(spark, uri, storage_options=opts)
    ours = snapshot(reopened.read())
    assert len(ours) == 340 and (ours.battery_pct == 1.0).sum() == 100
    assert_same_rows(ours, hudi_snapshot(uri, storage_options=opts), COLUMNS)
    assert len(snapshot(reopened.read(as_of=first))) == 300  # time travel
    rows, report = reopened.query(F.col("record_key") == ours.record_key[5])
    assert rows.count() == report.rows_returned == 1
    assert report.funnel.files_read < report.funnel.files_in_snapshot  # skipping works on S3 too
    assert reopened.changes(first).count() == 100  # incremental: the upsert's records
    reopened.cluster(options={"hoodie.clustering.plan.strategy.sort.columns": "drone_id"})
    reopened.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert_same_rows(snapshot(reopened.read()), hudi_snapshot(uri, storage_options=opts), COLUMNS)


def test_merge_on_read_on_s3_logs_compaction_and_the_simple_index(spark, s3_server, uri):
    opts = s3_server.storage_options
    table = lf.Table.create(spark, uri, table_type="MERGE_ON_READ", storage_options=opts,
                            options={"hoodie.index.type": "SIMPLE"})
    table.bulk_insert(telemetry(spark, 200))
    table.upsert(telemetry(spark, 50, start=100).withColumn("signal_dbm", F.lit(-1)))
    assert any(s.has_logs for s in table.file_slices())
    assert (snapshot(table.read()).signal_dbm == -1).sum() == 50
    assert_same_rows(snapshot(table.read()), hudi_snapshot(uri, storage_options=opts), COLUMNS)
    table.compact()
    assert not any(s.has_logs for s in table.file_slices())
    assert_same_rows(snapshot(table.read()), hudi_snapshot(uri, storage_options=opts), COLUMNS)
    assert not [f for f in Storage(uri, opts).list("", recursive=True) if ".tmp" in f.path or "broken" in f.path]


def test_tasks_reading_s3_skip_row_groups_the_filter_rules_out(spark, s3_server, uri):
    """Four row groups of 100 keys each; `v >= 250` rules out the first two by their min/max."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import types as T

    from labformat.io.files import read_files
    from labformat.expressions.predicates import Comparison, Op

    storage = Storage(uri, s3_server.storage_options)
    with storage.fs.open_output_stream(storage.full_path("p/f.parquet")) as out:
        pq.write_table(pa.table({"v": pa.array(range(400), pa.int64())}), out, row_group_size=100)
    schema = T.StructType([T.StructField("v", T.LongType()), T.StructField("absent", T.StringType())])
    every = read_files(spark, storage.base_uri, ["p/f.parquet"], schema)
    groups = spark.sparkContext.accumulator(0)
    kept = read_files(spark, storage.base_uri, ["p/f.parquet"], schema, predicate=Comparison("v", Op.GE, 250),
                      row_groups_read=groups)
    assert every.count() == 400 and kept.count() == 200 and groups.value == 2  # row groups 3 and 4 only
    assert kept.filter("v >= 250").count() == 150 and kept.filter("absent IS NULL").count() == 200
    named = read_files(spark, storage.base_uri, ["p/f.parquet"], schema, file_name_column="file")
    assert {r.file for r in named.select("file").distinct().collect()} == {"f.parquet"}


def test_files_are_packed_into_tasks_by_size():
    from labformat.io.files import pack

    assert pack([], None, 4) == []
    assert pack(["a", "b", "c"], [10, 10, 10], 8) == [["a"], ["b"], ["c"]]  # never an empty task
    groups = pack(["a", "b", "c", "d"], [90, 10, 50, 50], 2)
    assert sorted(groups) == [["a", "b"], ["c", "d"]]  # 100 bytes each, input order inside a task


def server_in_environment(monkeypatch, s3_server) -> None:
    """The standard AWS_* variables pointing at the server: how a writer in another process finds it."""
    for variable, value in s3_server.environment().items():
        monkeypatch.setenv(variable, value)


@pytest.mark.slow
def test_occ_writers_on_s3_on_the_same_file_group_exactly_one_commits(spark, s3_server, uri, monkeypatch, tmp_path):
    """Writer A (another process) is held after writing its files; B commits an update of the same
    file group; A then gets WriteConflictError and its instant is rolled back, on S3 as on a disk."""
    from tests.test_concurrency import batteries, conflict_on_one_file_group

    server_in_environment(monkeypatch, s3_server)
    t, group, b, a_report = conflict_on_one_file_group(spark, tmp_path, uri)
    assert a_report["error"] == "WriteConflictError" and f"commit {b.instant}" in a_report["message"], a_report
    assert group.file_id in a_report["message"]
    assert batteries(t) == {i: i * 0.5 if i < 10 else 2000.0 for i in range(20)}
    assert [i.action.value for i in t.timeline()] == ["commit", "commit", "rollback"]
    assert t.active_timeline.pending() == [] and not t.storage.exists(LOCK_PATH)


@pytest.mark.slow
def test_a_writer_whose_s3_server_stops_mid_commit_keeps_its_own_error(tmp_path):
    """Issue 48 case 15: the server stops between a writer's start and its commit. The write fails with
    a StorageError for what it was doing; the cleanup that cannot reach the server either (the
    rollback, the lock, the heartbeat's delete) adds notes to it instead of replacing it with a raw
    OSError (the heartbeat's delete in the transaction's `finally` used to). Once the server is back,
    the next writer rolls the instant back and the table is as it was."""
    from labformat.errors import StorageError
    from labformat.heartbeat import heartbeat_path
    from labformat.model.enums import Operation
    from labformat.s3_server import S3Server
    from labformat.write.transaction import WriteTransaction
    from tests.test_concurrency import SCHEMA, options, stand_in_file

    server = S3Server.start(tmp_path / "weed")
    try:
        table = lf.Table.create(None, server.uri("t"), storage_options=server.storage_options)
        fast = options(heartbeat_interval_ms=100, heartbeat_tolerable_misses=1)
        tx = WriteTransaction(table.context(), Operation.UPSERT, options=fast)
        tx.start()
        stat = stand_in_file(tmp_path / "local", tx, "p", "a-0")
        table.storage.write_bytes(stat.path, b"PAR1")
        server.stop()
        with pytest.raises(LabformatError) as raised:
            with tx:
                tx.commit([stat], SCHEMA)
        assert isinstance(raised.value, StorageError), repr(raised.value)
        notes = "\n".join(getattr(raised.value, "__notes__", ()))
        assert heartbeat_path(tx.instant.time) in notes and "was not rolled back" in notes, notes
    finally:
        server.stop()
    with S3Server.start(tmp_path / "weed") as again:
        table = lf.Table.open(None, again.uri("t"), storage_options=again.storage_options)
        assert table.timeline() == [] and [i.time for i in table.active_timeline.pending()] == [tx.instant.time]
        with WriteTransaction(table.context(), Operation.UPSERT, options=options()) as next_writer:
            next_writer.start()
            assert next_writer.rolled_back == (tx.instant.time,)
            next_writer.abandon()
        assert not table.storage.exists(stat.path) and table.active_timeline.pending() == []
