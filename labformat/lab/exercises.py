"""Workshop exercises: a learner's prediction checked against what their own run did, with a hint when wrong.

Every checker takes the answer and the run's own artifacts (a report, a table, a frame of
files) and computes the expected value from them, never from a stored number, so the same
exercise is right at `tiny` and at `small`; it reads the run already made and never re-runs an
experiment. Counts are exact, shares must land within half of one file's share, and a bool or a
string never passes for a number (`True == 1` in Python). An answer of `None` means "not
answered yet".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import labformat as lf
from labformat.model.enums import BloomFilterTypeCode, IndexType
from labformat.lab.frames import files_covering


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
                    f"variable above and run both cells again. Hint: {self.hint}")
        if self.right:
            return f"Exercise {self.exercise}: right! {self.explanation}"
        return f"Exercise {self.exercise}: wrong, you said {self.answer!r}. Hint: {self.hint}"

    def __repr__(self) -> str:
        return self.message

    def __bool__(self) -> bool:
        return bool(self.right)


def _number(answer) -> float | None:
    """`answer` as a float, or None when it is no number (a bool is not a number here: True == 1)."""
    if isinstance(answer, (bool, np.bool_)) or not isinstance(answer, (int, float, np.integer, np.floating)):
        return None
    number = float(answer)
    return number if math.isfinite(number) else None


def _type_hint(answer, wanted: str) -> str:
    if isinstance(answer, (bool, np.bool_)):
        return f"{answer!r} is a yes/no, not {wanted}: answer with {wanted}. "
    return f"{answer!r} is a {type(answer).__name__}: answer with {wanted}. "


def check(exercise: str, answer: Any, expected: Any, explanation: str, hint: str,
          tolerance: float = 0.0) -> Check:
    """Compare `answer` with `expected`: numbers within `tolerance` (absolute, strictly inside when
    above 0), strings exactly. A bool never passes for a number, nor a number for a string."""
    if answer is None:
        return Check(exercise, None, expected, None, explanation, hint)
    if isinstance(expected, (int, float, np.integer, np.floating)) and not isinstance(expected, bool):
        number = _number(answer)
        if number is None:
            return Check(exercise, answer, expected, False, explanation, _type_hint(answer, "a number") + hint)
        gap = abs(number - float(expected))
        right = gap < tolerance if tolerance > 0 else gap <= 1e-9
    elif isinstance(expected, str):
        if not isinstance(answer, str):
            return Check(exercise, answer, expected, False, explanation, _type_hint(answer, "a string") + hint)
        right = answer.strip() == expected
    else:
        right = answer == expected
    return Check(exercise, answer, expected, bool(right), explanation, hint)


def count(exercise: str, answer: Any, expected: int, explanation: str, hint: str) -> Check:
    """An exact count: `answer` must be a whole number equal to `expected` (6.0 is 6; 6.5 and True are wrong)."""
    number = _number(answer)
    if answer is not None and number is not None and not number.is_integer():
        return Check(exercise, answer, expected, False, explanation, f"a count is a whole number. {hint}")
    return check(exercise, answer, int(expected), explanation, hint)


def share(exercise: str, answer: Any, numerator: int, denominator: int, explanation: str, hint: str) -> Check:
    """A share of `denominator` files, within less than half of one file's share (1 / 2 denominator)."""
    expected = numerator / denominator if denominator else 0.0
    number = _number(answer)
    if number is not None and not 0.0 <= number <= 1.0:
        return Check(exercise, answer, round(expected, 3), False, explanation,
                     f"a share is between 0 and 1 (0.25 is a quarter). {hint}")
    return check(exercise, answer, expected, explanation, hint, tolerance=0.5 / max(denominator, 1))


# ------------------------------------------------------------------ 00: set-up and dataset

def readings_per_hour(answer, history, hour: str) -> Check:
    """0.1: how many record keys start with the hour `hour` (YYYYMMDDHH): drones x 60."""
    from pyspark.sql import functions as F

    expected = history.where(F.col("record_key").startswith(hour)).count()
    return count("0.1", answer, expected,
                 f"{expected:,} keys start with {hour}: one reading per drone per minute, 60 minutes.",
                 "a key is the reading's minute (YYYYMMDDHHmm) then the drone: how many minutes in an hour, "
                 "and how many drones report each minute? (see the dataset table)")


def record_key_of(answer, history, drone: str, minute: str) -> Check:
    """0.2: the record key of `drone`'s reading at `minute` ('YYYY-MM-DD HH:MM'), looked up in the history."""
    from pyspark.sql import functions as F

    found = (history.where((F.col("drone_id") == drone)
                           & (F.date_format("ts", "yyyy-MM-dd HH:mm") == minute))
             .select("record_key").limit(1).collect())
    expected = found[0][0] if found else None
    return check("0.2", answer, expected,
                 f"The key is {expected}: minute first, so keys sort by time, then by drone.",
                 "write the minute as 12 digits YYYYMMDDHHmm, then '_', then the drone id "
                 "(the keys of the first rows above show the pattern).")


# ------------------------------------------------------------------ 01: bulk insert

def candidate_files(exercise: str, answer, files: pd.DataFrame, key: str) -> Check:
    expected = files_covering(files, key)
    return count(exercise, answer, expected,
                 f"{expected} of {len(files)} base files have a key range containing {key}.",
                 "range pruning keeps every file whose [min key, max key] contains the key: which sort mode "
                 "gives each write task its own slice of the keys, and which lets every task see every hour?")


