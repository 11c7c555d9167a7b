"""The table context: hoodie.properties read through the option registry, and a timeline pinned per call."""

from __future__ import annotations

import pytest

import labformat as lf
from labformat import config as C
from labformat import properties as P
from labformat.context import TableConfig
from labformat.errors import CorruptTableError
from labformat.model.enums import IndexType
from tests.helpers import telemetry


def _config(**options) -> TableConfig:
    return TableConfig.new(C.resolve(options, [C.Scope.TABLE]), "t", "record_key", "updated_at", "day")


def test_a_new_tables_config_survives_its_properties_file():
    for options in ({}, {"index_type": "BUCKET", "bucket_num": 7, "hive_style_partitioning": True},
                    {"column_stats_columns": "record_key, ts", "bloom_filter_enable": True},
                    {"metadata_enable": False, "index_type": "SIMPLE"}):
        config = _config(**options)
        text = P.format_properties(config.to_properties())
        assert TableConfig.from_properties(P.parse_properties(text)) == config


@pytest.mark.parametrize("key", ["hoodie.populate.meta.fields", "hoodie.table.cdc.enabled"])
def test_a_stored_flag_is_read_as_hudi_reads_it_and_a_bad_one_names_its_key(key):
    props = _config().to_properties()
    for raw, expected in (("FALSE", False), (" true ", True), ("", key.endswith("meta.fields"))):
        assert getattr(TableConfig.from_properties({**props, key: raw}),
                       "populate_meta_fields" if "meta" in key else "cdc_enabled") is expected
    for bad in ("maybe", "yes", "1"):  # Hudi's Boolean.parseBoolean would read each as false
        with pytest.raises(CorruptTableError, match=key.replace(".", r"\.")):
            TableConfig.from_properties({**props, key: bad})


def test_config_is_typed_from_the_registry():
    config = _config(index_type="bucket", bucket_num="3", column_stats_columns="a,b")
    assert config.index_type is IndexType.BUCKET and config.bucket_num == 3
    assert config.column_stats_columns == ("a", "b")
    assert config.metadata_enable and config.column_stats_enable and not config.bloom_filter_enable


def test_the_metadata_indexes_are_off_without_the_metadata_table():
    config = _config(metadata_enable=False, column_stats_enable=True, bloom_filter_enable=True)
    assert not (config.column_stats_enable or config.bloom_filter_enable)


def test_a_table_without_the_metadata_flags_has_them_off():
    """A table Hudi wrote may not list them; absent is off, whatever the registry's create-time default."""
    props = _config().to_properties()
    for name in ("metadata_enable", "column_stats_enable", "bloom_filter_enable", "index_type"):
        del props[C.option(name).hudi_key]
    config = TableConfig.from_properties(props)
    assert not (config.metadata_enable or config.column_stats_enable or config.bloom_filter_enable)
    assert config.index_type is IndexType.BLOOM


def test_an_unparsable_stored_value_names_the_key():
    props = _config().to_properties()
    props["hoodie.index.type"] = "HASH"
    with pytest.raises(CorruptTableError, match="hoodie.index.type"):
        TableConfig.from_properties(props)
    props = _config(index_type="BUCKET").to_properties()
    props["hoodie.bucket.index.num.buckets"] = "many"
    with pytest.raises(CorruptTableError, match="hoodie.bucket.index.num.buckets"):
        TableConfig.from_properties(props)


@pytest.mark.spark
def test_a_context_keeps_the_timeline_it_was_made_with(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t")
    before = t.context()
    report = t.bulk_insert(telemetry(spark, 50))
    assert before.timeline.latest_completed_write() is None and before.schema() is None
    assert before.file_system_view().latest_file_slices() == []
    after = before.refreshed()
    assert after.timeline.latest_completed_write().time == report.instant
    assert [s.path for s in after.file_system_view().latest_file_slices()] == sorted(f.path for f in report.files)
    assert t.context().schema() == after.schema() is not None
