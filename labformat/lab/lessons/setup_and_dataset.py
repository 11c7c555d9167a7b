"""The rules behind notebook 00's claims: a first table on disk, its rows, key ranges, timeline and file names."""

from __future__ import annotations

from labformat.lab.claims import rule

MINUTES_PER_DAY = 1440
COMPLETED_COMMIT = ["commit.requested", "inflight", "commit"]


@rule("the bulk insert wrote exactly one row per drone per minute of the history (drones x 1,440 x days)",
      absent=[dict(rows=5_759, drones=2, days=2), dict(rows=11_520, drones=2, days=2)],
      present=dict(rows=5_760, drones=2, days=2))
def one_row_per_drone_minute(rows: int, drones: int, days: int) -> tuple[bool, str]:
    expected = drones * MINUTES_PER_DAY * days
    return rows == expected, f"{rows:,} rows written; {drones} drones x 1,440 minutes x {days} days = {expected:,}"


@rule("GLOBAL_SORT's base files have disjoint key ranges: no key lies in the range of more than 1 of them",
      absent=[dict(files_at_one_key=2, files=4), dict(files_at_one_key=1, files=1)],
      present=dict(files_at_one_key=1, files=4))
def global_sort_disjoint(files_at_one_key: int, files: int) -> tuple[bool, str]:
    # One file is disjoint from nothing: the claim is about several files.
    return files >= 2 and files_at_one_key == 1, f"at most {files_at_one_key} of {files} files hold any one key"


@rule("range pruning keeps exactly 1 base file for every sampled key, of 2 or more (the footers' key ranges decide)",
      absent=[dict(kept=[1, 2, 1], files=4), dict(kept=[1, 1], files=1), dict(kept=[], files=4)],
      present=dict(kept=[1, 1, 1, 1], files=4))
def one_file_per_key(kept: list[int], files: int) -> tuple[bool, str]:
    held = files >= 2 and len(kept) > 0 and all(k == 1 for k in kept)
    shown = f"{min(kept)} to {max(kept)}" if kept else "no"
    return held, f"{shown} of {files} files kept for each of {len(kept)} sampled keys"


@rule("a completed commit leaves exactly 3 instant files on the timeline, in order: requested, inflight, completed",
      absent=[dict(states=["commit.requested", "inflight"]), dict(states=["inflight", "commit.requested", "commit"])],
      present=dict(states=COMPLETED_COMMIT))
def three_instant_files(states: list[str]) -> tuple[bool, str]:
    return list(states) == COMPLETED_COMMIT, " -> ".join(states) or "no instant files"


@rule("every base file's name carries its file group, the task that wrote it and the commit's instant: "
      "1 name per file group written, task partitions 0 to n-1, the one instant of the commit",
      absent=[dict(files=4, file_groups_named=3, commit_instant_named=4, task_partitions=[0, 1, 2, 3]),
              dict(files=4, file_groups_named=4, commit_instant_named=4, task_partitions=[0, 0, 1, 2]),
              dict(files=4, file_groups_named=4, commit_instant_named=3, task_partitions=[0, 1, 2, 3])],
      present=dict(files=4, file_groups_named=4, commit_instant_named=4, task_partitions=[0, 1, 2, 3]))
def names_carry_group_task_instant(files: int, file_groups_named: int, commit_instant_named: int,
                                   task_partitions: list[int]) -> tuple[bool, str]:
    """`file_groups_named`: distinct file ids in the names that are file groups the write reported;
    `commit_instant_named`: names whose instant is the commit's."""
    held = (files > 0 and file_groups_named == files and commit_instant_named == files
            and sorted(task_partitions) == list(range(files)))
    return held, (f"{files} files: {file_groups_named} file groups named, {commit_instant_named} names with the "
                  f"commit's instant, task partitions {sorted(task_partitions)}")