def busy_cores(exercise: str, answer, projection: pd.DataFrame, cores: int) -> Check:
    """How many of `cores` lanes the projected write stage uses (tasks run one per core)."""
    expected = int(projection["lane"].nunique())
    tasks = len(projection)
    number = _number(answer)
    why = (f"{int(number)} cores busy would need {int(number)} tasks running at once. "
           if number is not None and number > tasks and number.is_integer() else "")
    return count(exercise, answer, expected,
                 f"The write stage has {tasks} tasks, so at most {min(tasks, cores)} of {cores} cores work at "
                 f"once; the other {cores - expected} idle however big the cluster.",
                 why + "a core runs one task at a time, and the write stage has as many tasks as "
                 "bulk_insert_parallelism says.")


def write_waves(exercise: str, answer, tasks: int, cores: int) -> Check:
    """How many waves `tasks` write tasks need on `cores` cores: one task per core at a time, so
    ceil(tasks / cores). `tasks` and `cores` come from the run (its write stage, its Spark)."""
    expected = math.ceil(tasks / cores) if cores else 0
    number = _number(answer)
    why = ""
    if number is not None and number == tasks:
        why = f"{tasks} waves would mean one task at a time, but {cores} cores run {cores} tasks side by side. "
    elif number is not None and number == 1 and tasks > cores:
        why = f"one wave would need {tasks} cores. "
    return count(exercise, answer, expected,
                 f"{tasks} write tasks on {cores} cores: {cores} run at a time, so {expected} waves "
                 f"(ceil({tasks} / {cores})).",
                 why + "each core runs one task at a time, and a stage's tasks queue for the cores: count how "
                 "many rounds of as many tasks as cores it takes.")


# ------------------------------------------------------------------ 02: daily upserts

def range_pruning_candidates(exercise: str, answer, day) -> Check:
    """`day`: one day's row of `DailyRun.to_pandas()` or a WriteReport: files kept by range pruning."""
    expected, files = _range_pruning(day)
    return count(exercise, answer, expected,
                 f"Range pruning kept {expected} of {files} files: those whose key "
                 "range holds a key of yesterday (the corrections); today's new keys are above every range.",
                 "the batch corrects readings of the previous day and adds keys newer than any in the table: "
                 "count the files whose [min key, max key] meets the last day of the history.")


def _range_pruning(day) -> tuple[int, int]:
    """(files kept by range pruning, files in the snapshot) of a WriteReport or a day's frame row."""
    if isinstance(day, lf.WriteReport):
        return day.funnel.after_range_pruning, day.funnel.files_in_snapshot
    return int(day.after_range_pruning), int(day.files_in_snapshot)


def small_file_inserts(exercise: str, answer, report: lf.WriteReport, options: dict) -> Check:
    """How many of an upsert's inserts step 6 planned for its small files (all of them together),
    from the plan the upsert reported; the explanation adds what the files really took."""
    from labformat.config import parse_size
    from labformat.lab.frames import small_file_writes

    small = small_file_writes(report, options)
    planned = getattr(report.details, "small_file_inserts_planned", None)
    if not small or planned is None:
        raise lf.LabformatError("this upsert found no small file to pack inserts into")
    record = report.details.record_size
    most = parse_size(options.get("max_file_size", 0))
    rooms = ", ".join(f"({most:,} - {f.prev_size_bytes:,}) // {record} = {(most - f.prev_size_bytes) // record:,}"
                      for f in small)
    took = sum(f.inserts for f in small)
    return count(exercise, answer, planned,
                 f"Step 6 planned {planned:,} of the day's {report.rows_inserted:,} inserts for the small file(s): "
                 f"{rooms} records of room by the estimate. Rows then reach a file group by a hash of their key "
                 f"weighted by that plan, as in Hudi, so the small file(s) really took {took:,}.",
                 "a small file takes inserts until the estimate says it is full: the room left below "
                 "max_file_size, in bytes, divided by the estimated bytes per record (whole records), and "
                 "never more than the day's inserts.")


def shuffle_parallelism(exercise: str, answer, report: lf.WriteReport) -> Check:
    expected = report.details.shuffle_parallelism
    mode = report.options.get("upsert_parallelism_mode")
    return count(exercise, answer, expected,
                 f"The deduplicate shuffle ran {expected} tasks ({mode} mode).",
                 "Hudi 0.13+ uses min(input partitions, upsert_parallelism); the LEGACY mode always "
                 "uses upsert_parallelism, whatever the input.")


def range_pruning_share(exercise: str, answer, day) -> Check:
    """`day`: a WriteReport, or one day's row of `DailyRun.to_pandas()` (it has the funnel columns)."""
    kept, files = _range_pruning(day)
    return share(exercise, answer, kept, files,
                 f"{kept} of {files} files stayed candidates after range pruning ({kept / files:.0%}).",
                 "where do a day's random keys fall in the key space, and how wide is each file's "
                 "[min, max] range then?")


