"""lab/queries.py: the BLOOM index's key ranges and bloom filters from footers against the metadata table (notebook 03)."""

from __future__ import annotations

import pytest

import labformat as lf
from labformat import datasets
from labformat.lab.queries import compare_lookup_sources

pytestmark = pytest.mark.spark


def test_footers_are_opened_per_file_and_the_metadata_table_once_per_partition_read(spark, tmp_path):
    """tiny's history as 8 GLOBAL_SORT files, day 1 upserted on copies: from footers, the tag step opens
    each file's footer for its key range and each checked file's again for its filter; from the metadata
    table, no footer, its column stats snapshot and the bulk insert's bloom filters (2 files). Both
    keep the same files at each stage."""
    cached = datasets.generate(spark, datasets.spec("tiny"))
    table = lf.Table.create(spark, tmp_path / "lookups", record_key=datasets.RECORD_KEY,
                            precombine_field=datasets.PRECOMBINE_FIELD, options={"bloom_filter_enable": True})
    table.bulk_insert(datasets.load_history(spark, cached), {"bulk_insert_sort_mode": "GLOBAL_SORT",
                                                             "bulk_insert_parallelism": 8})
    frame = compare_lookup_sources(table, datasets.load_batch(spark, cached, 1), repeats=1, workdir=tmp_path)
    assert list(frame.index) == ["footers", "metadata table"]
    footers, metadata = frame.loc["footers"], frame.loc["metadata table"]
    assert footers.files_in_snapshot == metadata.files_in_snapshot == 8
    assert footers.after_range_pruning == metadata.after_range_pruning >= 1
    assert footers.footers_read == 8 + footers.after_range_pruning and footers.metadata_files_read == 0
    assert metadata.footers_read == 0 and metadata.metadata_files_read == 2
    assert footers.after_bloom == metadata.after_bloom and (frame.tag_median_s > 0).all()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lookups"]  # the copies are gone
