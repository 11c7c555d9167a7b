"""Unit tests of the option registry: aliases, parsing, validation, and the generated docs table."""

from pathlib import Path

import pytest

from labformat import config as C
from labformat.errors import ConfigError, LabformatError

ROOT = Path(__file__).resolve().parents[1]


def test_names_and_hudi_keys_resolve_to_the_same_option():
    by_name = C.resolve({"max_file_size": "4MB"}, [C.Scope.WRITE])
    by_key = C.resolve({"hoodie.parquet.max.file.size": 4 * 1024 * 1024}, [C.Scope.WRITE])
    assert by_name.max_file_size == by_key.max_file_size == 4 * 1024 * 1024
    assert by_name.explicit == {"max_file_size"}


def test_defaults_fill_every_option_of_the_scope():
    cfg = C.resolve(None, [C.Scope.WRITE])
    assert cfg.bulk_insert_sort_mode == "NONE"
    assert cfg.max_file_size == 120 * 1024 * 1024
    assert set(cfg) == {o.name for o in C.OPTIONS if o.scope is C.Scope.WRITE or o.per_write}
    assert cfg.index_type is None  # a per-write table option: None means "the table's"
    assert cfg.explicit == frozenset()


def test_a_per_write_table_option_may_be_set_on_a_write():
    assert C.resolve({"hoodie.index.type": "simple"}, [C.Scope.WRITE]).index_type == "SIMPLE"
    assert C.resolve({"index_type": "BUCKET"}, [C.Scope.TABLE]).index_type == "BUCKET"


@pytest.mark.parametrize("raw,expected", [("512k", 524288), ("1.5 GB", int(1.5 * 1024**3)), (2048, 2048), ("64", 64)])
def test_sizes_parse_with_units(raw, expected):
    assert C.parse_size(raw) == expected


def test_unknown_option_names_the_nearest_key():
    with pytest.raises(ConfigError, match=r"unknown option 'hoodie.parquet.max.fil.size'.*'hoodie.parquet.max.file.size'"):
        C.resolve({"hoodie.parquet.max.fil.size": 1}, [C.Scope.WRITE])


@pytest.mark.parametrize("options,pattern", [
    ({"max_file_size": "lots"}, "max_file_size"),
    ({"hoodie.bulkinsert.sort.mode": "SHUFFLE"}, "hoodie.bulkinsert.sort.mode.*GLOBAL_SORT"),
    ({"bulk_insert_parallelism": -1}, "must be >= 0"),
    ({"bloom_fpp": 1.5}, "between 0 and 1"),
    ({"max_file_size": True}, "max_file_size"),
])
def test_malformed_values_name_the_option(options, pattern):
    with pytest.raises(ConfigError, match=pattern):
        C.resolve(options, [C.Scope.WRITE])


def test_an_option_of_another_scope_is_refused():
    with pytest.raises(ConfigError, match="table option"):
        C.resolve({"hive_style_partitioning": True}, [C.Scope.WRITE])


def test_the_same_option_twice_under_two_keys_is_refused():
    with pytest.raises(ConfigError, match="given twice"):
        C.resolve({"max_file_size": 1024, "hoodie.parquet.max.file.size": 2048}, [C.Scope.WRITE])


def test_config_error_is_a_labformat_error():
    assert issubclass(ConfigError, LabformatError)


def test_docs_table_matches_the_registry():
    """docs/options.md is generated; regenerate with `python scripts/gen_docs.py`."""
    doc = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert doc == C.options_markdown()
    for o in C.OPTIONS:
        assert f"`{o.name}`" in doc