def bloom_files_opened(exercise: str, answer, sweep: pd.DataFrame, num_entries: int,
                       filter_type: str = BloomFilterTypeCode.SIMPLE) -> Check:
    """Files the exact check opened with the filter of `num_entries` (of `filter_type`, where the sweep
    names types) in a `sweeps.bloom_filter_sweep` run. Which absent keys a filter lets through is chance
    (at its predicted rate), so an answer within a tenth of the table's files (at least one file) is right."""
    rows = sweep[sweep["num_entries"] == num_entries]
    if "filter_type" in rows.columns:
        rows = rows[rows["filter_type"] == filter_type]
    if rows.empty:
        raise lf.LabformatError(f"no bloom filter of {num_entries:,} entries in this sweep")
    row = rows.iloc[0]
    expected, matched, files = int(row["files_after_bloom"]), int(row["files_matched"]), int(row["files_in_snapshot"])
    tolerance = max(1.0, 0.1 * files) + 0.5
    return check(exercise, answer, expected,
                 f"The exact check opened {expected} of {files} files for {int(row['corrections'])} keys that "
                 f"{matched} files hold: {expected - matched} opened in vain, {int(row['keys_read_by_exact_check']):,} "
                 "keys read.",
                 "every file is a candidate for every key (NONE spans the whole key range); a file is opened "
                 "when its filter passes at least one of the keys. A file without any of the keys passes "
                 "each of them at the filter's false-positive rate: how likely is it to pass none?",
                 tolerance=tolerance)


def files_rewritten_share(exercise: str, answer, day) -> Check:
    """The share of the table's files one upsert rewrote (`day`: a row of `DailyRun.to_pandas()`), as a
    number between 0 and 1. A corrected key makes its whole file be rewritten; with `u` corrections
    spread at random over `f` files, a file escapes all of them with probability (1 - 1/f)^u. Right:
    within one and a half files' share of what the run rewrote, or of that rule's expectation."""
    files, rewritten, updated = int(day["files_in_snapshot"]), int(day["files_rewritten"]), int(day["updated"])
    expected = 1 - (1 - 1 / files) ** updated if files else 0.0
    explanation = (f"Day 1 rewrote {rewritten} of {files} files ({rewritten / files:.0%}). Its {updated:,} corrected "
                   f"keys land anywhere in the key space, so a file escapes all of them with probability "
                   f"(1 - 1/{files})^{updated:,}: {1 - expected:.1%}; the rule expects {expected:.0%} rewritten.")
    hint = ("a share is between 0 and 1. A corrected key rewrites its whole file; where do yesterday's corrections "
            "fall among the files once keys are hashes? How many corrections does a file then expect "
            "(see `updated` in the month's table), and how likely is it to get none?")
    number = _number(answer)
    if answer is None:
        return Check(exercise, None, round(rewritten / files, 3), None, explanation, hint)
    if number is None or not 0.0 <= number <= 1.0:
        return Check(exercise, answer, round(rewritten / files, 3), False, explanation,
                     (_type_hint(answer, "a number") if number is None else "") + hint)
    slack = 1.5 / files
    right = abs(number - rewritten / files) <= slack or abs(number - expected) <= slack
    return Check(exercise, answer, round(rewritten / files, 3), right, explanation, hint)


def shuffle_partitions_choice(exercise: str, answer, startup_s: float, work_s: float, cores: int = 16,
                              tolerance: float = 0.05) -> Check:
    """A tuning choice: how many partitions to repartition a batch into before an upsert on `cores` cores
    (Hudi 0.13+ runs one deduplicate task per partition), for a stated `work_s` seconds of deduplicate
    work. Graded by the rule taught, `shuffle.shuffle_seconds`, with this run's per-task start-up: right
    when the choice's projected stage is within `tolerance` of the fastest of 1 to 200 partitions."""
    from labformat.lab.shuffle import best_task_counts, shuffle_seconds, waves

    work = work_s
    best, allowed = best_task_counts(cores, startup_s, work, tolerance)
    listed = _ranges(allowed)
    explanation_base = (f"On {cores} cores with a start-up of {startup_s * 1000:.0f} ms a task (measured here) and "
                        f"{work:,.1f} s of work: the fastest projection is {best:.2f} s; within {tolerance:.0%} of it: "
                        f"{listed} partitions.")
    rule = (f"A stage of n tasks takes ceil(n / {cores}) waves, each as long as one task: start-up + work / n. "
            "Which n leaves no core idle in the last wave, and what do more waves add?")
    hint = "answer with a whole number of partitions from 1 to 200. " + rule
    number = _number(answer)
    if answer is None:
        return Check(exercise, None, allowed, None, explanation_base, hint)
    if number is None or not number.is_integer() or not 1 <= number <= 200:
        return Check(exercise, answer, allowed, False, explanation_base,
                     (_type_hint(answer, "a whole number") if number is None else "") + hint)
    n = int(number)
    mine = shuffle_seconds(n, cores, startup_s, work)
    verdict = (f"{n} partitions: {_many(waves(n, cores), 'wave')} of {startup_s * 1000:.0f} ms + {work / n:.2f} s, "
               f"{mine:.2f} s projected ({mine / best:.2f}x the fastest). ")
    return Check(exercise, answer, allowed, n in allowed, verdict + explanation_base, verdict + rule)


def _ranges(numbers: list[int]) -> str:
    """[16, 31, 32, 33, 48] -> "16, 31-33, 48"."""
    parts, run = [], []
    for n in sorted(numbers):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [n]
    if run:
        parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(parts)


# ------------------------------------------------------------------ 03: query skipping

def _query_row(timings: pd.DataFrame, query: str):
    rows = timings[(timings["query"] == query) & (timings["skipping"] == "on")]
    if rows.empty:
        raise lf.LabformatError(f"no query {query!r} with skipping on in these timings")
    return rows.iloc[0]


def files_read(exercise: str, answer, timings: pd.DataFrame, query: str) -> Check:
    """Files the query read with skipping on, from the `compare_skipping` run already made."""
    row = _query_row(timings, query)
    expected = int(row["files_read"])
    return count(exercise, answer, expected,
                 f"The query read {expected} of {int(row['files_in_snapshot'])} base files.",
                 "column stats keep a file when the condition could match between its min and max; "
                 "ts follows the record key, so compare the window with each file's key range.")


