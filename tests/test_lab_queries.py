"""lab/queries.py: the point lookup's key, the skipping timings in words, and the BLOOM index's key ranges and bloom
filters from footers against the metadata table (notebook 03)."""

from __future__ import annotations

import pytest

import labformat as lf
from labformat import datasets
import pandas as pd

from labformat.lab.queries import compare_lookup_sources, skipping_numbers
from labformat.workload import lookup_key


def test_the_lookup_key_is_a_files_smallest_key_that_the_most_key_ranges_hold():
    disjoint = pd.DataFrame({"min_key": ["2024011500_a", "2024011512_a"], "max_key": ["2024011511_b", "2024011523_b"]})
    assert lookup_key(disjoint) == "2024011500_a"  # one file each: the table's smallest key
    day = pd.DataFrame({"min_key": ["2024011600_a", "2024011600_b", "2024011612_a"],
                        "max_key": ["2024011623_a", "2024011623_b", "2024011623_c"]})
    overlapping = pd.concat([disjoint, day], ignore_index=True)
    assert lookup_key(overlapping) == "2024011612_a"  # held by all three of the day's files


def _timings(on_s, off_s, on_files=1, off_files=64, planning=(0.12, 0.08), scan=(0.15, 0.45)):
    row = {"query": "point lookup", "files_in_snapshot": 64, "row_groups_read": 1, "scan_tasks": 2}
    return pd.DataFrame([
        {**row, "skipping": "on", "files_read": on_files, "median_s": on_s[1], "min_s": on_s[0], "max_s": on_s[2],
         "planning_s": planning[0], "scan_s": scan[0]},
        {**row, "skipping": "off", "files_read": off_files, "median_s": off_s[1], "min_s": off_s[0], "max_s": off_s[2],
         "planning_s": planning[1], "scan_s": scan[1]}])


def test_the_skipping_numbers_say_where_the_gap_lies_and_whether_it_beats_the_spread():
    said = skipping_numbers(_timings((0.25, 0.27, 0.30), (0.50, 0.53, 0.60)))
    assert "saved 0.260 s a run (medians), beyond the spread" in said
    assert "planning 0.040 s longer with it on (0.120 vs 0.080 s)" in said
    assert "the scan 0.300 s shorter with it on, for 63 files fewer opened: about 9.5 ms for each file" in said
    noisy = skipping_numbers(_timings((0.9, 1.1, 1.3), (0.8, 1.0, 1.2), on_files=64, scan=(1.0, 0.9)))
    assert "cost 0.100 s a run (medians), within the spread" in noisy and "it dropped no file" in noisy


@pytest.mark.spark
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
