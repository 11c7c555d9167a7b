"""The base-file format layer: what a labformat base file holds beyond its rows, and what its tasks report.

Below `index/`, `metadata/` and `write/`, which all depend on it: the parquet footer keys and
their readers (`footers`), the record-key bloom filter (`bloom_filter`), per-column stats of
Arrow batches (`column_stats`), the row each write task returns per base file
(`base_file_stat`), and how a Spark task reports bad input to the driver (`invalid_input`).
Named `fileformat` (Hudi's HoodieFileFormat) rather than `format`, which would shadow the
builtin wherever the package is imported by name.
"""
