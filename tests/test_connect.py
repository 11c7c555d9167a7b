"""The core write and read tests again, on a Spark Connect session.

A process holds either a classic SparkSession or Spark Connect ones (pyspark switches its
functions over for the whole process), so these run in a pytest of their own: the same test
files, with tests/conftest.py's `spark` fixture building `SparkSession.builder.remote("local[2]")`
(a Connect server in that process's JVM, reached over gRPC). Tests marked `classic_only` read the
JVM directly (`spark.sparkContext`, Catalyst plans) and are skipped there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CONNECT_ENV

pytestmark = [pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]

# Every public operation: create, open, bulk insert, upsert, delete, read, query, scan, time
# travel, compaction, clustering, clean; concurrent writers; and what differs between the two
# kinds of session.
CORE_TESTS = [
    "tests/test_connect_session.py",
    *(f"tests/test_table.py::{name}" for name in (
        "test_bulk_insert_then_read_returns_every_row",
        "test_time_travel_reads_each_commit_as_it_was",
        "test_hudi_reader_returns_labformats_snapshot_latest_and_as_of",
        "test_null_or_empty_record_keys_are_rejected_and_the_table_unchanged",
        "test_open_and_create_errors")),
    "tests/test_query.py::test_partition_pruning_reads_partition_paths_and_skipping_off_turns_every_stage_off",
    *(f"tests/test_merge_on_read.py::{name}" for name in (
        "test_updates_append_log_files_inserts_write_base_files",
        "test_delete_writes_a_delete_block_and_a_reinsert_after_it_comes_back",
        "test_compaction_merges_each_slice_with_logs_into_a_new_base_file")),
    *(f"tests/test_table_services.py::{name}" for name in (
        "test_clean_keeps_the_slices_of_the_retained_commits_and_the_last_before_them",
        "test_clustering_rewrites_small_files_sorted_and_the_view_hides_the_replaced_ones")),
    # Two writers under OCC: the other one a process of its own, a Connect client of the same server.
    "tests/test_concurrency.py::test_occ_writers_on_the_same_file_group_exactly_one_commits",
]


def test_core_tests_pass_on_a_spark_connect_session(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env[CONNECT_ENV] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                           "--basetemp", str(tmp_path / "pytest"), "-m", "not s3",
                           *CORE_TESTS],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 18, summary  # the run really ran the tests, not only skipped them


def test_every_core_test_named_above_exists():
    """A renamed test would make the Connect run fail only after its JVM started: name it here at once."""
    for node in CORE_TESTS:
        path, _, name = node.partition("::")
        assert (ROOT / path).exists() and (not name or f"def {name}(" in (ROOT / path).read_text()), f"{node} is not defined"