def skipped_share(exercise: str, answer, timings: pd.DataFrame, query: str) -> Check:
    row = _query_row(timings, query)
    files, read = int(row["files_in_snapshot"]), int(row["files_read"])
    return share(exercise, answer, files - read, files,
                 f"Skipping dropped {files - read} of {files} base files.",
                 "a file can be skipped only when its [min, max] of the filtered column excludes the value; "
                 "what are the min and max drone_id of a file that holds a few minutes of every drone?")


# Sizes whose upserts rewrote within this share of the fewest rows tie: once files are no bigger than
# the rows a day's corrections touch, every size rewrites those rows, and only where a file boundary
# fell (a few rows on either side of the day) tells them apart.
REWRITE_TIE = 0.10


def _hours(answer) -> float | None:
    number = _number(answer)
    return number if number is not None and number > 0 else None


def _by_hours(tradeoff: pd.DataFrame) -> pd.DataFrame:
    """The sweep's rows keyed by the hours of readings a history file holds (rounded: 6, 24, 48...)."""
    frame = tradeoff.copy()
    frame["hours"] = frame["hours_per_file"].astype(float).round(2)
    return frame.set_index("hours")


def _hours_text(hours: float) -> str:
    return f"{hours:g} h"


def _sizes_hint(frame: pd.DataFrame) -> str:
    return "answer with one of " + ", ".join(f"{h:g}" for h in frame.index) + " (hours of readings a file holds)"


def fewest_rows_rewritten(exercise: str, answer, tradeoff: pd.DataFrame) -> Check:
    """Which file size of a `sweeps.file_size_sweep` (hours of readings a history file holds) made the
    day's upsert rewrite the fewest rows: every size within `REWRITE_TIE` of the fewest is right (files
    no bigger than the corrections' footprint all rewrite about that footprint)."""
    frame = _by_hours(tradeoff)
    rows = frame["rows_rewritten"].astype(int)
    tied = [h for h in frame.index if rows[h] <= rows.min() * (1 + REWRITE_TIE)]
    listing = ", ".join(f"{_hours_text(h)} a file: {rows[h]:,} rows" for h in frame.index)
    rule = ("A corrected row makes the upsert copy its whole file. The day's corrections touch about a tenth of "
            "yesterday's readings, spread over all its 24 hours, so every file holding any of yesterday is "
            "rewritten.")
    question = " Which sizes leave the fewest other rows in the files rewritten?"
    explanation = (f"Rows rewritten: {listing}. {rule} Files of a day or less each rewrite about that day "
                   f"({', '.join(_hours_text(h) for h in tied)} tie, within {REWRITE_TIE:.0%}); bigger files "
                   "drag along the older rows they hold.")
    given = _hours(answer)
    if answer is None:
        return Check(exercise, None, tied, None, explanation, rule + question)
    if given is None or given not in frame.index:
        return Check(exercise, answer, tied, False, explanation, f"{_sizes_hint(frame)}. {rule}")
    if given in tied:
        return Check(exercise, answer, tied, True, explanation, "")
    why = (f"Files of {_hours_text(given)} hold more than the day the corrections touch, so each file rewritten "
           "carries rows of days no correction touched. " if given > min(tied) else "")
    return Check(exercise, answer, tied, False, explanation, why + rule + question)


# Sizes whose daily cost is within this share of the cheapest are right too: the costs are stated
# round figures, and a tenth is finer than they are.
COST_TIE = 0.10


@dataclass(frozen=True)
class FileSizeWorkload:
    """A table's day, priced: `queries` queries a day that open every file (no file's stats can skip
    one), each file opened costing `file_s` seconds; `upserts` upserts a day, each row they rewrite
    costing `row_s` seconds. `daily_s` adds them up for one file size's counts."""

    queries: int
    file_s: float
    upserts: int
    row_s: float

    def query_s(self, files_opened: float) -> float:
        return self.queries * files_opened * self.file_s

    def upsert_s(self, rows_rewritten: float) -> float:
        return self.upserts * rows_rewritten * self.row_s

    def daily_s(self, files_opened: float, rows_rewritten: float) -> float:
        return self.query_s(files_opened) + self.upsert_s(rows_rewritten)

    def __str__(self) -> str:
        upserts = f"{self.upserts} upsert{'' if self.upserts == 1 else 's'}"
        return (f"{self.queries} queries a day x files opened x {self.file_s * 1000:g} ms + {upserts} a day x rows "
                f"rewritten x {self.row_s * 1000:g} ms")


def _priced(workload: FileSizeWorkload, files: int, rows: int) -> str:
    return (f"{workload.queries} x {files} files x {workload.file_s * 1000:g} ms = {workload.query_s(files):,.1f} s "
            f"for the queries + {workload.upserts} x {rows:,} rows x {workload.row_s * 1000:g} ms = "
            f"{workload.upsert_s(rows):,.1f} s for the upsert: {workload.daily_s(files, rows):,.1f} s a day")


