"""A scan counts what its tasks asked of the storage: files opened, read requests, bytes; on S3 each read request is one GET."""

from __future__ import annotations

import io
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import labformat as lf
from labformat.fileformat.parquet_io import CountedFile, read_base_file
from labformat.storage import Storage
from tests.helpers import telemetry


def _parquet(rows: int = 6000, columns: int = 5, row_group_size: int = 2000) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({f"c{i}": list(range(rows)) for i in range(columns)}), sink, row_group_size=row_group_size)
    return sink.getvalue()


def _read_counted(storage: Storage, path: str, **kwargs) -> tuple[pa.Table, CountedFile]:
    seen = []
    table = read_base_file(storage, path, counted=seen.append, **kwargs)
    assert len(seen) == 1
    return table, seen[0]


def test_a_counted_read_returns_the_same_rows_and_counts_each_request_and_its_bytes(tmp_path):
    storage = Storage(str(tmp_path))
    data = _parquet()
    storage.write_bytes("f.parquet", data)
    table, counted = _read_counted(storage, "f.parquet", columns=["c0", "c1"])
    assert table.equals(read_base_file(storage, "f.parquet", ["c0", "c1"]))
    # the footer (one read of the file's tail), then the column chunks it needs
    assert counted.requests >= 2 and 0 < counted.bytes <= len(data) + 64 * 1024
    _, footer_only = _read_counted(storage, "f.parquet", keep=lambda footer, g: False)
    assert footer_only.requests == 1  # no row group kept: the footer alone was read


@pytest.mark.s3
def test_each_counted_request_is_one_get_on_s3_and_opening_the_file_one_more(s3_server):
    storage = Storage(s3_server.uri(f"t-{uuid.uuid4().hex[:8]}"), s3_server.storage_options)
    storage.write_bytes("f.parquet", _parquet())
    for keep in (None, lambda footer, g: g == 1):
        before = s3_server.request_counts()
        _, counted = _read_counted(storage, "f.parquet", columns=["c0", "c3"], keep=keep)
        after = s3_server.request_counts()
        answered = sum(after.get(k, 0) - before.get(k, 0) for k in ("GET", "HEAD"))
        assert answered == counted.requests + 1, (before, after, counted.requests)


@pytest.mark.spark
def test_a_scan_reports_its_tasks_and_files_opened_and_when_counting_its_requests(spark, tmp_path):
    table = lf.Table.create(spark, str(tmp_path / "t"), record_key="record_key", precombine_field="updated_at")
    table.bulk_insert(telemetry(spark, 600, partitions=6), {"bulk_insert_parallelism": 6})
    plan = table.scan("drone_id = 'drone0001'")
    plain = plan.measure()
    counted = table.scan("drone_id = 'drone0001'").counting().measure()
    for report in (plain, counted):
        d = report.details
        assert d.files_opened == report.funnel.files_read == plain.funnel.files_read >= 2
        assert 1 <= d.scan_tasks <= report.funnel.files_read
        assert d.stats_entries_read >= report.funnel.files_in_snapshot  # an entry per file and column
        assert d.metadata_files_read >= 1
    assert plain.details.read_requests is None and plain.details.bytes_read is None
    assert counted.details.read_requests >= 2 * counted.details.files_opened  # a footer, then column chunks
    assert counted.details.bytes_read > 0 and counted.rows_returned == plain.rows_returned
    none = table.scan("record_key = 'absent'").counting().measure()
    assert (none.funnel.files_read, none.details.files_opened, none.details.read_requests) == (0, 0, 0)
