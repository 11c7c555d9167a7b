"""Reading a table's files in Spark tasks through `labformat.storage` (Spark itself never opens a table path)."""
