"""The rules of notebook 05 (concurrent writers): who commits, who conflicts or is refused, and which rows the table keeps.

Each race is decided by its outcomes ("committed", "WriteConflictError", "ConcurrentWriteError") and by
the rows of the table that carry each writer's marker value afterwards, against the readings each
writer corrected. The margin of these claims is every row: a lost update loses some rows, not all.
"""

from __future__ import annotations

from labformat.lab.claims import rule

COMMITTED, CONFLICT, REFUSED = "committed", "WriteConflictError", "ConcurrentWriteError"


def _rows(rows_a: int, rows_b: int, readings: int) -> str:
    return f"rows with A's value {rows_a:,}, with B's {rows_b:,}, of {readings:,} readings each writer corrected"


@rule("under OCC, two writers on different file groups both commit, and every reading each one corrected is in the table",
      absent=[dict(outcomes=[CONFLICT, COMMITTED], rows_a=0, rows_b=240, readings=240),
              # both "committed" but the later commit hid the earlier one's slice: a lost update
              dict(outcomes=[COMMITTED, COMMITTED], rows_a=240, rows_b=0, readings=240),
              dict(outcomes=[COMMITTED, COMMITTED], rows_a=240, rows_b=239, readings=240)],
      present=dict(outcomes=[COMMITTED, COMMITTED], rows_a=240, rows_b=240, readings=240))
def disjoint_writers_both_commit(outcomes: list[str], rows_a: int, rows_b: int, readings: int) -> tuple[bool, str]:
    held = list(outcomes) == [COMMITTED, COMMITTED] and rows_a == rows_b == readings > 0
    return held, f"A {outcomes[0]}, B {outcomes[1]}; {_rows(rows_a, rows_b, readings)}"


@rule("under OCC, two writers on one file group: the later commit fails with a conflict and leaves none of its rows, "
      "the earlier keeps every one of its own",
      absent=[dict(outcomes=[COMMITTED, COMMITTED], rows_a=240, rows_b=0, readings=240),  # the lost update
              dict(outcomes=[CONFLICT, COMMITTED], rows_a=12, rows_b=240, readings=240),  # half a write left behind
              dict(outcomes=[CONFLICT, CONFLICT], rows_a=0, rows_b=0, readings=240)],
      present=dict(outcomes=[CONFLICT, COMMITTED], rows_a=0, rows_b=240, readings=240))
def shared_file_group_conflicts(outcomes: list[str], rows_a: int, rows_b: int, readings: int) -> tuple[bool, str]:
    held = list(outcomes) == [CONFLICT, COMMITTED] and rows_a == 0 and rows_b == readings > 0
    return held, f"A {outcomes[0]}, B {outcomes[1]}; {_rows(rows_a, rows_b, readings)}"


@rule("the conflicting writer's retry plans on the new snapshot: after it, every reading of both writers is in the table",
      absent=[dict(rows_a=240, rows_b=0, readings=240),  # a retry from the stale slice would drop the winner's rows
              dict(rows_a=0, rows_b=240, readings=240)],
      present=dict(rows_a=240, rows_b=240, readings=240))
def retry_keeps_both(rows_a: int, rows_b: int, readings: int) -> tuple[bool, str]:
    return rows_a == rows_b == readings > 0, f"after A's retry: {_rows(rows_a, rows_b, readings)}"


@rule("the timeline records one rollback instant for each write that failed with a conflict",
      absent=[dict(rollbacks=0, conflicts=1), dict(rollbacks=1, conflicts=2), dict(rollbacks=0, conflicts=0)],
      present=[dict(rollbacks=1, conflicts=1), dict(rollbacks=2, conflicts=2)])
def a_rollback_per_conflict(rollbacks: int, conflicts: int) -> tuple[bool, str]:
    return rollbacks == conflicts >= 1, f"{rollbacks} rollback instant(s) on the timeline for {conflicts} conflict(s)"


@rule("in labformat's single-writer mode a second writer is refused while the first is in flight, even on another file group: "
      "it writes none of its rows, the first commits every one of its",
      absent=[dict(outcomes=[COMMITTED, COMMITTED], rows_a=240, rows_b=240, readings=240),
              dict(outcomes=[COMMITTED, REFUSED], rows_a=240, rows_b=3, readings=240)],
      present=dict(outcomes=[COMMITTED, REFUSED], rows_a=240, rows_b=0, readings=240))
def single_writer_refuses_the_second(outcomes: list[str], rows_a: int, rows_b: int, readings: int) -> tuple[bool, str]:
    held = list(outcomes) == [COMMITTED, REFUSED] and rows_b == 0 and rows_a == readings > 0
    return held, f"A {outcomes[0]}, B {outcomes[1]}; {_rows(rows_a, rows_b, readings)}"
