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


def bloom_files_opened(exercise: str, answer, sweep: pd.DataFrame, num_entries: int) -> Check:
    """Files the exact check opened with the filter of `num_entries` in a `sweeps.bloom_filter_sweep`
    run. Which absent keys a filter lets through is chance (at its predicted rate), so an answer
    within a tenth of the table's files (at least one file) is right."""
    rows = sweep[sweep["num_entries"] == num_entries]
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


def fewest_rows_rewritten(exercise: str, answer, tradeoff: pd.DataFrame) -> Check:
    """Which history file count of a `sweeps.file_size_sweep` made day 1's upsert rewrite the fewest
    rows (any of them when several tie)."""
    rows = tradeoff.set_index("history_files")["rows_rewritten"].astype(int)
    best = sorted(int(n) for n in rows.index[rows == rows.min()])
    listing = ", ".join(f"{int(n)} files: {r:,} rows" for n, r in rows.items())
    given = _number(answer)
    right = None if answer is None else (given is not None and given.is_integer() and int(given) in best)
    explanation = (f"Rows rewritten: {listing}. The smaller the files, the fewer of the older days' rows share "
                   "a file with the corrections of the last day, and the fewer the upsert copies along.")
    hint = (f"answer with one of {', '.join(str(int(n)) for n in rows.index)}: a corrected row makes the upsert "
            "copy its whole file; which size leaves the fewest other rows beside the corrections?")
    return Check(exercise, answer, best[0] if len(best) == 1 else best, right, explanation, hint)


def smallest_retention(exercise: str, answer, run) -> Check:
    """The smallest `hoodie.cleaner.commits.retained` that keeps time travel to the watched instant of
    `run` (`lab.clustering.retention`): the completed writes from it to the latest, both counted."""
    expected = run.writes_since
    seen = ", ".join(f"{c.retained} retained: {'still readable' if c.readable else 'cleaned'}" for c in run.cleans)
    return count(exercise, answer, expected,
                 f"KEEP_LATEST_COMMITS keeps every file slice the last N completed commits read; {run.instant} is "
                 f"{expected} commits back, counting the latest ({seen}).",
                 "the cleaner keeps what the last N commits can read, counting the latest: count the commits "
                 "from the bulk insert to the latest in the timeline above, both included.")


# ------------------------------------------------------------------ 04: merge-on-read

def compactions(exercise: str, answer, run) -> Check:
    """How many inline compactions the month's upserts triggered (`lab.merge_on_read.side_by_side`'s run)."""
    days = run.compaction_days
    expected = len(days)
    upserts = int(run.days["day"].max()) if len(run.days) else 0
    return count(exercise, answer, expected,
                 f"{expected} compactions, after the upserts of days {', '.join(map(str, days)) or '(none)'}: the bulk "
                 f"insert is delta commit 1, the {upserts} upserts are delta commits 2 to {upserts + 1}, and a "
                 f"compaction follows once {run.every} delta commits have completed since the last one.",
                 "the bulk insert of a merge-on-read table is a delta commit too; count the delta commits and "
                 "divide by hoodie.compact.inline.max.delta.commits.")


def logs_after_compaction(exercise: str, answer, run) -> Check:
    """Log files the snapshot query read on the first day a compaction ran (it runs before that query)."""
    from labformat.lab.merge_on_read import MOR

    if not run.compaction_days:
        raise lf.LabformatError("no compaction ran in this run")
    day = run.compaction_days[0]
    row = run.of(MOR).loc[day]
    expected = int(row["logs_read"])
    return count(exercise, answer, expected,
                 f"Day {day}: the compaction merged {int(row['slices_compacted'])} file slices into new base files "
                 f"right after the upsert, so the query read {int(row['files_read'])} base files and {expected} "
                 "log files.",
                 "a compaction writes a new base file for every file slice that had log files; what is left "
                 "to merge on read right after it?")


def most_bytes_written(exercise: str, answer, totals: pd.DataFrame) -> Check:
    """Which `max.delta.commits` setting of the sweep (`lab.merge_on_read.sweep_totals`) wrote the most bytes:
    a label such as "every 2" or "never" (a bare number N means "every N")."""
    expected = str(totals["mb_written"].idxmax())
    given = f"every {int(answer)}" if _number(answer) is not None and float(answer).is_integer() else answer
    runs = ", ".join(f"{name}: {int(n)}" for name, n in totals["compactions"].items())
    return check(exercise, given, expected, f"{expected} wrote the most bytes: it compacted most often "
                 f"(compactions {runs}), and each compaction writes a new base file for every file slice with logs.",
                 "answer with one of " + ", ".join(repr(n) for n in totals.index)
                 + ". Each compaction writes a new base file for every file slice with logs, whole.")


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


def rarest_compaction_within(exercise: str, answer, sweep: pd.DataFrame, budget: int) -> Check:
    """When to compact: of the compaction sweep's settings (`lab.merge_on_read.compaction_sweep`), the one
    that compacted the fewest times while no day's query merged more than `budget` log files; a label
    such as "every 2" or "never" (a bare number N means "every N")."""
    per = sweep.groupby("setting", sort=False).agg(compactions=("compacted", "sum"), most_logs=("logs_read", "max"))
    within = per[per["most_logs"] <= budget]
    expected = str(within["compactions"].idxmin()) if len(within) else "none"
    given = f"every {int(answer)}" if _number(answer) is not None and float(answer).is_integer() else answer
    seen = "; ".join(f"{name}: {int(r.compactions)} compactions, at most {int(r.most_logs)} log files a query"
                     for name, r in per.iterrows())
    return check(exercise, given, expected,
                 f"{seen}. Compacting less often lets log files pile up between compactions; {expected} is the "
                 f"rarest that keeps every query within {budget}.",
                 "answer with one of " + ", ".join(repr(n) for n in per.index) + ". Between two compactions each "
                 "day's upsert adds about one log file per corrected file group (the counts above), and a query "
                 "merges every log file since the last compaction.")
