"""Indexes that tag incoming records to file groups, each an `Index` (base.py: `tag(TagRequest) -> TagResult`)
that `registry.index_for` picks from the write's index options: SIMPLE and BLOOM (over `labformat.fileformat`'s
bloom filter), their global forms (`global_index.py`), BUCKET with Hudi's simple hash and with consistent hashing,
and the record level index kept in the metadata table (`record_level.py`)."""
