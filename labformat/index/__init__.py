"""Indexes that tag incoming records to file groups: SIMPLE and BLOOM (over `labformat.fileformat`'s bloom filter),
their global forms (`global_index.py`), BUCKET with Hudi's simple hash and with consistent hashing, and the record
level index kept in the metadata table (`record_level.py`)."""