def file_size_choice(exercise: str, answer, tradeoff: pd.DataFrame, workload: FileSizeWorkload,
                     reason: str | None = None) -> Check:
    """A tuning choice: the max file size (hours of readings a file holds) with the lowest daily cost
    for `workload`, priced with the sweep's own counts (`files_opened` by the query that cannot skip,
    `rows_rewritten` by the day's upsert). Every size within `COST_TIE` of the cheapest is right.
    `reason`, the learner's why, is shown back beside the run's numbers. The explanation also says
    at how many queries a day the size that rewrites the fewest rows and the one that opens the
    fewest files cost the same: where the choice turns."""
    frame = _by_hours(tradeoff)
    rows, opened = frame["rows_rewritten"].astype(int), frame["files_opened"].astype(int)
    cost = {h: workload.daily_s(opened[h], rows[h]) for h in frame.index}
    cheapest = min(cost.values())
    best = [h for h in frame.index if cost[h] <= cheapest * (1 + COST_TIE)]
    listing = "; ".join(f"{_hours_text(h)} a file: {_priced(workload, opened[h], rows[h])}" for h in frame.index)
    said = f" Your reason: {reason.strip()}" if isinstance(reason, str) and reason.strip() else ""
    explanation = (f"{listing}. Cheapest: {' or '.join(_hours_text(h) for h in best)} (within {COST_TIE:.0%})."
                   f"{_turning_point(workload, frame, rows, opened)}{said}")
    rule = (f"Price each size for a day: {workload}. Files opened per query and rows rewritten per upsert are the "
            "sweep's counts (files_opened, rows_rewritten); the size with the lowest total is right, and so is any "
            f"within {COST_TIE:.0%} of it.")
    given = _hours(answer)
    if answer is None:
        return Check(exercise, None, best, None, explanation, rule)
    if given is None or given not in frame.index:
        return Check(exercise, answer, best, False, explanation, f"{_sizes_hint(frame)}. {rule}")
    if given in best:
        return Check(exercise, answer, best, True, explanation, "")
    why = (f"Files of {_hours_text(given)}: {_priced(workload, opened[given], rows[given])}; another size is "
           f"cheaper, beyond the {COST_TIE:.0%} tie. ")
    return Check(exercise, answer, best, False, explanation, why + rule)


def _turning_point(workload: FileSizeWorkload, frame: pd.DataFrame, rows: pd.Series, opened: pd.Series) -> str:
    """Where the choice turns: the queries a day at which the size that rewrites the fewest rows (of
    those, the one opening the fewest files) and the size opening the fewest files cost the same."""
    floor = [h for h in frame.index if rows[h] <= rows.min() * (1 + REWRITE_TIE)]
    by_rows = min(floor, key=lambda h: (opened[h], h))
    by_files = min(frame.index, key=lambda h: (opened[h], rows[h]))
    saved_files, extra_rows = opened[by_rows] - opened[by_files], rows[by_files] - rows[by_rows]
    if by_rows == by_files or saved_files <= 0 or extra_rows <= 0 or workload.file_s <= 0:
        return ""
    queries = workload.upserts * extra_rows * workload.row_s / (saved_files * workload.file_s)
    return (f" The balance turns at about {queries:,.0f} queries a day: fewer, and {_hours_text(by_rows)} files (the "
            f"fewest rows rewritten) cost less; more, and {_hours_text(by_files)} files (the fewest files opened).")


def smallest_retention(exercise: str, answer, run) -> Check:
    """The smallest `hoodie.cleaner.commits.retained` that keeps a query as of the watched instant of
    `run` (`lab.clustering.retention`) readable: by KEEP_LATEST_COMMITS as Hudi's cleaner applies it,
    the completed writes after that instant (at least 1), since the snapshot of the write just before
    earliestCommitToRetain is kept whole too. When the run's cleans tried that count and one fewer, the
    expected value is what they showed (the smallest retention after which the query still ran)."""
    after = run.writes_after
    expected = run.smallest_readable if run.smallest_readable is not None else max(1, after)
    seen = ", ".join(f"{c.retained} retained: {'still readable' if c.readable else 'cleaned'}" for c in run.cleans)
    rule = ("KEEP_LATEST_COMMITS retains the last N completed commits, the latest counted, and earliestCommitToRetain "
            "is the oldest of them; each file group keeps its latest slice, every slice written at or after "
            "earliestCommitToRetain and its last slice before it, so the snapshot of the commit just before the N "
            "stays whole too. ")
    commits = f"{after} commit{'' if after == 1 else 's'}"
    explanation = (f"{rule}The report reads the snapshot of {run.instant}, and {commits} completed after it: "
                   f"retain {expected} and that snapshot is the one just before the retained commits ({seen}).")
    number = _number(answer)
    why = ""
    if answer is not None and number is not None and number.is_integer():
        if number < expected:
            why = (f"With {int(number)} retained, earliestCommitToRetain lies past the commit just after the report's "
                   "snapshot: a clean may delete file slices the report is still reading. ")
        elif number > expected:
            why = (f"{int(number)} is safe, but keeps files of more commits than the report needs: the cleaner also "
                   "keeps the snapshot just before the commits it retains. ")
    return count(exercise, answer, expected, explanation,
                 why + rule + "For each N, which commit is earliestCommitToRetain once the commits that complete "
                 "while the report reads are in, and which snapshot is the one just before it?")


# ------------------------------------------------------------------ 04: merge-on-read

def first_compaction_day(exercise: str, answer, run) -> Check:
    """After which day's upsert the first inline compaction ran (`lab.merge_on_read.side_by_side`'s run)."""
    days = run.compaction_days
    if not days:
        raise lf.LabformatError("no compaction ran in this run")
    first = days[0]
    return count(exercise, answer, first,
                 f"Day {first}: the bulk insert is delta commit 1, so day d's upsert is delta commit d + 1, and the "
                 f"first compaction follows delta commit {run.every}: max.delta.commits of them since the table began "
                 f"(compactions after the upserts of days {', '.join(map(str, days))}).",
                 "the bulk insert of a merge-on-read table is a delta commit too, and a compaction follows the "
                 "delta commit that makes max.delta.commits of them since the last compaction (or the start): "
                 "which delta commit is each day's upsert?")


