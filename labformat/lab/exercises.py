"""Workshop exercises: a learner's prediction checked against what their own run did, with a hint when wrong.

Every checker takes the answer and the run's own artifacts (a report, a table, a frame of
files) and computes the expected value from them, never from a stored number, so the same
exercise is right at `tiny` and at `small`. An answer of `None` means "not answered yet".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

import labformat as lf
from labformat.lab.workshop import files_covering


@dataclass(frozen=True)
class Check:
    """The verdict on one exercise: `right` is None when no answer was given."""

    exercise: str
    answer: Any
    expected: Any
    right: bool | None
    explanation: str
    hint: str

    @property
    def message(self) -> str:
        if self.right is None:
            return (f"Exercise {self.exercise}: not answered yet. Put your prediction in the answer "
                    f"variable above and run both cells again.")
        if self.right:
            return f"Exercise {self.exercise}: right! {self.explanation}"
        return f"Exercise {self.exercise}: wrong, you said {self.answer!r}. Hint: {self.hint}"

    def __repr__(self) -> str:
        return self.message

    def __bool__(self) -> bool:
        return bool(self.right)


def check(exercise: str, answer: Any, expected: Any, explanation: str, hint: str,
          tolerance: float = 0.0) -> Check:
    """Compare `answer` with `expected`: numbers within `tolerance` (absolute), anything else by equality."""
    if answer is None:
        return Check(exercise, None, expected, None, explanation, hint)
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        try:
            number = float(answer)
        except (TypeError, ValueError):
            return Check(exercise, answer, expected, False, explanation, f"answer with a number. {hint}")
        right = math.isfinite(number) and abs(number - float(expected)) <= tolerance + 1e-12
    else:
        right = answer == expected
    return Check(exercise, answer, expected, bool(right), explanation, hint)


# ------------------------------------------------------------------ 00: set-up and dataset

def history_rows(answer, report: lf.WriteReport) -> Check:
    expected = report.rows_written
    return check("0.1", answer, expected,
                 f"The bulk insert wrote {expected:,} rows: one reading per drone per minute of every history day.",
                 "one reading per drone per minute: drones x 1440 x history days (see the dataset table).")


def smallest_key(answer, files: pd.DataFrame) -> Check:
    expected = str(files["min_key"].min())
    return check("0.2", answer, expected,
                 f"The smallest key is {expected}: the first minute of the first day, the lowest drone id.",
                 "a key is YYYYMMDDHHmm_droneNNNN; take the first history day at 00:00 and drone0000.")


# ------------------------------------------------------------------ 01: bulk insert

def candidate_files(exercise: str, answer, files: pd.DataFrame, key: str) -> Check:
    expected = files_covering(files, key)
    return check(exercise, answer, expected,
                 f"{expected} of {len(files)} base files have a key range containing {key}.",
                 "range pruning keeps every file whose [min key, max key] contains the key; "
                 "look at how the bars in the key-range chart overlap.")


def base_files(exercise: str, answer, report: lf.WriteReport) -> Check:
    expected = len(report.files)
    return check(exercise, answer, expected,
                 f"The bulk insert wrote {expected} base files from {report.step('write').tasks} tasks.",
                 "each write task writes its share of the sorted rows into its own file, and rolls over to "
                 "a new file only when it passes max_file_size.")


# ------------------------------------------------------------------ 02: daily upserts

def shuffle_parallelism(exercise: str, answer, report: lf.WriteReport) -> Check:
    expected = report.details["shuffle_parallelism"]
    mode = report.options.get("upsert_parallelism_mode")
    return check(exercise, answer, expected,
                 f"The deduplicate shuffle ran {expected} tasks ({mode} mode; the step ran "
                 f"{report.step('deduplicate').tasks} tasks in all, reading the input included).",
                 "Hudi 0.13+ uses min(input partitions, upsert_parallelism); the LEGACY mode always "
                 "uses upsert_parallelism, whatever the input.")


def file_groups(exercise: str, answer, table: lf.Table) -> Check:
    expected = len(table.file_slices())
    return check(exercise, answer, expected,
                 f"The table has {expected} file groups.",
                 "a BUCKET index hashes each key to one of bucket_num buckets, and each bucket is one "
                 "file group, whatever the data size.")


def range_pruning_share(exercise: str, answer, report) -> Check:
    """`report`: a WriteReport, or one day's row of `DailyRun.to_pandas()` (it has the funnel columns)."""
    funnel = getattr(report, "funnel", report)
    expected = round(funnel["after_range_pruning"] / funnel["files_in_table"], 2)
    return check(exercise, answer, expected,
                 f"{funnel['after_range_pruning']} of {funnel['files_in_table']} files stayed candidates "
                 f"after range pruning ({expected:.0%}).",
                 "random keys spread every day's records over the whole key space, so every file's "
                 "[min, max] range contains some incoming key.", tolerance=0.05)


# ------------------------------------------------------------------ 03: query skipping

def files_read(exercise: str, answer, report) -> Check:
    expected = report.funnel["files_read"]
    return check(exercise, answer, expected,
                 f"The query read {expected} of {report.funnel['files_in_snapshot']} base files.",
                 "column stats keep a file when the predicate could match between its min and max; "
                 "a ts window only matches files whose time range overlaps it, a drone_id matches "
                 "every file that holds many drones.")


def skipped_share(exercise: str, answer, report) -> Check:
    funnel = report.funnel
    expected = round(1 - funnel["files_read"] / funnel["files_in_snapshot"], 2)
    return check(exercise, answer, expected,
                 f"Skipping dropped {funnel['files_in_snapshot'] - funnel['files_read']} of "
                 f"{funnel['files_in_snapshot']} base files ({expected:.0%}).",
                 "a file can be skipped only when its [min, max] of the filtered column excludes the value; "
                 "what are the min and max drone_id of a file that holds a few minutes of every drone?",
                 tolerance=0.05)
