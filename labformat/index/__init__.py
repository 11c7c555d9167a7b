"""Indexes that tag incoming records to file groups: simple, bloom (over `labformat.fileformat`'s bloom filter) and bucket."""