def logs_after_compaction(exercise: str, answer, run) -> Check:
    """Log files the snapshot query reads after the first day a compaction ran (it runs before that query):
    the log files of the table's latest file slices then."""
    from labformat.lab.merge_on_read import MOR

    if not run.compaction_days:
        raise lf.LabformatError("no compaction ran in this run")
    day = run.compaction_days[0]
    row = run.of(MOR).loc[day]
    expected = int(row["logs_read"])
    return count(exercise, answer, expected,
                 f"Day {day}: the compaction merged {int(row['slices_compacted'])} file slices into new base files "
                 f"right after the upsert, so the query then reads {int(row['files_read'])} base files and {expected} "
                 "log files.",
                 "a compaction writes a new base file for every file slice that had log files; what is left "
                 "to merge on read right after it?")


def most_bytes_written(exercise: str, answer, totals: pd.DataFrame) -> Check:
    """Which `max.delta.commits` setting of the sweep (`lab.merge_on_read.sweep_totals`) wrote the most bytes:
    a label such as "every 3" or "never" (a bare number N means "every N"). By the rule, the one that
    compacted most often; when several compacted as often, each of them is right, as long as the
    setting that wrote the most is one of them (else only that one)."""
    top = str(totals["mb_written"].idxmax())
    most = int(totals["compactions"].max())
    often = [str(n) for n, c in totals["compactions"].items() if int(c) == most]
    right = often if top in often else [top]
    expected = " or ".join(right)
    given = f"every {int(answer)}" if _number(answer) is not None and float(answer).is_integer() else answer
    seen = "; ".join(f"{name}: {_many(int(r.compactions), 'compaction')}, {r.mb_written:,.1f} MB"
                     for name, r in totals.iterrows())
    tie = f" {' and '.join(often)} compacted as often: either is right." if len(right) > 1 else ""
    explanation = f"{seen}. {top} wrote the most: it compacted most often.{tie}"
    rule = "Each compaction writes a new base file for every file slice with logs, whole: far more than an upsert's logs."
    if answer is None:
        return Check(exercise, None, expected, None, explanation, rule)
    name = _setting_label(given, totals.index)
    if name is None:
        return Check(exercise, answer, expected, False, explanation,
                     "answer with one of " + ", ".join(repr(n) for n in totals.index) + ". " + rule)
    if name in right:
        return Check(exercise, answer, expected, True, explanation, rule)
    return Check(exercise, answer, expected, False, explanation,
                 f"{name} compacted {_many(int(totals.loc[name, 'compactions']), 'time')} over these days. " + rule)


# ------------------------------------------------------------------ 05: concurrent writers

def writers_conflict(exercise: str, answer, runs) -> Check:
    """Whether the race `runs` (lab.concurrency.race) ended in a WriteConflictError: True or False."""
    expected = any(r.outcome == "WriteConflictError" for r in runs)
    shared = "the two writers' hours lie in one base file's key range: both rewrite that file group"
    apart = "the two writers' hours lie in different base files: each rewrites its own file group"
    explanation = f"{shared}, so the one that commits second conflicts" if expected else f"{apart}, so both commit"
    hint = "compare each hour with the key ranges of the files above: a conflict is a shared file group, not a shared key."
    if answer is not None and not isinstance(answer, bool):
        return Check(exercise, answer, expected, False, explanation, f"answer True or False. {hint}")
    return check(exercise, answer, expected, explanation, hint)


def rows_kept_after_retry(exercise: str, answer, table: lf.Table, kept_value: float, retried_value: float) -> Check:
    """How many rows carry the value of the write that won the race (`kept_value`) once the
    conflicting writer retried its write (`retried_value`): a Spark count of the latest snapshot."""
    from labformat.lab.concurrency import rows_with

    kept, retried = rows_with(table, kept_value), rows_with(table, retried_value)
    return count(exercise, answer, kept,
                 f"{kept:,} rows still carry {kept_value}: the retry planned on the snapshot that holds the winner's "
                 f"commit, so its new slice of the shared file group was merged from the winner's, and the retry "
                 f"added its own {retried:,} rows of {retried_value}. Nothing was lost.",
                 "the retry is a new write: which file slice does it read and merge its corrections into, the one "
                 "it read before the conflict or the latest?")


# ------------------------------------------------------------------ 06: choosing an index

def _index_run(runs: pd.DataFrame, workload: str, index: str):
    return runs[(runs.workload == workload) & (runs["index"] == index)].iloc[0]


def simple_keys_read(exercise: str, answer, runs: pd.DataFrame) -> Check:
    """6.1: the record keys SIMPLE's tag step read on the time-ordered workload (`lab.indexes.compare`)."""
    run = _index_run(runs, "time-ordered", IndexType.SIMPLE)
    return count(exercise, answer, int(run.keys_read),
                 f"SIMPLE read {int(run.keys_read):,} keys: every key of the week the corrections fall in. The "
                 "new day opens a week that holds no file yet, so its readings are inserts without a lookup.",
                 "the batch names two weeks: the one of the day before (its corrections) and the one of the new "
                 "day. SIMPLE reads every stored key of the weeks it names; which of them holds files?")


