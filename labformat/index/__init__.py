"""Indexes that tag incoming records to file groups; and the bloom filter they share."""
