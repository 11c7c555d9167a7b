"""BaseFileStat: one declaration gives the write tasks' Spark DDL and Arrow schema, and the commit's and report's entries."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import pyarrow as pa
import pytest

import labformat as lf
from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.model.commit import CommitMetadata, WriteStat
from labformat.model.report import FileReport
from tests.helpers import telemetry

NEW = BaseFileStat(
    partition_path="2024-01-15", file_id="f1-0", path="2024-01-15/f1-0_0-1-0_20240115093000123.parquet",
    prev_commit="null", num_writes=10, num_inserts=10, num_update_writes=0, num_deletes=0, file_size=4096,
    min_key="k01", max_key="k10", write_ms=12, bloom_ms=3, task_partition=0, task_attempt=0,
    prev_min_key=None, prev_max_key=None, prev_size=0, incoming_bytes=0,
    column_stats=json.dumps({"value": [1, 9, 0, 10, 0]}), bloom=None, bloom_bytes=1200,
)
# A merge into the same file group one instant later: 2 updates, 1 insert, 1 delete.
REWRITE = replace(
    NEW, path="2024-01-15/f1-0_1-7-0_20240116093000123.parquet", prev_commit="20240115093000123", num_writes=10,
    num_inserts=1, num_update_writes=2, num_deletes=1, file_size=4100, min_key="k00", max_key="k10", task_partition=1,
    prev_min_key="k01", prev_max_key="k10", prev_size=4096, incoming_bytes=800, bloom="TEVCRg==",
)


def _ddl_columns(ddl: str) -> list[tuple[str, str]]:
    return [tuple(column.split(" ")) for column in ddl.split(", ")]


def test_the_ddl_and_the_arrow_schema_agree_field_by_field():
    arrow = {"string": pa.string(), "long": pa.int64(), "int": pa.int32()}
    schema = BaseFileStat.arrow_schema()
    ddl = _ddl_columns(BaseFileStat.spark_ddl())
    assert [name for name, _ in ddl] == schema.names == [f.name for f in fields(BaseFileStat)]
    assert [arrow[spark_type] for _, spark_type in ddl] == schema.types
    # The Python annotation says the same: text for strings, int for both integer widths.
    for f, type_ in zip(fields(BaseFileStat), schema.types):
        assert f.type.startswith("str") == pa.types.is_string(type_), f.name


def test_spark_reads_the_ddl_as_exactly_the_arrow_schema(spark):
    from pyspark.sql.pandas.types import to_arrow_schema

    declared = spark.createDataFrame([], BaseFileStat.spark_ddl()).schema
    assert to_arrow_schema(declared) == BaseFileStat.arrow_schema()


def test_a_task_batch_round_trips_through_spark_to_the_same_stats(spark):
    stats = [NEW, REWRITE]

    def task(batches):
        for _ in batches:
            pass
        yield BaseFileStat.record_batch(stats)

    rows = spark.range(1, numPartitions=1).mapInArrow(task, BaseFileStat.spark_ddl()).collect()
    assert [BaseFileStat.from_row(r) for r in rows] == stats


def test_from_row_refuses_a_row_of_another_shape():
    class Row(dict):
        def asDict(self):
            return dict(self)

    with pytest.raises(TypeError):
        BaseFileStat.from_row(Row(path="a.parquet"))


def test_the_commit_entry_keeps_hudis_fields():
    assert REWRITE.to_write_stat() == WriteStat(
        "2024-01-15", "f1-0", REWRITE.path, prev_commit="20240115093000123", num_writes=10, num_inserts=1,
        num_update_writes=2, num_deletes=1, file_size_bytes=4100, total_write_bytes=4100, create_time_ms=12)
    body = json.loads(CommitMetadata("UPSERT", (NEW.to_write_stat(),)).to_json())
    [entry] = body["partitionToWriteStats"]["2024-01-15"]
    assert (entry["prevCommit"], entry["numWrites"], entry["fileSizeInBytes"]) == ("null", 10, 4096)


def test_the_file_report_of_a_new_file_group_is_the_bulk_inserts():
    """The values bulk_insert.py built by hand before the stat was typed."""
    s = NEW
    assert NEW.created
    assert NEW.to_file_report() == FileReport(s.partition_path, s.file_id, s.path, s.num_writes, s.file_size,
                                              s.min_key, s.max_key, created=True, inserts=s.num_inserts)


def test_the_file_report_of_a_rewrite_is_the_upserts():
    """The values upsert.py built by hand before the stat was typed."""
    s = REWRITE
    assert not REWRITE.created
    assert REWRITE.to_file_report() == FileReport(
        s.partition_path, s.file_id, s.path, s.num_writes, s.file_size, s.min_key, s.max_key, created=False,
        inserts=s.num_inserts, updates=s.num_update_writes, deletes=s.num_deletes, prev_size_bytes=s.prev_size,
        prev_min_key=s.prev_min_key, prev_max_key=s.prev_max_key)


def test_an_upsert_reports_created_exactly_for_the_file_groups_it_started(spark, tmp_path):
    """Bulk insert 300 rows, then upsert 60 updates and 200 inserts with no small files to fill:
    the updated file groups are rewritten, the inserts go to new file groups, and the report
    and the commit agree on every base file."""
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    t.bulk_insert(telemetry(spark, 300), {"bulk_insert_sort_mode": "GLOBAL_SORT"})
    before = {s.file_id for s in t.file_slices()}
    report = t.upsert(telemetry(spark, 260, start=240), {"small_file_limit": 0})
    assert report.files_created >= 1 and report.files_rewritten >= 1
    assert all(f.created == (f.file_id not in before) for f in report.files)
    commit = CommitMetadata.from_json((tmp_path / "t" / ".hoodie" / f"{report.instant}.commit").read_text())
    assert sorted((w.path, w.num_writes, w.file_size_bytes, w.prev_commit == "null") for w in commit.write_stats) \
        == sorted((f.path, f.rows, f.size_bytes, f.created) for f in report.files)


def test_key_footer_round_trips_and_ignores_a_bloom_filter_of_another_kind():
    from labformat.fileformat.footers import BLOOM_FOOTER, BLOOM_TYPE_FOOTER, KeyFooter

    footer = KeyFooter("a", "z", "AAAA", "DYNAMIC_V0")
    kv = {k.encode(): v.encode() for k, v in footer.entries().items()}
    assert KeyFooter.parse(kv) == footer
    assert KeyFooter.parse(None) == KeyFooter(None, None, None)
    assert KeyFooter(None, None, "AAAA").entries().keys() == {BLOOM_FOOTER}  # SIMPLE: no type code, as Hudi
    assert KeyFooter(None, None, "AAAA", "DYNAMIC_V0").entries().keys() == {BLOOM_FOOTER, BLOOM_TYPE_FOOTER}
    del kv[BLOOM_FOOTER.encode()]
    kv[b"labformat_bloom_filter_type"] = b"SOMEONE_ELSES_FILTER"
    kv[b"labformat_bloom_filter"] = b"AAAA"
    assert KeyFooter.parse(kv) == KeyFooter("a", "z", None)