def indexes_leaving_duplicates(exercise: str, answer, runs: pd.DataFrame) -> Check:
    """6.2: how many of the indexes left at least one key stored twice after the moves workload."""
    moves = runs[runs.workload == "moves"]
    twice = [str(i) for i, d in zip(moves["index"], moves.duplicates) if d and d > 0]
    return count(exercise, answer, len(twice),
                 f"{', '.join(twice) or 'none'} left keys stored twice: a non-global index looks a key up only in "
                 "the week its record names, finds nothing there and inserts it, leaving the old copy.",
                 "where does each index look for a record whose week changed? Only a global index looks in every "
                 "partition.")


def bucket_pruning_slices(exercise: str, answer, funnel, partitions: int) -> Check:
    """6.3: file slices left after bucket pruning for a query fixing one record key."""
    return count(exercise, answer, funnel.after_bucket_pruning,
                 f"{funnel.after_bucket_pruning} of {funnel.after_partition_pruning} file slices: one bucket can hold "
                 f"the key in each of the {partitions} partitions.",
                 "a key hashes to one bucket number, the same in every partition; a query on the key alone cannot "
                 "skip a partition.")


def rows_the_resize_rewrote(exercise: str, answer, split) -> Check:
    """6.4: the rows the consistent-hashing resize rewrote (`lab.indexes.bucket_split`)."""
    return count(exercise, answer, split.rows_rewritten,
                 f"the resize rewrote {split.rows_rewritten:,} of the table's {split.table_rows:,} rows: only the "
                 f"{split.buckets_split} buckets past the split threshold, those of the day the fleet doubled.",
                 "a resize rewrites the buckets past the split threshold and nothing else: which day's buckets "
                 "grew past it, and how many readings does that day hold?")


def cheapest_index(exercise: str, answer, runs: pd.DataFrame, workload: str, moves: bool = False) -> Check:
    """6.5, a tuning choice: the index whose upsert of `workload` did the least work, counted as what its
    tag step read (record keys from data files, or RECORD_INDEX's index entries) plus the rows its write
    step rewrote; with `moves`, records may change partition, so only the indexes that left no key
    stored twice on the moves workload qualify. Every index tied at the least is right."""
    chosen = runs[runs.workload == workload].set_index("index")
    read = chosen["read"].astype(int)
    work = read + chosen["rows_rewritten"].astype(int)
    allowed = list(work.index)
    if moves:
        left = runs[runs.workload == "moves"].set_index("index").duplicates
        allowed = [i for i in allowed if not (left.get(i) or 0)]
    least = int(work[allowed].min())
    right = [i for i in allowed if int(work[i]) == least]
    seen = "; ".join(f"{i} {int(read[i]):,} + {int(chosen.loc[i, 'rows_rewritten']):,}" for i in work.index)
    explanation = (f"read + rewritten on {workload}: {seen}. The least work, {least:,}, is "
                   f"{' and '.join(right)}'s" + (" among the indexes that left no key twice" if moves else "") + ".")
    hint = ("an upsert's work is what its tag step reads (record keys from data files, or index entries) plus the "
            "rows its write step rewrites. On random keys range pruning spares no file and a day's corrections "
            "reach every file of their week, whatever the index; which index then reads the least?")
    if answer is None:
        return Check(exercise, None, right, None, explanation, hint)
    if not isinstance(answer, str):
        return Check(exercise, answer, right, False, explanation, _type_hint(answer, "an index's name") + hint)
    given = answer.strip().upper()
    if given not in work.index:
        return Check(exercise, answer, right, False, explanation,
                     f"answer with one of {', '.join(work.index)}. {hint}")
    if given in right:
        return Check(exercise, answer, right, True, explanation, hint)
    why = (f"{given} left keys stored twice when records changed week. " if given not in allowed else
           f"{given} reads {int(read[given]):,} and rewrites {int(chosen.loc[given, 'rows_rewritten']):,}: "
           f"{int(work[given]) - least:,} more than the least. ")
    return Check(exercise, answer, right, False, explanation, why + hint)


def bucket_count(exercise: str, answer, bytes_per_row: float, rows_per_day: int, days: int,
                 target_mb: float) -> Check:
    """6.6, a tuning choice: the bucket count for a partition of `days` days of `rows_per_day` rows, at
    the run's measured base-file `bytes_per_row`, so that each bucket ends its partition between half
    the target size and the target (seed 003: a bucket near its target, neither too big for the
    query's parallelism nor a small file). Every count in that range is right."""
    partition = bytes_per_row * rows_per_day * days
    target = target_mb * 2**20
    low, high = math.ceil(partition / target), math.floor(2 * partition / target)
    explanation = (f"a partition of {rows_per_day:,} x {days} rows at {bytes_per_row:.1f} bytes a row is "
                   f"{partition / 2**20:,.0f} MB: {low} to {high} buckets keep each between {target_mb / 2:,.0f} and "
                   f"{target_mb:,.0f} MB.")
    hint = ("a bucket holds its share of the partition for good (the count is fixed at creation): the partition's "
            "bytes at the end (rows x bytes per row) over the count must stay at most the target and at least half "
            "of it.")
    number = _number(answer)
    if answer is None:
        return Check(exercise, None, (low, high), None, explanation, hint)
    if number is None or not number.is_integer():
        return Check(exercise, answer, (low, high), False, explanation, "answer with a whole number of buckets. " + hint)
    if low <= number <= high:
        return Check(exercise, answer, (low, high), True, explanation, hint)
    size = partition / number / 2**20 if number > 0 else float("inf")
    why = (f"{int(number)} buckets would hold {size:,.0f} MB each, "
           + ("above the target. " if size > target_mb else "under half the target: small files. "))
    return Check(exercise, answer, (low, high), False, explanation, why + hint)


