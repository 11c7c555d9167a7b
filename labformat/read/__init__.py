"""Reads: snapshot, time travel, and data skipping."""
