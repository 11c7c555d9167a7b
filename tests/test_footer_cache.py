"""A table's footer cache: each base file's footer read once per table, and no table sees another's (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from labformat.fileformat.footers import MAX_KEY_FOOTER, MIN_KEY_FOOTER, FooterCache
from labformat.storage import Storage


def _base_file(folder, name: str, keys: list[str]) -> str:
    table = pa.table({"_hoodie_record_key": keys, "v": list(range(len(keys)))})
    table = table.replace_schema_metadata({MIN_KEY_FOOTER: min(keys), MAX_KEY_FOOTER: max(keys)})
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / name)
    return name


def test_each_footer_is_read_once_per_table_and_tables_do_not_share(tmp_path):
    a = _base_file(tmp_path / "a", "f1.parquet", ["k1", "k3"])
    _base_file(tmp_path / "b", a, ["x5", "x9"])  # the same relative path in another table
    first, second = FooterCache(Storage(tmp_path / "a")), FooterCache(Storage(tmp_path / "b"))
    assert first.key_ranges([a])[a].min_key == "k1" and second.key_ranges([a])[a].min_key == "x5"
    first.key_ranges([a])
    assert first._info.cache_info().hits == 1 and first._info.cache_info().misses == 1
    stats = first.column_stats([a])[a]
    assert (stats["v"].min, stats["v"].max, stats["v"].value_count) == (0, 1, 2)


def test_a_table_opened_again_finds_its_footers_and_only_the_last_tables_are_kept(tmp_path):
    from labformat.fileformat import footers

    name = _base_file(tmp_path / "t", "f1.parquet", ["k1", "k2"])
    first = FooterCache.of_table(Storage(tmp_path / "t"))
    first.key_ranges([name])
    again = FooterCache.of_table(Storage(tmp_path / "t"))
    assert again is first and again._info.cache_info().currsize == 1
    for i in range(footers._KEPT):
        FooterCache.of_table(Storage(tmp_path / f"other{i}"))
    assert FooterCache.of_table(Storage(tmp_path / "t")) is not first  # forgotten: eight tables were opened since