# ------------------------------------------------------------------ 08: three formats

def most_planner_files(exercise: str, answer, run) -> Check:
    """Which format's planner reads the most files after the last day (`lab.formats.three_formats`'s run):
    "labformat", "delta-rs" or "pyiceberg"; any of the formats tied for the most is right."""
    last = run.planner().iloc[-1]
    most = [str(f) for f, n in last.items() if n == last.max()]
    expected = answer.strip() if isinstance(answer, str) and answer.strip() in most else most[0]
    counts = ", ".join(f"{fmt} {int(n)}" for fmt, n in last.items())
    why = ""
    if isinstance(answer, str) and answer.strip() in last.index and answer.strip() not in most:
        why = f"{answer.strip()}'s planner reads {int(last[answer.strip()])} files, fewer than {int(last.max())}. "
    return check(exercise, answer, expected,
                 f"after commit {int(run.planner().index[-1])} a planner reads: {counts}. pyiceberg adds manifests with "
                 "every commit and merges none (commit.manifest-merge.enabled is off by default); Delta reads its last "
                 "checkpoint and the commits after it; labformat the metadata table's latest snapshots.",
                 why + "answer with one of " + ", ".join(repr(f) for f in last.index)
                 + ". Which format's reader must open one more file for each commit, with no checkpoint or snapshot that "
                 "replaces them?")


def delta_planner_files(exercise: str, answer, run) -> Check:
    """How many files delta-rs's planner reads after the run's last commit (`lab.formats.three_formats`):
    `_last_checkpoint`, the checkpoint it names and every commit after it (every commit before the first)."""
    delta = run.commits[run.commits["format"] == "delta-rs"].set_index("commit")
    last = int(delta.index.max())
    expected = int(delta.loc[last, "planner files"])
    checkpoints = run.checkpoints()
    newest = max(checkpoints) if checkpoints else None
    number = _number(answer)
    why = ""
    if number is not None and number == last + 1:
        why = f"{last + 1} is every commit file the log keeps: a reader starts from the newest checkpoint instead. "
    elif number is not None and newest is not None and number == last - newest:
        why = "the commits after the checkpoint are not all: the reader opens the checkpoint and its pointer too. "
    seen = (f"the checkpoint written at commit {newest}, `_last_checkpoint` and the {last - newest} commit(s) after it"
            if newest is not None else "every commit (no checkpoint yet)")
    return count(exercise, answer, expected,
                 f"after commit {last} delta-rs's planner reads {expected} files: {seen}; the log keeps "
                 f"{int(delta.loc[last, 'commit files'])} commit files.",
                 why + f"a Delta reader opens `_last_checkpoint`, the checkpoint it names, and each commit after that "
                 f"checkpoint; delta-rs writes a checkpoint after every {run.checkpoint_interval}th commit, counting "
                 "the history's load as commit 0 (so after commits interval - 1, 2 x interval - 1, ...).")


def _setting_label(given, labels) -> str | None:
    """The compaction setting `given` names, of `labels` ("every 3", "never"), read as a learner may
    type it ("Every 3", "every  3"); None when it names none."""
    if not isinstance(given, str):
        return None
    return {label.lower(): label for label in labels}.get(" ".join(given.split()).lower())


def _many(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def rarest_compaction_within(exercise: str, answer, sweep: pd.DataFrame, budget: int) -> Check:
    """When to compact: of the sweep's settings (`lab.merge_on_read.side_by_side(...).sweep`), those that
    compacted the fewest times while no day's query merged more than `budget` log files into one base
    file (`lab.merge_on_read.within_budget`; every setting that ties is right); a label such as
    "every 3" or "never" (a bare number N means "every N")."""
    from labformat.lab.merge_on_read import within_budget

    per = within_budget(sweep, budget)
    right = [name for name in per.index if per.loc[name, "rarest"]]
    given = f"every {int(answer)}" if _number(answer) is not None and float(answer).is_integer() else answer
    seen = "; ".join(f"{name}: {_many(int(r.compactions), 'compaction')}, at most "
                     f"{_many(int(r.max_logs_per_slice), 'log file')} in one file slice" for name, r in per.iterrows())
    rule = ("Between two compactions each upsert adds a log file to every file slice it corrects, and a compaction runs "
            "right after delta commit N, 2N, ... (the bulk insert is the first), before that day's query: the deepest "
            "slice a query meets holds N - 1 log files once the run is past its first compaction. Of the settings "
            "whose worst query stays within the budget, the rarest compacts the fewest times.")
    expected = " or ".join(right) if right else "none"
    explanation = (f"{seen}. Within {budget}: {', '.join(n for n in per.index if per.loc[n, 'within']) or 'none'}; "
                   f"the fewest compactions among them: {expected}.")
    if answer is None:
        return Check(exercise, None, expected, None, explanation, rule)
    name = _setting_label(given, per.index)
    if name is None:
        return Check(exercise, answer, expected, False, explanation,
                     "answer with one of " + ", ".join(repr(n) for n in per.index) + ". " + rule)
    if per.loc[name, "rarest"]:
        return Check(exercise, answer, expected, True, explanation, rule)
    row = per.loc[name]
    if not row["within"]:
        why = (f"{name}'s worst query merged {int(row['max_logs_per_slice'])} log files into one base file, over the "
               f"budget of {budget}. ")
    else:
        why = (f"{name} stays within the budget but compacted {int(row['compactions'])} times, more than a rarer setting "
               f"that also stays within it. ")
    return Check(exercise, answer, expected, False, explanation, why + rule)
